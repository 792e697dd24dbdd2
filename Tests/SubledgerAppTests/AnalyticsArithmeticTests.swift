import Foundation
import JSON
import Ledger
import Testing
@testable import SubledgerApp
import SubledgerAppTesting

/// The arithmetic of the analytics' answers: intervals at week, month and
/// year ends, churn rates rounded half-even, years of day numbers, CSV rows.
struct AnalyticsArithmeticTests {
    static func at(_ text: String) -> Date { RFC3339.parse(text)! }

    @Test func intervalsStartWhereTheContractSays() {
        // Thursday 31 December 2026, late in the day: its ISO week began on Monday 28 December.
        let instant = Self.at("2026-12-31T23:59:59.999Z")
        #expect(AnalyticsInterval.day.start(of: instant) == Self.at("2026-12-31T00:00:00Z"))
        #expect(AnalyticsInterval.week.start(of: instant) == Self.at("2026-12-28T00:00:00Z"))
        #expect(AnalyticsInterval.month.start(of: instant) == Self.at("2026-12-01T00:00:00Z"))
        // A Monday at midnight starts its own week; a Sunday belongs to the week before.
        #expect(AnalyticsInterval.week.start(of: Self.at("2027-01-04T00:00:00Z")) == Self.at("2027-01-04T00:00:00Z"))
        #expect(AnalyticsInterval.week.start(of: Self.at("2027-01-03T12:00:00Z")) == Self.at("2026-12-28T00:00:00Z"))
        // Months of 28, 29, 30 and 31 days.
        let months = AnalyticsInterval.month.intervals(from: Self.at("2028-01-31T10:00:00Z"), to: Self.at("2028-05-01T00:00:00Z"),
                                                       limit: 10)!
        #expect(months.map { RFC3339.format($0.start) } == ["2028-01-01T00:00:00Z", "2028-02-01T00:00:00Z", "2028-03-01T00:00:00Z",
                                                            "2028-04-01T00:00:00Z"])
        #expect(months.map { $0.end.timeIntervalSince($0.start) / 86_400 } == [31, 29, 31, 30])
        // `to` itself is not listed when an interval starts there; beyond the limit: nil.
        #expect(AnalyticsInterval.day.intervals(from: Self.at("2026-01-01T00:00:00Z"), to: Self.at("2026-01-03T00:00:00Z"), limit: 5)?
            .count == 2)
        #expect(AnalyticsInterval.day.intervals(from: Self.at("2026-01-01T00:00:00Z"), to: Self.at("2026-01-07T00:00:00Z"), limit: 5) == nil)
        #expect(AnalyticsInterval.month.start(3, before: Self.at("2026-03-15T00:00:00Z")) == Self.at("2025-12-01T00:00:00Z"))
    }

    @Test func churnRatesRoundHalfEvenToFourPlaces() {
        #expect(AnalyticsDaySums.rate(1, of: 3) == "0.3333")
        #expect(AnalyticsDaySums.rate(2, of: 3) == "0.6667")
        #expect(AnalyticsDaySums.rate(1, of: 20_000) == "0.0000")  // 0.00005: the even neighbour is 0.0000
        #expect(AnalyticsDaySums.rate(3, of: 20_000) == "0.0002")  // 0.00015: the even neighbour is 0.0002
        #expect(AnalyticsDaySums.rate(5, of: 4) == "1.2500")
        #expect(AnalyticsDaySums.rate(0, of: 7) == "0.0000")
        #expect(AnalyticsDaySums.rate(3, of: 0) == nil)
    }

    /// Months are integer arithmetic on the UTC day; Foundation's calendar
    /// is the reference: the month's start, the next month's (the same day,
    /// clamped, and time of day) and the months between two instants, at
    /// every month end, midnight and leap day from 1900 to 2200 and at
    /// generated instants between (to the millisecond, as the ledger's are).
    @Test func monthsAgreeWithTheCalendar() {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        var instants: [Date] = []
        for year in stride(from: 1900, through: 2200, by: 1) {
            for month in 1...12 {
                let first = calendar.date(from: DateComponents(year: year, month: month, day: 1))!
                instants += [first, first - 0.001, first + 0.001, first - 86_400, first + 86_400 * 27 + 43_200.5]
            }
        }
        var generator = SystemRandomNumberGenerator()
        // Instants to the millisecond, as the ledger's are.
        for _ in 0..<20_000 {
            instants.append(Date(timeIntervalSince1970: Double(Int64.random(in: -2_200_000_000_000...7_200_000_000_000, using: &generator)) / 1000))
        }
        let month = AnalyticsInterval.month
        var previous = instants[0]
        for instant in instants {
            let parts = calendar.dateComponents([.year, .month], from: instant)
            #expect(month.start(of: instant) == calendar.date(from: DateComponents(year: parts.year, month: parts.month, day: 1))!,
                    "start of \(instant)")
            // The calendar's floating-point answer strays below the millisecond for some instants; the ledger keeps milliseconds.
            #expect(abs(month.next(after: instant).timeIntervalSince(calendar.date(byAdding: .month, value: 1, to: instant)!)) < 0.000_5,
                    "a month after \(instant)")
            let from = calendar.dateComponents([.year, .month], from: previous)
            #expect(AnalyticsInterval.monthIndex(of: instant) - AnalyticsInterval.monthIndex(of: previous)
                        == (parts.year! * 12 + parts.month!) - (from.year! * 12 + from.month!), "months from \(previous) to \(instant)")
            previous = instant
        }
    }

    @Test func yearsOfDayNumbersAgreeWithTheCalendar() {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        // Years 1600 to 9909: before 1582 Foundation's calendar is Julian, PostgreSQL's (and this) proleptic Gregorian.
        for day in stride(from: -135_000, through: 2_900_000, by: 97) + [-1, 0, 1, 20_453, 20_454, 11_016, 11_017] {
            let date = Date(timeIntervalSince1970: Double(day) * 86_400)
            #expect(AnalyticsRows.year(ofDay: day) == calendar.component(.year, from: date), "day \(day)")
        }
    }

    @Test func csvHasARowPerCurrencyAndCountsOnEach() {
        let series = AnalyticsSeries(interval: .day, metrics: [.activeSubscriptions, .mrr, .churnRate], points: [
            AnalyticsPoint(start: Self.at("2026-01-01T00:00:00Z"), end: Self.at("2026-01-02T00:00:00Z"), group: nil,
                           values: [.activeSubscriptions: .count(3), .mrr: .amounts(["USD": "19.98", "EUR": "8.99"]), .churnRate: .rate(nil)]),
            AnalyticsPoint(start: Self.at("2026-01-02T00:00:00Z"), end: Self.at("2026-01-03T00:00:00Z"), group: nil,
                           values: [.activeSubscriptions: .count(0), .mrr: .amounts([:]), .churnRate: .rate("0.1000")]),
        ])
        #expect(AnalyticsText.csv(series.csvRows) == """
            start,end,currency,active_subscriptions,mrr,churn_rate\r
            2026-01-01T00:00:00Z,2026-01-02T00:00:00Z,EUR,3,8.99,\r
            2026-01-01T00:00:00Z,2026-01-02T00:00:00Z,USD,3,19.98,\r
            2026-01-02T00:00:00Z,2026-01-03T00:00:00Z,,0,,0.1000\r

            """)
        #expect(series.json(from: Self.at("2026-01-01T00:00:00Z"), to: Self.at("2026-01-03T00:00:00Z")).contains(
            #"{"start":"2026-01-01T00:00:00Z","end":"2026-01-02T00:00:00Z","values":{"active_subscriptions":3,"mrr":{"EUR":"8.99","USD":"19.98"},"churn_rate":null}}"#))
        // A product id with a comma or a quote is quoted as RFC 4180 says.
        #expect(AnalyticsText.csv([["a,b", "say \"hi\"", "plain"]]) == "\"a,b\",\"say \"\"hi\"\"\",plain\r\n")
    }
}
