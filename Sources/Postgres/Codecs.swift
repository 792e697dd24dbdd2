import Foundation

/// A value that can be sent as a text-format statement parameter.
public protocol PostgresEncodable: Sendable {
    var postgresText: String { get }
}

/// A value that can be read from a text-format result column.
public protocol PostgresDecodable {
    init(postgresText text: String) throws(PostgresError)
}

extension String: PostgresEncodable, PostgresDecodable {
    public var postgresText: String { self }
    public init(postgresText text: String) { self = text }
}

extension Int: PostgresEncodable, PostgresDecodable {
    public var postgresText: String { String(self) }
    public init(postgresText text: String) throws(PostgresError) {
        guard let value = Int(text) else { throw .decodingFailed(text, as: "Int") }
        self = value
    }
}

extension Int64: PostgresEncodable, PostgresDecodable {
    public var postgresText: String { String(self) }
    public init(postgresText text: String) throws(PostgresError) {
        guard let value = Int64(text) else { throw .decodingFailed(text, as: "Int64") }
        self = value
    }
}

extension Int32: PostgresEncodable, PostgresDecodable {
    public var postgresText: String { String(self) }
    public init(postgresText text: String) throws(PostgresError) {
        guard let value = Int32(text) else { throw .decodingFailed(text, as: "Int32") }
        self = value
    }
}

extension Double: PostgresEncodable, PostgresDecodable {
    public var postgresText: String { String(self) }
    public init(postgresText text: String) throws(PostgresError) {
        guard let value = Double(text) else { throw .decodingFailed(text, as: "Double") }
        self = value
    }
}

extension Bool: PostgresEncodable, PostgresDecodable {
    public var postgresText: String { self ? "t" : "f" }
    public init(postgresText text: String) throws(PostgresError) {
        switch text {
        case "t", "true": self = true
        case "f", "false": self = false
        default: throw .decodingFailed(text, as: "Bool")
        }
    }
}

extension UUID: PostgresEncodable, PostgresDecodable {
    public var postgresText: String { uuidString.lowercased() }
    public init(postgresText text: String) throws(PostgresError) {
        guard let value = UUID(uuidString: text) else { throw .decodingFailed(text, as: "UUID") }
        self = value
    }
}

/// `bytea`, sent and read in PostgreSQL's hex format (`\x0a1b…`).
extension Data: PostgresEncodable, PostgresDecodable {
    public var postgresText: String {
        // Straight into the string's storage: snapshots are a megabyte.
        let digits: StaticString = "0123456789abcdef"
        return withUnsafeBytes { bytes in
            String(unsafeUninitializedCapacity: 2 + bytes.count * 2) { out in
                out[0] = UInt8(ascii: "\\")
                out[1] = UInt8(ascii: "x")
                let hex = digits.utf8Start
                for (index, byte) in bytes.enumerated() {
                    out[2 + index * 2] = hex[Int(byte >> 4)]
                    out[3 + index * 2] = hex[Int(byte & 0x0f)]
                }
                return 2 + bytes.count * 2
            }
        }
    }

    public init(postgresText text: String) throws(PostgresError) {
        let utf8 = Array(text.utf8)
        guard utf8.count >= 2, utf8[0] == UInt8(ascii: "\\"), utf8[1] == UInt8(ascii: "x"),
            utf8.count % 2 == 0
        else { throw .decodingFailed("<bytea>", as: "Data") }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var bytes = [UInt8]()
        bytes.reserveCapacity((utf8.count - 2) / 2)
        var index = 2
        while index < utf8.count {
            guard let high = nibble(utf8[index]), let low = nibble(utf8[index + 1]) else {
                throw .decodingFailed("<bytea>", as: "Data")
            }
            bytes.append(high << 4 | low)
            index += 2
        }
        self = Data(bytes)
    }
}

/// JSON text for `json`/`jsonb` parameters and columns (cast with `::jsonb`).
public struct PostgresJSON: PostgresEncodable, PostgresDecodable, Hashable {
    public var text: String
    public init(text: String) { self.text = text }
    public init(data: Data) { self.text = String(decoding: data, as: UTF8.self) }
    public init(postgresText text: String) { self.text = text }
    public var postgresText: String { text }
    public var data: Data { Data(text.utf8) }

    /// Encodes a value with the given encoder (default: sorted keys, ISO dates).
    public init(encoding value: some Encodable, encoder: JSONEncoder = PostgresJSON.defaultEncoder) throws {
        self.init(data: try encoder.encode(value))
    }

    public func decode<T: Decodable>(_ type: T.Type, decoder: JSONDecoder = JSONDecoder()) throws -> T {
        try decoder.decode(type, from: data)
    }

    public static var defaultEncoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}

