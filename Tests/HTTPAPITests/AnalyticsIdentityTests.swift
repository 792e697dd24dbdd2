import Foundation
import JSON
import Ledger
@testable import SubledgerApp
import SubledgerAppTesting
import Testing

/// Identities the definitions imply (the analytics contract in
/// docs/analytics.md), held by the API's answers for generated histories,
/// with no model: the series by day, week and month agree with each other,
/// net revenue is revenue less refunds, the churn rate is churn over the
/// actives at the interval's start, and each count of both stores is the
/// sum of the two. (The actives identity needs streams shaped for it and
/// is held at Ledger level, by `AnalyticsPropertyTests`.)
@Suite("Analytics identities through the API")
struct AnalyticsIdentityTests {
    typealias Series = [JSONValue]

    static let counts = ["new_subscriptions", "trial_starts", "trial_conversions", "renewals"]
    static let stocks = ["active_subscriptions", "active_trials", "mrr"]

    /// A decimal string in minor units ("12.34" → 1234; the places are the currency's, the same in every answer).
    static func minor(_ text: String?) -> Int64 {
        guard let text else { return 0 }
        return Int64(text.replacingOccurrences(of: ".", with: ""))!
    }

    static func amounts(_ value: JSONValue?) -> [String: Int64] {
        guard case .object(let fields)? = value else { return [:] }
        return fields.mapValues { minor($0.string) }
    }

    @Test(arguments: [UInt64(7), 8])
    func theSeriesAgreeWithEachOtherAndWithTheDefinitions(seed: UInt64) async throws {
        var dataset = AnalyticsDataset(seed: seed, subscribers: 120)
        let facts = dataset.shuffledFacts()
        try await withApp(try await AnalyticsReference.dependencies()) { client, dependencies in
            try await AnalyticsReference.send(facts, client: client, dependencies: dependencies)
            try await AnalyticsReference.project(dependencies)
            // Days from the one before March to the end of the last week; the weeks and months of the window.
            let days = try await AnalyticsReference.series(client, .day, from: date("2026-02-28T00:00:00Z"), to: date("2026-07-06T00:00:00Z"))
            let weeks = try await AnalyticsReference.series(client, .week, from: AnalyticsDataset.windowStart, to: AnalyticsDataset.windowEnd)
            let months = try await AnalyticsReference.series(client, .month, from: AnalyticsDataset.windowStart, to: AnalyticsDataset.windowEnd)
            #expect(days.count == 128 && weeks.count == 18 && months.count == 4)
            let dayEnding = Dictionary(uniqueKeysWithValues: days.map { ($0["end"]?.string ?? "", $0) })

            for (name, series) in [("day", days), ("week", weeks), ("month", months)] {
                for item in series {
                    let label = "seed \(seed) \(name) \(item["start"]?.string ?? "")"
                    let values = item["values"]
                    // A stock of a week or month is the stock at the end of its last day.
                    let lastDay = dayEnding[item["end"]?.string ?? ""]
                    for stock in Self.stocks { #expect(values?[stock] == lastDay?["values"]?[stock], "\(label) \(stock)") }
                    // Churn over the actives at the interval's start: the end of the day before.
                    if let before = dayEnding[item["start"]?.string ?? ""] {
                        let active = Int(before["values"]?["active_subscriptions"]?.int ?? 0)
                        let churned = Int(values?["churned"]?.int ?? -1)
                        #expect(values?["churn_rate"] == (active == 0 ? .null : .string(AnalyticsReferenceModel.rate(churned, active))),
                                "\(label) churn_rate")
                    }
                    // Net revenue is revenue less refunds, each rounded on its own (so within one minor unit).
                    let revenue = Self.amounts(values?["revenue"]), refunds = Self.amounts(values?["refunds"])
                    let net = Self.amounts(values?["net_revenue"])
                    #expect(Set(net.keys) == Set(revenue.keys).union(refunds.keys), "\(label) net_revenue currencies")
                    for (currency, value) in net {
                        #expect(abs(value - ((revenue[currency] ?? 0) - (refunds[currency] ?? 0))) <= 1, "\(label) net_revenue \(currency)")
                    }
                    guard name != "day" else { continue }
                    // A flow of a week or month is the sum of its days'.
                    let inside = days.filter { day in
                        (day["start"]?.string ?? "") >= (item["start"]?.string ?? "") && (day["end"]?.string ?? "") <= (item["end"]?.string ?? "")
                    }
                    let length = (item["end"]?.string).map(date).map { $0.timeIntervalSince(date(item["start"]?.string ?? "")) / 86_400 }
                    #expect(inside.count == Int(length ?? 0), "\(label) days")
                    for count in Self.counts {
                        #expect(values?[count]?.int == inside.reduce(0) { $0 + ($1["values"]?[count]?.int ?? 0) }, "\(label) \(count)")
                    }
                    // Prices are whole minor units, so revenue adds up exactly; each
                    // day's refunds (a share of a price) is rounded on its own.
                    var dayRevenue: [String: Int64] = [:], dayRefunds: [String: Int64] = [:], refundDays: [String: Int64] = [:]
                    for day in inside {
                        for (currency, value) in Self.amounts(day["values"]?["revenue"]) { dayRevenue[currency, default: 0] += value }
                        for (currency, value) in Self.amounts(day["values"]?["refunds"]) {
                            dayRefunds[currency, default: 0] += value
                            refundDays[currency, default: 0] += 1
                        }
                    }
                    #expect(revenue == dayRevenue, "\(label) revenue")
                    #expect(Set(refunds.keys) == Set(dayRefunds.keys), "\(label) refund currencies")
                    for (currency, value) in refunds {
                        #expect(abs(value - (dayRefunds[currency] ?? 0)) <= (refundDays[currency]! + 1) / 2, "\(label) refunds \(currency)")
                    }
                }
            }

            // Each store's counts add up to both stores'.
            let window = (from: AnalyticsDataset.windowStart, to: AnalyticsDataset.windowEnd)
            let both = try await AnalyticsReference.series(client, .week, from: window.from, to: window.to)
            let appStore = try await AnalyticsReference.series(client, .week, from: window.from, to: window.to, query: "&store=app_store")
            let play = try await AnalyticsReference.series(client, .week, from: window.from, to: window.to, query: "&store=google_play")
            #expect(play.contains { ($0["values"]?["active_subscriptions"]?.int ?? 0) > 0 }, "no Google Play subscription in the window")
            for (index, item) in both.enumerated() {
                for count in Self.counts + ["active_subscriptions", "active_trials", "churned"] {
                    #expect(item["values"]?[count]?.int
                                == (appStore[index]["values"]?[count]?.int ?? 0) + (play[index]["values"]?[count]?.int ?? 0),
                            "seed \(seed) week \(item["start"]?.string ?? "") \(count) by store")
                }
            }
        }
    }
}
