import TestSupport
import Foundation
import Testing
import JSON
@testable import Ledger

struct ISODurationTests {
    @Test(arguments: [
        ("2024-01-31T10:00:00Z", "P1M", "2024-02-29T10:00:00Z"),
        ("2023-01-31T10:00:00Z", "P1M", "2023-02-28T10:00:00Z"),
        ("2024-02-29T00:00:00Z", "P1Y", "2025-02-28T00:00:00Z"),
        ("2024-02-29T00:00:00Z", "P4Y", "2028-02-29T00:00:00Z"),
        ("2024-01-01T00:00:00Z", "P30D", "2024-01-31T00:00:00Z"),
        ("2024-12-25T12:30:00.250Z", "P2W", "2025-01-08T12:30:00.250Z"),
        ("2024-01-31T00:00:00Z", "P1Y1M1D", "2025-03-01T00:00:00Z"),
        ("2024-11-30T00:00:00Z", "P3M", "2025-02-28T00:00:00Z"),
    ])
    func adding(start: String, duration: String, expected: String) throws {
        let duration = try ISODuration(parsing: duration)
        #expect(RFC3339.format(duration.added(to: date(start))) == expected)
    }

    @Test(arguments: [
        ("2024-03-31T00:00:00Z", "P1M", "2024-02-29T00:00:00Z"),
        ("2023-03-31T00:00:00Z", "P1M", "2023-02-28T00:00:00Z"),
        ("2024-03-01T00:00:00Z", "P1D", "2024-02-29T00:00:00Z"),
        ("2024-02-01T00:00:00Z", "P7D", "2024-01-25T00:00:00Z"),
        ("2024-01-15T00:00:00Z", "P0D", "2024-01-15T00:00:00Z"),
        ("2025-02-28T00:00:00Z", "P1Y", "2024-02-28T00:00:00Z"),
    ])
    func subtracting(start: String, duration: String, expected: String) throws {
        let duration = try ISODuration(parsing: duration)
        #expect(RFC3339.format(duration.subtracted(from: date(start))) == expected)
    }

    @Test(arguments: ["P30D", "P1W", "P1M", "P1Y", "P1Y2M10D", "P0D", "P2W3D"])
    func canonicalStringsRoundTrip(text: String) throws {
        let duration = try ISODuration(parsing: text)
        #expect(duration.description == text)
        let encoded = try JSONEncoder().encode([duration])
        #expect(String(decoding: encoded, as: UTF8.self) == "[\"\(text)\"]")
        #expect(try JSONDecoder().decode([ISODuration].self, from: encoded) == [duration])
    }

    @Test(arguments: ["", "P", "30D", "PT1H", "P1DT2H", "P1D1M", "P1M1M", "P-1D", "P1.5D", "P1H", "p1d", "P1234567D",
                      "P\u{FF11}D", "P\u{0661}D", "P1D\u{301}", "P1\u{301}D", "P99999999999999999999999D"])
    func rejects(text: String) {
        #expect(throws: ISODurationError.self) { try ISODuration(parsing: text) }
    }
}

struct RFC3339Tests {
    @Test(arguments: [
        ("2024-01-31T12:00:00Z", "2024-01-31T12:00:00Z"),
        ("2024-01-31T12:00:00.5Z", "2024-01-31T12:00:00.500Z"),
        ("2024-01-31T12:00:00.123456Z", "2024-01-31T12:00:00.123Z"),
        ("2024-01-31T14:00:00+02:00", "2024-01-31T12:00:00Z"),
        ("2024-01-31T00:30:00-01:00", "2024-01-31T01:30:00Z"),
        ("2024-03-01T00:30:00+01:00", "2024-02-29T23:30:00Z"),
        ("1969-12-31T23:59:59.999Z", "1969-12-31T23:59:59.999Z"),
        ("2024-01-31t12:00:00z", "2024-01-31T12:00:00Z"),
    ])
    func parsesAndFormatsUTC(input: String, output: String) throws {
        let parsed = try #require(RFC3339.parse(input))
        #expect(RFC3339.format(parsed) == output)
        #expect(RFC3339.parse(output) == parsed)
    }

    @Test(arguments: ["2024-02-30T00:00:00Z", "2023-02-29T00:00:00Z", "2024-01-31", "2024-01-31T12:00:00",
                      "2024-01-31T24:00:00Z", "2024-1-31T12:00:00Z", "2024-01-31T12:00:00.Z", "2024-01-31T12:00:00+0200",
                      "yesterday", "2024-01-31T12:00:00Z "])
    func rejects(input: String) {
        #expect(RFC3339.parse(input) == nil)
    }

    @Test func matchesFoundationOverManyDates() {
        var random = SplitMix64(seed: 7)
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        for _ in 0..<2000 {
            let seconds = Double(Int64.random(in: -2_000_000_000...4_000_000_000, using: &random))
            let date = Date(timeIntervalSince1970: seconds)
            #expect(RFC3339.format(date) == formatter.string(from: date))
            #expect(RFC3339.parse(formatter.string(from: date)) == date)
        }
    }
}
