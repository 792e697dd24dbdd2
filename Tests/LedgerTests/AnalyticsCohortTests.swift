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
        // Paying on 1 March (the end of February, the month after January); gone by 1 April.
        #expect(Self.retained(items, .retainedMonth, through: 4) == [1, 0, 0, 0, 0])
        #expect(items.filter { $0.metric == .retainedMonth }.allSatisfy { $0.day == AnalyticsItem.flowDay(of: Self.at("2026-01-01T00:00:00Z")) })
        // Weekly: measured at 19 January, 26 January, … 2 March, every one paid; 9 March is past the end.
        #expect(Self.retained(items, .retainedWeek, through: 8) == [1, 1, 1, 1, 1, 1, 1, 0, 0])
        #expect(items.filter { $0.metric == .retainedWeek }.allSatisfy { $0.day == AnalyticsItem.flowDay(of: Self.at("2026-01-05T00:00:00Z")) })
        // Two items per stretch, however many intervals it lasts.
        #expect(items.filter { $0.metric == .retainedWeek }.count == 2)
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
        #expect(Self.retained(items, .retainedMonth, through: 3) == [0, 1, 0, 0])
        #expect(items.filter { $0.metric == .trialsConverted }.isEmpty)
    }

    /// A retention across a month end, a leap day and the measuring instant itself.
    @Test func retentionOffsetsFallOnTheMeasuringInstants() {
        let january = Self.at("2028-01-01T00:00:00Z")
        // Measured at 1 March (k = 0), 1 April (k = 1), …: paying from 29 February counts at 1 March.
        #expect(AnalyticsSweep.retentionOffset(atOrAfter: Self.at("2028-02-29T23:59:59Z"), cohort: january, interval: .month) == 0)
        #expect(AnalyticsSweep.retentionOffset(atOrAfter: Self.at("2028-03-01T00:00:00Z"), cohort: january, interval: .month) == 0)
        #expect(AnalyticsSweep.retentionOffset(atOrAfter: Self.at("2028-03-01T00:00:01Z"), cohort: january, interval: .month) == 1)
        // A stretch ending exactly at 1 April is not counted there (as `?at=` that instant would not).
        #expect(AnalyticsSweep.retentionOffset(atOrAfter: Self.at("2028-04-01T00:00:00Z"), cohort: january, interval: .month) == 1)
        #expect(AnalyticsSweep.retentionOffset(atOrAfter: Self.at("2027-12-15T00:00:00Z"), cohort: january, interval: .month) == 0)
        let monday = Self.at("2028-01-03T00:00:00Z")
        #expect(AnalyticsSweep.retentionOffset(atOrAfter: Self.at("2028-01-17T00:00:00Z"), cohort: monday, interval: .week) == 0)
        #expect(AnalyticsSweep.retentionOffset(atOrAfter: Self.at("2028-01-17T00:00:00.001Z"), cohort: monday, interval: .week) == 1)
    }

    /// Retention counts from a contribution's deltas: offsets 0 to `last`.
    static func retained(_ items: [AnalyticsItem], _ metric: AnalyticsMetric, through last: Int) -> [Int64] {
        var running: Int64 = 0
        return (0...last).map { k in
            running += items.filter { $0.metric == metric && $0.offset == k }.reduce(0) { $0 + $1.value }
            return running
        }
    }

    @Test func aContributionReadsBackAsWritten() {
        var random = SplitMix64(seed: 45)
        for _ in 0..<300 {
            let items = (0..<Int(random.next() % 40)).map { _ in
                AnalyticsItem(day: Int(random.next() % 40_000) - 10_000, environment: random.next() % 2 == 0 ? .production : .sandbox,
                              store: random.next() % 2 == 0 ? .appStore : .googlePlay,
                              // Sometimes more than 16 strings: indexes past a byte's half.
                              productID: random.next() % 3 == 0 ? "p\(random.next() % 40)"
                                  : ["pro.monthly", "pro.yearly", "é🙂", ""][Int(random.next() % 4)],
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

    /// A contribution stored by a build before version 2 still reads: the
    /// projection compares it with the new one and replaces it.
    @Test func aContributionOfVersion1StillReads() {
        let stored: [UInt8] = [
            0x01, 0x03, 0x03, 0x70, 0x72, 0x6F, 0x03, 0x55, 0x53, 0x44, 0x00, 0x02,
            0xC0, 0xB8, 0x02, 0x00, 0x00, 0x02, 0x00, 0x01, 0x00, 0xE0, 0xBD, 0xC3, 0x09,
            0xC2, 0xB8, 0x02, 0x01, 0x01, 0x00, 0x00, 0x02, 0x03, 0x01,
        ]
        let items = [
            AnalyticsItem(day: 20_000, environment: .production, store: .appStore, productID: "pro", currency: "USD",
                          metric: .mrr, value: 9_990_000),
            AnalyticsItem(day: 20_001, environment: .sandbox, store: .googlePlay, productID: "pro", currency: "",
                          metric: .activeSubscriptions, offset: 3, value: -1),
        ]
        #expect(AnalyticsContributionCoding.decode(stored) == items)
        #expect(AnalyticsContributionCoding.decode(stored.dropLast()) == nil)
        // Written now, the same items take version 2's five bytes an item.
        let written = AnalyticsContributionCoding.encode(items)
        #expect(written.first == 2 && written.count == stored.count - 8)
        #expect(AnalyticsContributionCoding.decode(written) == items)
    }

    /// Every metric has a stored code of its own, so a new one cannot be forgotten or collide.
    @Test func everyMetricHasAStoredCode() {
        #expect(Set(AnalyticsContributionCoding.metrics) == Set(AnalyticsMetric.allCases))
        #expect(AnalyticsContributionCoding.metrics.count == AnalyticsMetric.allCases.count)
        // Decoding reads a code as an index: the codes are 0, 1, 2, … each once.
        #expect(AnalyticsContributionCoding.metrics.map(\.code) == (0..<UInt8(AnalyticsMetric.allCases.count)).map { $0 })
        // Version 2 keeps a metric's code in five bits of an item's head.
        #expect(AnalyticsMetric.allCases.count <= 32)
    }
}
