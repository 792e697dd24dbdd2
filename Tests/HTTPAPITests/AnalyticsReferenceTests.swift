import EventStore
import Foundation
import JSON
import Ledger
@testable import SubledgerApp
import SubledgerAppTesting
import Testing

/// The analytics against a reference model written from the definitions
/// (the analytics contract in docs/analytics.md): a seeded dataset of a few
/// hundred subscribers over 120 days, posted in shuffled order, and every
/// metric of every interval by day, week and month compared value for value
/// with what the model computes from the planned periods.
@Suite("Analytics against the reference model")
struct AnalyticsReferenceTests {
    static let from = AnalyticsDataset.windowStart
    static let to = AnalyticsDataset.windowEnd

    /// Every series and cohort, Production and Sandbox, both stores and
    /// Google Play alone, equal the model's; so do the last days before now,
    /// when support grants (which must not count) are running.
    @Test func everyMetricOfEveryIntervalEqualsTheModel() async throws {
        var dataset = AnalyticsDataset(seed: 45)
        for (name, count) in dataset.cases { #expect(count > 0, "the dataset has no \(name)") }
        let model = AnalyticsReferenceModel(subscriptions: dataset.subscriptions)
        let facts = dataset.shuffledFacts()
        try await withApp(try await AnalyticsReference.dependencies()) { client, dependencies in
            try await AnalyticsReference.send(facts, client: client, dependencies: dependencies)
            try await AnalyticsReference.project(dependencies)

            for interval in AnalyticsReferenceModel.Interval.allCases {
                let answered = try await AnalyticsReference.series(client, interval, from: Self.from, to: Self.to)
                AnalyticsReference.compare(answered, model.series(interval, from: Self.from, to: Self.to), "\(interval)")
            }
            let sandbox = AnalyticsReferenceModel.Filter(environment: "Sandbox")
            let play = AnalyticsReferenceModel.Filter(store: .googlePlay)
            for interval in [AnalyticsReferenceModel.Interval.day, .month] {
                AnalyticsReference.compare(
                    try await AnalyticsReference.series(client, interval, from: Self.from, to: Self.to, query: "&environment=Sandbox"),
                    model.series(interval, from: Self.from, to: Self.to, sandbox), "Sandbox \(interval)")
                AnalyticsReference.compare(
                    try await AnalyticsReference.series(client, interval, from: Self.from, to: Self.to, query: "&store=google_play"),
                    model.series(interval, from: Self.from, to: Self.to, play), "Google Play \(interval)")
            }
            let today = AnalyticsReferenceModel.intervals(.day, from: Date(), to: Date() + 1)[0].start
            AnalyticsReference.compare(
                try await AnalyticsReference.series(client, .day, from: today - 3 * 86_400, to: today + 2 * 86_400),
                model.series(.day, from: today - 3 * 86_400, to: today + 2 * 86_400), "around now, grants running")

            for interval in [AnalyticsReferenceModel.Interval.month, .week] {
                let answered = try await AnalyticsReference.cohorts(client, interval, from: Self.from, to: Self.to)
                AnalyticsReference.compare(answered, model.cohorts(interval, from: Self.from, to: Self.to, now: Date()),
                                           "\(interval) cohorts")
            }
            AnalyticsReference.compare(
                try await AnalyticsReference.cohorts(client, .month, from: Self.from, to: Self.to, query: "&environment=Sandbox"),
                model.cohorts(.month, from: Self.from, to: Self.to, now: Date(), sandbox), "Sandbox month cohorts")
        }
    }

    /// A refund posted after everything else, dated in the past, changes
    /// exactly the past intervals the model says it changes; then a
    /// blue-green rebuild of the projection gives the same tables and answers.
    @Test func aLateRefundChangesThePastAsTheModelSaysAndARebuildEqualsLive() async throws {
        var dataset = AnalyticsDataset(seed: 46, subscribers: 200)
        let model = AnalyticsReferenceModel(subscriptions: dataset.subscriptions)
        let facts = dataset.shuffledFacts()
        // A monthly renewed at least once, its last period paid, unrefunded, without grace, inside the window.
        let index = try #require(model.subscriptions.indices.first { index in
            let subscription = model.subscriptions[index]
            guard let last = subscription.periods.last, subscription.periods.count >= 2, !last.isTrial, last.price != nil,
                  subscription.store == .appStore, subscription.environment == "Production", !subscription.familyShared,
                  subscription.refund == nil, subscription.graceAfter[subscription.periods.count - 1] == nil else { return false }
            return last.start > Self.from + 20 * 86_400 && last.end < Self.to - 20 * 86_400
        })
        let last = model.subscriptions[index].periods.last!
        let revocation = last.start + (last.end.timeIntervalSince(last.start) / 2).rounded()
        var refunded = model
        refunded.subscriptions[index].refund = (revocation, 50_000)
        let expected = refunded
        try await withApp(try await AnalyticsReference.dependencies()) { client, dependencies in
            try await AnalyticsReference.send(facts, client: client, dependencies: dependencies)
            try await AnalyticsReference.project(dependencies)
            var before: [AnalyticsReferenceModel.Interval: [JSONValue]] = [:]
            for interval in AnalyticsReferenceModel.Interval.allCases {
                before[interval] = try await AnalyticsReference.series(client, interval, from: Self.from, to: Self.to)
                AnalyticsReference.compare(before[interval]!, model.series(interval, from: Self.from, to: Self.to), "before, \(interval)")
            }

            let refund = #"{"type": "refund", "transactionId": "\#(last.transactionID)", "revocationDate": "\#(RFC3339.format(revocation))", "revocationType": "REFUND_PRORATED", "revocationPercentage": 50000}"#
            let response = try await client.post("/v1/subscribers/\(model.subscriptions[index].subscriberID)/events", refund)
            #expect(response.status == .created, "\(response.text)")
            try await AnalyticsReference.project(dependencies)
            for interval in AnalyticsReferenceModel.Interval.allCases {
                let after = try await AnalyticsReference.series(client, interval, from: Self.from, to: Self.to)
                AnalyticsReference.compare(after, expected.series(interval, from: Self.from, to: Self.to), "after the refund, \(interval)")
                // The intervals that changed are the ones the model changed, and some did.
                let changed = zip(before[interval]!, after).filter { $0.0 != $0.1 }.compactMap { $0.1["start"]?.string }
                let modelChanged = zip(model.series(interval, from: Self.from, to: Self.to),
                                       expected.series(interval, from: Self.from, to: Self.to))
                    .filter { $0.0 != $0.1 }.compactMap { $0.1["start"]?.string }
                #expect(changed == modelChanged && !changed.isEmpty, "\(interval): changed \(changed), model \(modelChanged)")
            }

            let live = try await AnalyticsReference.rows(dependencies)
            var answers: [[JSONValue]] = []
            for interval in AnalyticsReferenceModel.Interval.allCases {
                answers.append(try await AnalyticsReference.series(client, interval, from: Self.from, to: Self.to))
            }
            answers.append(try await AnalyticsReference.cohorts(client, .week, from: Self.from, to: Self.to))
            let projection = AnalyticsProjection(catalog: dependencies.catalog.catalog)
            #expect(projection.name == "analytics")
            try await dependencies.store.rebuildStreamwise(projection, chunkSize: 37, workers: 2, catchUpBatch: 50)
            #expect(try await AnalyticsReference.rows(dependencies) == live, "rebuilt sums differ from the live ones")
            var rebuilt: [[JSONValue]] = []
            for interval in AnalyticsReferenceModel.Interval.allCases {
                rebuilt.append(try await AnalyticsReference.series(client, interval, from: Self.from, to: Self.to))
            }
            rebuilt.append(try await AnalyticsReference.cohorts(client, .week, from: Self.from, to: Self.to))
            #expect(rebuilt == answers, "answers after a rebuild differ from the live ones")
            AnalyticsReference.compare(rebuilt[3], expected.cohorts(.week, from: Self.from, to: Self.to, now: Date()), "week cohorts")
        }
    }
}
