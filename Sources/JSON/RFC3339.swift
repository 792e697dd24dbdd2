import Foundation

/// RFC 3339 date-times as the API and the stored events use them.
///
/// Parsing accepts fractional seconds and numeric offsets; formatting always
/// writes UTC with `Z`, with milliseconds only when they are not zero. Times
/// are kept to the millisecond, and `parse` accepts only instants `format`
/// can write with a four-digit year (0001-01-01T00:00:00Z to
/// 9999-12-31T23:59:59.999Z once the offset and rounding are applied), so
/// `parse(format(date)) == date` for any date that came from `parse`. What
/// requests may carry is narrower: see `InputLimits`.
public enum RFC3339 {
    /// Parses `2024-01-31T12:00:00Z`, `2024-01-31T12:00:00.250+02:00`, ...
    public static func parse(_ text: String) -> Date? {
        var text = text
        return text.withUTF8 { parse(utf8: $0) }
    }

    /// `parse` of UTF-8 bytes, for decoders that read dates in place.
    package static func parse(utf8 bytes: UnsafeBufferPointer<UInt8>) -> Date? {
        var index = 0

        func digits(_ count: Int) -> Int? {
            guard index + count <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[index..<index + count] {
                guard byte >= 48, byte <= 57 else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            index += count
            return value
        }
        // A static string's bytes, not a String's UTF-8 view: this runs for every date of a rebuild.
        func expect(_ characters: StaticString) -> Bool {
            guard index < bytes.count,
                  UnsafeBufferPointer(start: characters.utf8Start, count: characters.utf8CodeUnitCount).contains(bytes[index])
            else { return false }
            index += 1
            return true
        }

        guard let year = digits(4), expect("-"), let month = digits(2), expect("-"),
              let day = digits(2), expect("Tt "), let hour = digits(2), expect(":"),
              let minute = digits(2), expect(":"), let second = digits(2)
        else { return nil }
        guard year >= 1, (1...12).contains(month), day >= 1, day <= CivilDate.daysInMonth(year: year, month: month),
              hour <= 23, minute <= 59, second <= 59
        else { return nil }

        var milliseconds = 0
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            var scale = 100
            var fractionDigits = 0
            var roundUp = false
            while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57 {
                let digit = Int(bytes[index] - 48)
                if fractionDigits < 3 {
                    milliseconds += digit * scale
                    scale /= 10
                } else if fractionDigits == 3 {
                    roundUp = digit >= 5
                }
                fractionDigits += 1
                index += 1
            }
            guard fractionDigits > 0 else { return nil }
            if roundUp { milliseconds += 1 }
        }

        var offsetSeconds = 0
        if expect("Zz") {
            // UTC
        } else if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
            let sign = bytes[index] == UInt8(ascii: "-") ? -1 : 1
            index += 1
            guard let offsetHours = digits(2), expect(":"), let offsetMinutes = digits(2),
                  offsetHours <= 23, offsetMinutes <= 59
            else { return nil }
            offsetSeconds = sign * (offsetHours * 3600 + offsetMinutes * 60)
        } else {
            return nil
        }
        guard index == bytes.count else { return nil }

        let days = CivilDate.daysFromCivil(year: year, month: month, day: day)
        let seconds = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second) - Int64(offsetSeconds)
        let total = seconds * 1000 + Int64(milliseconds)
        // An offset (or rounding) must not carry the instant into year 0, which
        // PostgreSQL cannot store, nor into year 10000, which `format` writes
        // with five digits that `parse` cannot read back.
        guard total >= Self.firstInstantOfYearOne * 1000, total < Self.firstInstantOfYear10000 * 1000 else { return nil }
        return date(milliseconds: total)
    }

    /// 0001-01-01T00:00:00Z in seconds since 1970.
    package static let firstInstantOfYearOne = Int64(CivilDate.daysFromCivil(year: 1, month: 1, day: 1)) * 86_400
    /// 10000-01-01T00:00:00Z in seconds since 1970.
    package static let firstInstantOfYear10000 = Int64(CivilDate.daysFromCivil(year: 10_000, month: 1, day: 1)) * 86_400

    /// Formats as UTC: `2024-01-31T12:00:00Z` or `2024-01-31T12:00:00.250Z`.
    ///
    /// Years 0 to 9999 (every instant the ledger accepts) are written
    /// digit by digit into the string's own storage: a state or an event
    /// holds a dozen instants, and joining a dozen small strings for each
    /// was 2% of a read. Other years go through `formatByParts`, which
    /// writes what this always wrote for them.
    public static func format(_ date: Date) -> String {
        let parts = Parts(date)
        guard (0...9999).contains(parts.civil.year) else { return formatByParts(date) }
        return String(unsafeUninitializedCapacity: 24) { buffer in
            var index = 0
            func digits(_ value: Int, _ width: Int) {
                var value = value
                for position in stride(from: index + width - 1, through: index, by: -1) {
                    buffer[position] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                }
                index += width
            }
            func byte(_ character: Unicode.Scalar) {
                buffer[index] = UInt8(ascii: character)
                index += 1
            }
            digits(parts.civil.year, 4); byte("-"); digits(parts.civil.month, 2); byte("-"); digits(parts.civil.day, 2)
            byte("T"); digits(parts.hour, 2); byte(":"); digits(parts.minute, 2); byte(":"); digits(parts.second, 2)
            if parts.millisecond != 0 { byte("."); digits(parts.millisecond, 3) }
            byte("Z")
            return index
        }
    }

    /// `format` by joining padded parts: any year.
    static func formatByParts(_ date: Date) -> String {
        let parts = Parts(date)
        var text = pad(parts.civil.year, 4) + "-" + pad(parts.civil.month, 2) + "-" + pad(parts.civil.day, 2)
        text += "T" + pad(parts.hour, 2) + ":" + pad(parts.minute, 2) + ":" + pad(parts.second, 2)
        if parts.millisecond != 0 { text += "." + pad(parts.millisecond, 3) }
        return text + "Z"
    }

    /// The UTC calendar fields `format` writes.
    private struct Parts {
        var civil: (year: Int, month: Int, day: Int)
        var hour: Int, minute: Int, second: Int, millisecond: Int

        init(_ date: Date) {
            let (seconds, millisecond) = floorDivision(milliseconds(of: date), 1000)
            let (days, secondOfDay) = floorDivision(seconds, 86_400)
            civil = CivilDate.civilFromDays(Int(days))
            (hour, minute, second) = (Int(secondOfDay / 3600), Int(secondOfDay % 3600 / 60), Int(secondOfDay % 60))
            self.millisecond = Int(millisecond)
        }
    }

    /// The instant in whole milliseconds since 1970, as `format` writes it.
    package static func milliseconds(of date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1000).rounded())
    }

    package static func date(milliseconds: Int64) -> Date {
        Date(timeIntervalSince1970: Double(milliseconds) / 1000)
    }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let text = String(value)
        return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
    }
}

@inlinable
package func floorDivision(_ value: Int64, _ divisor: Int64) -> (quotient: Int64, remainder: Int64) {
    var quotient = value / divisor
    var remainder = value % divisor
    if remainder < 0 {
        quotient -= 1
        remainder += divisor
    }
    return (quotient, remainder)
}

/// Proleptic Gregorian calendar arithmetic on day numbers (days since 1970-01-01).
package enum CivilDate {
    @inlinable
    package static func isLeapYear(_ year: Int) -> Bool {
        (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
    }

    @inlinable
    package static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: isLeapYear(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    // Howard Hinnant's days_from_civil / civil_from_days.
    @inlinable
    package static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    @inlinable
    package static func civilFromDays(_ days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
