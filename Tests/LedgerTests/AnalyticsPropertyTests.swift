import Foundation
import JSON
import TestSupport
import Testing
@testable import Ledger

/// Identities the analytics definitions imply (the analytics contract in
/// docs/analytics.md), held by the summed contributions of generated
/// subscribers, as the projection sums them.
///
/// The actives identity. Take streams where each subscriber holds at most
/// one subscription per group at a time, each subscription's paid periods
/// follow one another without a gap (so it has one paid stretch, from its
/// first paid period to its last period's end or its refund), and a
/// subscriber comes back to a group (a new original, trial or paid) only
/// more than a day after leaving it. Then every paid stretch's end is a
/// churn of the day it falls in, every start a new subscription, and for
/// every UTC day D = [S, E):
///
///     active(E) − active(S) = new(D) − churned_day(D)
///                             + starts at E − starts at S − ends at E + ends at S
///
/// where the last four count paid stretches beginning or ending exactly at
/// those midnights: a stock at an instant counts `[start, end)` (as
/// `?at=` does), a flow `[S, E)`. Likewise for trials, with conversions and
/// lapses as the trial stretches' ends. Over a week or month W the stock
/// moves by the same sum over its days, and churn judged at W's end can
/// only be smaller than the days' churn, by at most the subscriptions
/// begun in W (only a comeback in W cancels a day's churn).
struct AnalyticsPropertyTests {
    typealias Builder = AnalyticsContributionTests.Builder

    struct Stream {
        var items: [AnalyticsItem] = []
        /// Paid stretches and trial stretches, `[start, end)`.
        var paid: [(start: Date, end: Date)] = []
        var trials: [(start: Date, end: Date, converted: Bool)] = []
    }