/// `timestamptz`. Sent as ISO 8601 with microseconds in UTC; read from the ISO
/// output style the connection sets (`2026-11-22 05:19:05.123456+00`).
extension Date: PostgresEncodable, PostgresDecodable {
    public var postgresText: String {
        let micros = (timeIntervalSince1970 * 1_000_000).rounded()
        let seconds = Int64((micros / 1_000_000).rounded(.down))
        let fraction = Int64(micros) - seconds * 1_000_000
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        let year = Int(parts.tm_year) + 1900
        guard (0...9999).contains(year) else {
            return String(
                format: "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ",
                parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                parts.tm_hour, parts.tm_min, parts.tm_sec, fraction)
        }
        // Digits by hand: `String(format:)` went through CoreFoundation's
        // formatter, about 1% of a read's CPU for its one timestamp parameter.
        return String(unsafeUninitializedCapacity: 27) { buffer in
            func put(_ value: Int, _ width: Int, at offset: Int) {
                var value = value
                for index in stride(from: offset + width - 1, through: offset, by: -1) {
                    buffer[index] = UInt8(truncatingIfNeeded: 48 + value % 10)
                    value /= 10
                }
            }
            put(year, 4, at: 0)
            buffer[4] = UInt8(ascii: "-")
            put(Int(parts.tm_mon) + 1, 2, at: 5)
            buffer[7] = UInt8(ascii: "-")
            put(Int(parts.tm_mday), 2, at: 8)
            buffer[10] = UInt8(ascii: "T")
            put(Int(parts.tm_hour), 2, at: 11)
            buffer[13] = UInt8(ascii: ":")
            put(Int(parts.tm_min), 2, at: 14)
            buffer[16] = UInt8(ascii: ":")
            put(Int(parts.tm_sec), 2, at: 17)
            buffer[19] = UInt8(ascii: ".")
            put(Int(fraction), 6, at: 20)
            buffer[26] = UInt8(ascii: "Z")
            return 27
        }
    }

    public init(postgresText text: String) throws(PostgresError) {
        switch text {
        case "infinity": self = .distantFuture; return
        case "-infinity": self = .distantPast; return
        default: break
        }
        guard let date = TimestampParser.parse(text) else { throw .decodingFailed(text, as: "Date") }
        self = date
    }
}

enum TimestampParser {
    /// Parses `YYYY-MM-DD HH:MM:SS[.ffffff][+HH[:MM]]` (also with `T`).
    static func parse(_ text: String) -> Date? {
        var text = text
        return text.withUTF8 { parse(utf8: $0) }
    }

    /// `parse` of UTF-8 bytes, for readers of values in place.
    static func parse(utf8 bytes: UnsafeBufferPointer<UInt8>) -> Date? {
        var index = 0
        func number(_ width: Int) -> Int? {
            guard index + width <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[index..<index + width] {
                guard byte >= 48, byte <= 57 else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            index += width
            return value
        }
        // A static string's bytes, not a String's UTF-8 view: this runs for every event a rebuild reads.
        func expect(_ chars: StaticString) -> Bool {
            guard index < bytes.count, UnsafeBufferPointer(start: chars.utf8Start, count: chars.utf8CodeUnitCount).contains(bytes[index])
            else { return false }
            index += 1
            return true
        }
        guard let year = number(4), expect("-"), let month = number(2), expect("-"),
            let day = number(2), expect(" T"), let hour = number(2), expect(":"),
            let minute = number(2), expect(":"), let second = number(2)
        else { return nil }
        var micros = 0
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            var digits = 0
            while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57 {
                if digits < 6 { micros = micros * 10 + Int(bytes[index] - 48) }
                digits += 1
                index += 1
            }
            for _ in 0..<max(0, 6 - digits) { micros *= 10 }
        }
        var offsetSeconds = 0
        if index < bytes.count {
            if bytes[index] == UInt8(ascii: "Z") {
                index += 1
            } else {
                let sign = bytes[index] == UInt8(ascii: "-") ? -1 : 1
                guard expect("+-"), let offsetHours = number(2) else { return nil }
                var offsetMinutes = 0
                if index < bytes.count, bytes[index] == UInt8(ascii: ":") {
                    index += 1
                    guard let value = number(2) else { return nil }
                    offsetMinutes = value
                }
                offsetSeconds = sign * (offsetHours * 3600 + offsetMinutes * 60)
            }
        }
        guard index == bytes.count else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offsetSeconds
        return Date(timeIntervalSince1970: Double(seconds) + Double(micros) / 1_000_000)
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}

extension PostgresError {
    static func decodingFailed(_ text: String, as type: String) -> PostgresError {
        PostgresError(code: .decoding, message: "cannot decode \(type) from a column value", detail: text)
    }
}
