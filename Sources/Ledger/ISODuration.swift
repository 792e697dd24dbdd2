import Foundation
import JSON

/// An ISO 8601 duration of whole days, weeks, months and years (`P30D`, `P1W`,
/// `P1M`, `P1Y`, `P1Y2M10D`). Time parts (`PT1H`) are rejected: the catalog
/// sells days, not hours.
///
/// Month and year arithmetic is calendar arithmetic in UTC that clamps the
/// day (Jan 31 + P1M = Feb 28 or 29); the month part is applied before the
/// day part. Encodes as its canonical string (`"P30D"`).
public struct ISODuration: Sendable, Hashable, Codable, CustomStringConvertible {
    public let years: Int
    public let months: Int
    public let weeks: Int
    public let days: Int

    /// The zero duration, `P0D`.
    public static let zero = ISODuration(years: 0, months: 0, weeks: 0, days: 0)

    public init(years: Int = 0, months: Int = 0, weeks: Int = 0, days: Int = 0) {
        self.years = years
        self.months = months
        self.weeks = weeks
        self.days = days
    }

    /// Parses `PnYnMnWnD` (each part optional, in that order, at least one).
    /// Reads the UTF-8 bytes: every payload of a non-renewing purchase
    /// carries a duration, and a rebuild parses millions.
    public init(parsing text: String) throws(ISODurationError) {
        let units: [UInt8] = [UInt8(ascii: "Y"), UInt8(ascii: "M"), UInt8(ascii: "W"), UInt8(ascii: "D")]
        var values = [0, 0, 0, 0]
        var remaining = text.utf8[...]
        guard remaining.first == UInt8(ascii: "P") else { throw ISODurationError(text: text, reason: "must start with P") }
        remaining = remaining.dropFirst()
        guard !remaining.isEmpty else { throw ISODurationError(text: text, reason: "has no parts") }
        var nextUnit = 0
        while let first = remaining.first {
            if first == UInt8(ascii: "T") {
                throw ISODurationError(text: text, reason: "has a time part; only Y, M, W and D are supported")
            }
            var value = 0, digits = 0
            while let byte = remaining.first, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") {
                value = value &* 10 &+ Int(byte - UInt8(ascii: "0"))
                digits += 1
                remaining = remaining.dropFirst()
            }
            guard digits > 0, digits <= 6 else {
                throw ISODurationError(text: text, reason: "expected a number of at most 6 digits")
            }
            guard let unit = remaining.first, let position = units[nextUnit...].firstIndex(of: unit) else {
                throw ISODurationError(text: text, reason: "expected the units Y, M, W, D in that order, each once")
            }
            values[position] = value
            nextUnit = position + 1
            remaining = remaining.dropFirst()
        }
        self.init(years: values[0], months: values[1], weeks: values[2], days: values[3])
    }

    /// True for `P0D` (the expiry prompt lead).
    public var isZero: Bool { years == 0 && months == 0 && weeks == 0 && days == 0 }

    /// The canonical ISO 8601 form, e.g. `P1Y2M10D`; `P0D` when zero.
    public var description: String {
        if isZero { return "P0D" }
        var text = "P"
        if years != 0 { text += "\(years)Y" }
        if months != 0 { text += "\(months)M" }
        if weeks != 0 { text += "\(weeks)W" }
        if days != 0 { text += "\(days)D" }
        return text
    }

    /// `date` moved forward by this duration.
    public func added(to date: Date) -> Date {
        shift(date, sign: 1)
    }

    /// `date` moved back by this duration (Mar 31 − P1M = Feb 28 or 29).
    public func subtracted(from date: Date) -> Date {
        shift(date, sign: -1)
    }

    private func shift(_ date: Date, sign: Int) -> Date {
        let (dayNumber, millisecondOfDay) = floorDivision(RFC3339.milliseconds(of: date), 86_400_000)
        var civil = CivilDate.civilFromDays(Int(dayNumber))
        let monthDelta = sign * (years * 12 + months)
        if monthDelta != 0 {
            let monthIndex = civil.year * 12 + (civil.month - 1) + monthDelta
            let year = monthIndex >= 0 ? monthIndex / 12 : (monthIndex - 11) / 12
            let month = monthIndex - year * 12 + 1
            civil = (year, month, min(civil.day, CivilDate.daysInMonth(year: year, month: month)))
        }
        let day = CivilDate.daysFromCivil(year: civil.year, month: civil.month, day: civil.day) + sign * (weeks * 7 + days)
        return RFC3339.date(milliseconds: Int64(day) * 86_400_000 + millisecondOfDay)
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        do {
            try self.init(parsing: text)
        } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.description))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// A duration string that is not `PnYnMnWnD`.
public struct ISODurationError: Error, Sendable, Equatable, CustomStringConvertible {
    public let text: String
    public let reason: String

    public var description: String { "\"\(text)\" is not an ISO 8601 duration of days, weeks, months or years: \(reason)" }
}
