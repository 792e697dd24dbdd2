import Foundation
import JSON
import TestSupport
import Testing
@testable import Ledger

/// The cohort items of a contribution (docs/analytics.md, cohorts) and the
/// stored form of a contribution.
struct AnalyticsCohortTests {
    typealias Builder = AnalyticsContributionTests.Builder
    static let catalog = AnalyticsContributionTests.catalog
    static func at(_ text: String) -> Date { RFC3339.parse(text)! }

    /// A week's trial from Thursday 1 January 2026, then two paid months
    /// (8 January to 8 March). The cohort is the interval of the first paid
    /// period: the week of Monday 5 January, the month of January.
    @Test func retentionCountsPayingAtTheEndOfEachIntervalAfterTheCohorts() {
        var builder = Builder()
        builder.period("t0", original: "t0", from: Self.at("2026-01-01T00:00:00Z"), to: Self.at("2026-01-08T00:00:00Z"), trial: true)
        builder.period("t1", original: "t0", from: Self.at("2026-01-08T00:00:00Z"), to: Self.at("2026-02-08T00:00:00Z"))
        builder.period("t2", original: "t0", from: Self.at("2026-02-08T00:00:00Z"), to: Self.at("2026-03-08T00:00:00Z"))
        let items = builder.ledger().analyticsContribution(catalog: Self.catalog)
        let monthly = items.filter { $0.metric == .retainedMonth }
        // Paying on 1 March (the end of February, the month after January); gone by 1 April.
        #expect(monthly.map(\.offset) == [0])
        #expect(monthly.allSatisfy { $0.day == AnalyticsItem.flowDay(of: Self.at("2026-01-01T00:00:00Z")) && $0.value == 1 })
        // Weekly: measured at 19 January, 26 January, … 2 March, every one paid; 9 March is past the end.
        let weekly = items.filter { $0.metric == .retainedWeek }
        #expect(weekly.map(\.offset) == Array(0...6))
        #expect(weekly.allSatisfy { $0.day == AnalyticsItem.flowDay(of: Self.at("2026-01-05T00:00:00Z")) })
        // The trial converted: counted on the trial's start day.
        let converted = items.filter { $0.metric == .trialsConverted }
        #expect(converted.map(\.day) == [AnalyticsItem.flowDay(of: Self.at("2026-01-01T00:00:00Z"))])
    }

    /// A gap: paid in January, lapsed through February, paid again (a
    /// renewal of the same original) from 10 March. Retention at the end of
    /// February (1 March) is 0, at the end of March (1 April) 1.
    @Test func aLapseIsNotRetainedAndAReturnIs() {
        var builder = Builder()
        builder.period("g0", original: "g0", from: Self.at("2026-01-10T00:00:00Z"), to: Self.at("2026-02-10T00:00:00Z"))
        builder.period("g1", original: "g0", from: Self.at("2026-03-10T00:00:00Z"), to: Self.at("2026-04-10T00:00:00Z"))
        let items = builder.ledger().analyticsContribution(catalog: Self.catalog)
        #expect(items.filter { $0.metric == .retainedMonth }.map(\.offset) == [1])
        #expect(items.filter { $0.metric == .trialsConverted }.isEmpty)
    }

    @Test func aContributionReadsBackAsWritten() {
        var random = SplitMix64(seed: 45)
        for _ in 0..<300 {
            let items = (0..<Int(random.next() % 40)).map { _ in
                AnalyticsItem(day: Int(random.next() % 40_000) - 10_000, environment: random.next() % 2 == 0 ? .production : .sandbox,
                              store: random.next() % 2 == 0 ? .appStore : .googlePlay,
                              productID: ["pro.monthly", "pro.yearly", "é🙂", ""][Int(random.next() % 4)],
                              currency: ["", "USD", "JPY"][Int(random.next() % 3)],
                              metric: AnalyticsMetric.allCases[Int(random.next() % UInt64(AnalyticsMetric.allCases.count))],
                              offset: Int(random.next() % 300), value: Int64(bitPattern: random.next()) >> Int64(random.next() % 64))
            }
            let bytes = AnalyticsContributionCoding.encode(items)
            #expect(AnalyticsContributionCoding.decode(bytes) == items)
            // Anything cut short or with a byte too many is refused, never misread.
            if !bytes.isEmpty { #expect(AnalyticsContributionCoding.decode(bytes.dropLast()) == nil) }
            #expect(AnalyticsContributionCoding.decode(bytes + [0]) == nil)
        }
    }

    /// Every metric has a stored code, so a new one cannot be forgotten.
    @Test func everyMetricHasAStoredCode() {
        #expect(Set(AnalyticsContributionCoding.metrics) == Set(AnalyticsMetric.allCases))
        #expect(AnalyticsContributionCoding.metrics.count == AnalyticsMetric.allCases.count)
    }
}