    /// Subscribers of `seed`, within the restrictions above.
    static func stream(seed: UInt64, subscribers: Int = 150) -> Stream {
        var random = SplitMix64(seed: seed)
        func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }
        var stream = Stream()
        for subscriber in 0..<subscribers {
            var builder = Builder()
            for group in ["pro", "max"] where group == "pro" || int(1...100) <= 30 {
                // A third begin exactly at midnight, and their periods end at midnights too.
                var at = AnalyticsContributionTests.day(Double(int(0...60))) + (int(1...3) == 1 ? 0 : Double(int(1...86_399)))
                for original in 0..<int(1...3) {
                    let id = "s\(subscriber)-\(group)-\(original)"
                    let product = group == "max" ? "max.monthly" : int(1...5) == 1 ? "pro.yearly" : "pro.monthly"
                    var index = 0
                    func next() -> String {
                        defer { index += 1 }
                        return index == 0 ? id : "\(id)-\(index)"
                    }
                    var trial: (start: Date, end: Date)?
                    if int(1...100) <= 40 {
                        let end = at + Double(int(3...7)) * 86_400
                        builder.period(next(), original: id, product: product, from: at, to: end, trial: true)
                        trial = (at, end)
                        at = end
                    }
                    if let trial, int(1...100) <= 35 {
                        stream.trials.append((trial.start, trial.end, false))
                    } else {
                        if let trial { stream.trials.append((trial.start, trial.end, true)) }
                        let start = at
                        var last: (id: String, start: Date, end: Date) = ("", at, at)
                        for _ in 0..<(product == "pro.yearly" ? 1 : int(1...4)) {
                            let end = product == "pro.yearly" ? ISODuration(years: 1).added(to: at) : ISODuration(months: 1).added(to: at)
                            last = (next(), at, end)
                            builder.period(last.id, original: id, product: product, from: at, to: end,
                                           price: ["4.99", "9.99", "59.99"][int(0...2)], currency: int(0...1) == 0 ? "USD" : "EUR")
                            at = end
                        }
                        if int(1...100) <= 15 {
                            // A refund ends the stretch at its revocation date.
                            at = last.start + Double(int(3_600...Int(last.end.timeIntervalSince(last.start)) - 3_600))
                            builder.refund(last.id, original: id, at: at, prorated: int(0...1) == 0 ? 50_000 : nil)
                        }
                        stream.paid.append((start, at))
                    }
                    at += 86_401 + Double(int(0...40 * 86_400))
                }
            }
            stream.items += builder.ledger().analyticsContribution(catalog: AnalyticsContributionTests.catalog)
        }
        return stream
    }

    /// Sums per day of a count metric, as the projection's day buckets hold them.
    static func byDay(_ items: [AnalyticsItem], _ metric: AnalyticsMetric) -> [Int: Int64] {
        var sums: [Int: Int64] = [:]
        for item in items where item.metric == metric && item.currency.isEmpty && item.environment == .production {
            sums[item.day, default: 0] += item.value
        }
        return sums
    }

    static func count(_ instants: [Date], at midnight: Date) -> Int64 { Int64(instants.filter { $0 == midnight }.count) }

    /// A contribution is summed per key: its items are in the stored order
    /// (`AnalyticsItem.precedes`, strictly: no key twice) and none is zero,
    /// for subscribers of several products and currencies.
    @Test func aContributionHasEachKeyOnceInOrderAndNoZeros() {
        var products = Set<String>(), currencies = Set<String>()
        for seed in UInt64(100)..<400 {
            let items = Self.stream(seed: seed, subscribers: 1).items
            for (left, right) in zip(items, items.dropFirst()) {
                #expect(AnalyticsItem.precedes(left, right), "seed \(seed): \(left) before \(right)")
            }
            #expect(!items.contains { $0.value == 0 }, "seed \(seed)")
            products.formUnion(items.map(\.productID))
            currencies.formUnion(items.map(\.currency))
        }
        #expect(products.count == 3 && currencies == ["", "USD", "EUR"])
    }

    @Test(arguments: [UInt64(1), 2, 3, 4, 5])
    func activesMoveByNewSubscriptionsAndChurn(seed: UInt64) {
        let stream = Self.stream(seed: seed)
        let delta = Self.byDay(stream.items, .activeSubscriptions), new = Self.byDay(stream.items, .newSubscriptions)
        let churned = Self.byDay(stream.items, .churnedDay)
        let trialDelta = Self.byDay(stream.items, .activeTrials), trialStarts = Self.byDay(stream.items, .trialStarts)
        let conversions = Self.byDay(stream.items, .trialConversions)
        let starts = stream.paid.map(\.start), ends = stream.paid.map(\.end)
        let trialStartInstants = stream.trials.map(\.start), trialEnds = stream.trials.map(\.end)
        let first = AnalyticsItem.flowDay(of: AnalyticsContributionTests.day(0))
        var active: Int64 = 0, trials: Int64 = 0
        for day in (first - 1)..<(first + 400) {
            let start = Date(timeIntervalSince1970: Double(day) * 86_400), end = start + 86_400
            // The stock at a day's end is the sum of the deltas up to it.
            let nextActive = active + (delta[day] ?? 0), nextTrials = trials + (trialDelta[day] ?? 0)
            let expected = (new[day] ?? 0) - (churned[day] ?? 0) + Self.count(starts, at: end) - Self.count(starts, at: start)
                - Self.count(ends, at: end) + Self.count(ends, at: start)
            #expect(nextActive - active == expected, "seed \(seed), \(RFC3339.format(start)): actives moved \(nextActive - active)")
            let lapses = Int64(stream.trials.filter { !$0.converted && start <= $0.end && $0.end < end }.count)
            let expectedTrials = (trialStarts[day] ?? 0) - (conversions[day] ?? 0) - lapses
                + Self.count(trialStartInstants, at: end) - Self.count(trialStartInstants, at: start)
                - Self.count(trialEnds, at: end) + Self.count(trialEnds, at: start)
            #expect(nextTrials - trials == expectedTrials, "seed \(seed), \(RFC3339.format(start)): trials moved \(nextTrials - trials)")
            #expect(nextActive >= 0 && nextTrials >= 0)
            (active, trials) = (nextActive, nextTrials)
        }
        #expect(active == 0 || stream.paid.contains { $0.end > Date(timeIntervalSince1970: Double(first + 400) * 86_400) })
    }

    /// Churn judged at a week's or month's end is the days' churn less the
    /// lapses a comeback in the interval cancelled: never more, and less by
    /// at most the subscriptions begun in it.
    @Test(arguments: [UInt64(6), 7, 8])
    func churnOfAWeekOrMonthIsTheDaysChurnLessTheComebacks(seed: UInt64) {
        let stream = Self.stream(seed: seed)
        let churnedDay = Self.byDay(stream.items, .churnedDay)
        let new = Self.byDay(stream.items, .newSubscriptions), trialStarts = Self.byDay(stream.items, .trialStarts)
        for (metric, intervalEnd) in [(AnalyticsMetric.churnedWeek, AnalyticsInterval.week.end(of:)), (.churnedMonth, AnalyticsInterval.month.end(of:))] {
            let churned = Self.byDay(stream.items, metric)
            var byInterval: [Date: (interval: Int64, days: Int64, begun: Int64)] = [:]
            for day in Set(churnedDay.keys).union(churned.keys).union(new.keys).union(trialStarts.keys) {
                let key = intervalEnd(Date(timeIntervalSince1970: Double(day) * 86_400))
                var sums = byInterval[key] ?? (0, 0, 0)
                sums.interval += churned[day] ?? 0
                sums.days += churnedDay[day] ?? 0
                sums.begun += (new[day] ?? 0) + (trialStarts[day] ?? 0)
                byInterval[key] = sums
            }
            for (end, sums) in byInterval {
                #expect(sums.interval <= sums.days && sums.days - sums.interval <= sums.begun,
                        "seed \(seed) \(metric) ending \(RFC3339.format(end)): \(sums)")
            }
            // Comebacks within a week or month happen in these streams: some must cancel a day's churn.
            #expect(byInterval.values.contains { $0.interval < $0.days }, "seed \(seed) \(metric): no comeback cancelled a day's churn")
        }
    }
}
