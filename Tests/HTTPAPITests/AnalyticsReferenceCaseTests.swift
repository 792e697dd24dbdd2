import Foundation
import JSON
import Ledger
@testable import SubledgerApp
import SubledgerAppTesting
import Testing

/// Small cases the reference model answers by hand-planned periods, each
/// one point of the analytics contract in docs/analytics.md: where the
/// generated dataset of `AnalyticsReferenceTests` meets a case by chance,
/// these meet it on purpose, with nothing else around.
@Suite("Analytics cases against the reference model")
struct AnalyticsReferenceCaseTests {
    static let april = date("2026-04-01T00:00:00Z")
    static let may = date("2026-05-01T00:00:00Z")

    static func period(_ id: String, _ product: String, _ start: String, _ end: String, price: Int64?, currency: String = "USD",
                       trial: Bool = false) -> PlannedPeriod {
        PlannedPeriod(transactionID: id, productID: product, start: date(start), end: date(end), isTrial: trial,
                      price: trial ? nil : price, currency: trial || price == nil ? nil : currency)
    }

    static func subscription(_ subscriber: String, _ original: String, store: PlannedSubscription.Store = .appStore,
                             _ periods: [PlannedPeriod]) -> PlannedSubscription {
        PlannedSubscription(subscriberID: subscriber, original: original, store: store, environment: "Production", group: "pro",
                            periods: periods)
    }

    /// Sends the plans' facts in order and compares April's days, its weeks and the month with the model's.
    static func check(_ subscriptions: [PlannedSubscription]) async throws {
        let model = AnalyticsReferenceModel(subscriptions: subscriptions)
        let facts = subscriptions.flatMap(AnalyticsDataset.entries(of:)).map(\.fact)
        try await withApp(try await AnalyticsReference.dependencies()) { client, dependencies in
            try await AnalyticsReference.send(facts, client: client, dependencies: dependencies)
            try await AnalyticsReference.project(dependencies)
            for interval in AnalyticsReferenceModel.Interval.allCases {
                AnalyticsReference.compare(try await AnalyticsReference.series(client, interval, from: april, to: may),
                                           model.series(interval, from: april, to: may), "\(interval)")
            }
        }
    }

    /// MRR is summed exactly and rounded once, when answered: three
    /// weeklies at 2.99 (2.99 × 52 ÷ 12 = 12.95666… a month each) and a
    /// monthly at 0.995 make exactly 39.865, answered 39.86 half-even. It is
    /// kept as yearly amounts (466.44 + 11.94 = 478.38) and divided by 12 in
    /// that rounding. (Each monthly value taken to a millionth first would
    /// give 39.865001 and 39.87; to cents first, 39.88.)
    @Test func mrrIsSummedExactlyAndRoundedOnce() async throws {
        var plans = (1...3).map { index in
            Self.subscription("w\(index)", "w\(index)", [Self.period("w\(index)", "pro.weekly", "2026-04-06T10:00:00Z", "2026-04-13T10:00:00Z",
                                                                      price: 2_990_000)])
        }
        plans.append(Self.subscription("m", "m", [Self.period("m", "pro.monthly", "2026-04-01T10:00:00Z", "2026-05-01T10:00:00Z",
                                                              price: 995_000)]))
        let model = AnalyticsReferenceModel(subscriptions: plans)
        #expect(model.stock(at: date("2026-04-07T00:00:00Z"), .init()).mrr["USD"] == 478_380_000)
        #expect(model.values(date("2026-04-06T00:00:00Z"), date("2026-04-07T00:00:00Z"), .init())["mrr"]
            == .object(["USD": .string("39.86")]))
        try await Self.check(plans)
    }

    /// A prorated refund counts its share at its revocation date, rounded
    /// half-even only when answered: half of 0.05 is 0.025, answered 0.02
    /// (and a net revenue of -0.02 that day).
    @Test func aProratedRefundIsItsShareRoundedHalfEvenWhenAnswered() async throws {
        var plan = Self.subscription("r", "r", [Self.period("r", "pro.monthly", "2026-04-01T10:00:00Z", "2026-05-01T10:00:00Z",
                                                           price: 50_000)])
        plan.refund = (date("2026-04-10T12:00:00Z"), 50_000)
        #expect(AnalyticsReferenceModel(subscriptions: [plan]).values(date("2026-04-10T00:00:00Z"), date("2026-04-11T00:00:00Z"), .init())["refunds"]
            == .object(["USD": .string("0.02")]))
        try await Self.check([plan])
    }

    /// A Google Play renewal after an account hold is paid, and counted,
    /// when the subscription recovers (the first state of the new order),
    /// not when the order before it ended; its period is the month from
    /// then, so its MRR is the price.
    @Test func aPlayRenewalAfterAnAccountHoldCountsWhenItIsPaid() async throws {
        let plan = Self.subscription("p", "tok-hold", store: .googlePlay, [
            Self.period("GPA.1-0", "pro_play", "2026-03-02T08:00:00Z", "2026-04-02T08:00:00Z", price: 1_200_000_000, currency: "JPY"),
            Self.period("GPA.1-1", "pro_play", "2026-04-06T09:00:00Z", "2026-05-06T09:00:00Z", price: 1_200_000_000, currency: "JPY"),
        ])
        try await Self.check([plan])
    }

    /// The midnight rule, churn judged at each interval's end, a trial's
    /// lapse (no churn) and a conversion, in one April: `a` converts its
    /// trial at midnight and lapses on Monday 13 April at 10:00, coming back
    /// on the Wednesday (a day churn, no week or month churn); `b` lapses at
    /// midnight on 20 April (a churn of that day, not the day before) and
    /// never returns; `c`'s trial lapses.
    @Test func midnightsChurnAndTrials() async throws {
        try await Self.check([
            Self.subscription("a", "a1", [
                Self.period("a1", "pro.monthly", "2026-03-06T00:00:00Z", "2026-03-13T00:00:00Z", price: nil, trial: true),
                Self.period("a1-1", "pro.monthly", "2026-03-13T00:00:00Z", "2026-04-13T10:00:00Z", price: 9_990_000),
            ]),
            Self.subscription("a", "a2", [Self.period("a2", "pro.monthly", "2026-04-15T08:00:00Z", "2026-05-15T08:00:00Z",
                                                      price: 8_990_000, currency: "EUR")]),
            Self.subscription("b", "b1", [Self.period("b1", "pro.weekly", "2026-04-13T00:00:00Z", "2026-04-20T00:00:00Z", price: 2_990_000)]),
            Self.subscription("c", "c1", [Self.period("c1", "pro.monthly", "2026-04-03T05:00:00Z", "2026-04-10T05:00:00Z", price: nil,
                                                      trial: true)]),
        ])
    }
}
