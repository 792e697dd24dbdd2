import Foundation
import JSON
import Testing
import TestSupport

/// Instants as the API writes and reads them: UTC, milliseconds when there
/// are any, proleptic Gregorian dates (as PostgreSQL's), exact round trips.
struct RFC3339Tests {
    @Test func formattedInstantsParseBackToTheMillisecond() throws {
        var random = SplitMix64(seed: 11)
        // Years 1 to 9999, in whole milliseconds.
        let first: Int64 = -62_135_596_800_000, last: Int64 = 253_402_300_799_999
        for _ in 0..<20_000 {
            let milliseconds = first + Int64(random.next() % UInt64(last - first + 1))
            let date = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
            let text = RFC3339.format(date)
            let parsed = try #require(RFC3339.parse(text), "\(text)")
            #expect((parsed.timeIntervalSince1970 * 1000).rounded() == Double(milliseconds), "\(text)")
            #expect(RFC3339.format(parsed) == text)
        }
    }

    @Test func theCalendarAgreesWithFoundationsFrom1600() {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        // 1600-01-01 to 9999-12-31; before 1582 Foundation's calendar is Julian.
        for day in stride(from: -135_140, through: 2_932_896, by: 61) {
            let date = Date(timeIntervalSince1970: Double(day) * 86_400)
            let parts = calendar.dateComponents([.year, .month, .day], from: date)
            let civil = CivilDate.civilFromDays(day)
            #expect(civil.year == parts.year && civil.month == parts.month && civil.day == parts.day, "day \(day)")
            #expect(CivilDate.daysFromCivil(year: civil.year, month: civil.month, day: civil.day) == day)
        }
    }

    @Test func edgesOfTheFormat() {
        #expect(RFC3339.format(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00Z")
        #expect(RFC3339.format(Date(timeIntervalSince1970: 951_782_400.25)) == "2000-02-29T00:00:00.250Z")
        #expect(RFC3339.parse("2026-11-28T12:00:00+01:00") == RFC3339.parse("2026-11-28T11:00:00Z"))
        #expect(RFC3339.parse("2026-02-29T00:00:00Z") == nil)  // not a leap year
        #expect(RFC3339.parse("2028-02-29T00:00:00Z") != nil)
        #expect(RFC3339.parse("2026-11-28 12:00:00") == nil)
    }
}
