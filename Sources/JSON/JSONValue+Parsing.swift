import Foundation

extension JSONValue {
    /// Deepest nesting of arrays and objects a document may have: a body of
    /// a million `[` must be refused, not recursed into.
    package static let maximumDepth = 512

    /// Parses a JSON document (RFC 8259) as UTF-8.
    ///
    /// Written by hand: decoding `JSONValue` through `JSONDecoder` tried
    /// each kind in turn and threw (and built) an error for every kind a
    /// value was not, which made parsing the largest cost of `subledger
    /// import` (12% of its samples). What it accepts and what it gives are
    /// the same (`JSONValueParsingTests` compares them on generated
    /// documents): an integer literal is `.integer` when an `Int64` holds
    /// it, as is a number with a fraction or exponent whose value is a
    /// whole `Int64` in decimal (`1.0`, `1e2`); other numbers are `.number`; of a key
    /// named twice, the first value counts. UTF-16 and UTF-32 documents,
    /// which `JSONDecoder` detects, still go to it.
    package static func parse(_ data: Data) -> Result<JSONValue, JSONParseFailure> {
        if data.prefix(4).contains(0) { return decoded(data) }
        return data.withUnsafeBytes { bytes in
            var parser = JSONValueParser(bytes: bytes)
            return parser.document()
        }
    }

    /// The value of a JSON document, or nil when it is not one: what
    /// decoding `JSONValue` through `JSONDecoder` gives, at a fraction of
    /// its cost (see `parse`).
    public init?(json data: Data) {
        guard case .success(let value) = JSONValue.parse(data) else { return nil }
        self = value
    }

    /// Parses through `JSONDecoder`.
    package static func decoded(_ data: Data) -> Result<JSONValue, JSONParseFailure> {
        do {
            return .success(try JSONDecoder().decode(JSONValue.self, from: data))
        } catch let DecodingError.dataCorrupted(context) {
            let underlying = (context.underlyingError as NSError?)?.userInfo[NSDebugDescriptionErrorKey] as? String
            return .failure(JSONParseFailure(detail: underlying ?? context.debugDescription))
        } catch {
            return .failure(JSONParseFailure(detail: "\(error)"))
        }
    }
}

/// A recursive-descent reader of one JSON document in UTF-8 bytes.
private struct JSONValueParser {
    let bytes: UnsafeRawBufferPointer
    var index = 0
    var depth = 0

    init(bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    mutating func document() -> Result<JSONValue, JSONParseFailure> {
        // A UTF-8 byte order mark, which JSONDecoder skips too.
        if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { index = 3 }
        do throws(JSONParseFailure) {
            skipWhitespace()
            let value = try value()
            skipWhitespace()
            guard index == bytes.count else { throw failure("unexpected text after the value") }
            return .success(value)
        } catch {
            return .failure(error)
        }
    }

    private func failure(_ what: String) -> JSONParseFailure {
        JSONParseFailure(detail: "\(what) at byte \(index)")
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func skip(_ byte: UInt8) -> Bool {
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    private mutating func value() throws(JSONParseFailure) -> JSONValue {
        guard index < bytes.count else { throw failure("unexpected end of the document") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw failure("unexpected character")
        }
    }

    private mutating func literal(_ word: StaticString) throws(JSONParseFailure) {
        let count = word.utf8CodeUnitCount
        guard bytes.count - index >= count, memcmp(bytes.baseAddress! + index, word.utf8Start, count) == 0 else {
            throw failure("invalid literal")
        }
        index += count
    }

    private mutating func nest() throws(JSONParseFailure) {
        depth += 1
        guard depth <= JSONValue.maximumDepth else { throw failure("nested deeper than \(JSONValue.maximumDepth) levels") }
        index += 1
        skipWhitespace()
    }

    private mutating func object() throws(JSONParseFailure) -> JSONValue {
        try nest()
        var fields: [String: JSONValue] = [:]
        if skip(UInt8(ascii: "}")) {
            depth -= 1
            return .object(fields)
        }
        while true {
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw failure("expected a key in quotes") }
            let key = try string()
            skipWhitespace()
            guard skip(UInt8(ascii: ":")) else { throw failure("expected ':' after a key") }
            skipWhitespace()
            let value = try value()
            if fields.index(forKey: key) == nil { fields[key] = value }
            skipWhitespace()
            if skip(UInt8(ascii: ",")) {
                skipWhitespace()
                continue
            }
            guard skip(UInt8(ascii: "}")) else { throw failure("expected ',' or '}' in an object") }
            depth -= 1
            return .object(fields)
        }
    }

    private mutating func array() throws(JSONParseFailure) -> JSONValue {
        try nest()
        var elements: [JSONValue] = []
        if skip(UInt8(ascii: "]")) {
            depth -= 1
            return .array(elements)
        }
        while true {
            elements.append(try value())
            skipWhitespace()
            if skip(UInt8(ascii: ",")) {
                skipWhitespace()
                continue
            }
            guard skip(UInt8(ascii: "]")) else { throw failure("expected ',' or ']' in an array") }
            depth -= 1
            return .array(elements)
        }
    }

    /// A string at `index` (its opening quote), read up to its closing quote.
    private mutating func string() throws(JSONParseFailure) -> String {
        index += 1
        let start = index
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "\""):
                defer { index += 1 }
                return try text(UnsafeRawBufferPointer(rebasing: bytes[start..<index]))
            case UInt8(ascii: "\\"):
                var unescaped = Array(bytes[start..<index])
                return try escapedString(appendingTo: &unescaped)
            case 0..<0x20:
                throw failure("unescaped control character in a string")
            default:
                index += 1
            }
        }
        throw failure("unterminated string")
    }

    private func text(_ utf8: some Collection<UInt8>) throws(JSONParseFailure) -> String {
        guard let text = String(validating: utf8, as: UTF8.self) else { throw failure("invalid UTF-8 in a string") }
        return text
    }

    /// The rest of a string from a backslash at `index`.
    private mutating func escapedString(appendingTo result: inout [UInt8]) throws(JSONParseFailure) -> String {
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                return try text(result)
            case UInt8(ascii: "\\"):
                guard let next = JSONStringEscape.unescape(bytes, at: index, into: &result) else {
                    throw failure("invalid escape in a string")
                }
                index = next
            case 0..<0x20:
                throw failure("unescaped control character in a string")
            default:
                result.append(byte)
            }
        }
        throw failure("unterminated string")
    }

    /// A number as the grammar has it: `-`? (`0` | [1-9][0-9]*) fraction? exponent?
    private mutating func number() throws(JSONParseFailure) -> JSONValue {
        let start = index
        _ = skip(UInt8(ascii: "-"))
        guard index < bytes.count, isDigit(bytes[index]) else { throw failure("a number needs a digit") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if index < bytes.count, isDigit(bytes[index]) { throw failure("a number cannot start with 0") }
        } else {
            skipDigits()
        }
        var isWhole = true
        if skip(UInt8(ascii: ".")) {
            isWhole = false
            guard index < bytes.count, isDigit(bytes[index]) else { throw failure("a fraction needs a digit") }
            skipDigits()
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isWhole = false
            index += 1
            if !skip(UInt8(ascii: "+")) { _ = skip(UInt8(ascii: "-")) }
            guard index < bytes.count, isDigit(bytes[index]) else { throw failure("an exponent needs a digit") }
            skipDigits()
        }
        let literal = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
        if let integer = isWhole ? Int64(String(decoding: literal, as: UTF8.self)) : Self.exactInteger(literal) {
            return .integer(integer)
        }
        let text = String(decoding: literal, as: UTF8.self)
        guard let number = Double(text), number.isFinite else { throw failure("number \(text) is out of range") }
        return .number(number)
    }

    /// The value of a number with a fraction or an exponent when it is
    /// exactly a whole `Int64` (`1.0`, `1e2`, `2.50e1`), computed on its
    /// decimal digits, not through a `Double`.
    static func exactInteger(_ literal: UnsafeRawBufferPointer) -> Int64? {
        var digits: [UInt8] = []
        var fractionDigits = 0, exponent = 0, exponentSign = 1
        var negative = false, inFraction = false, inExponent = false
        for byte in literal {
            switch byte {
            case UInt8(ascii: "-") where inExponent: exponentSign = -1
            case UInt8(ascii: "-"): negative = true
            case UInt8(ascii: "+"): break
            case UInt8(ascii: "."): inFraction = true
            case UInt8(ascii: "e"), UInt8(ascii: "E"): inExponent = true
            case _ where inExponent: exponent = min(exponent * 10 + Int(byte - UInt8(ascii: "0")), 10_000)
            default:
                digits.append(byte - UInt8(ascii: "0"))
                if inFraction { fractionDigits += 1 }
            }
        }
        // value = digits × 10^shift
        var shift = exponentSign * exponent - fractionDigits
        while shift < 0, let last = digits.last {
            guard last == 0 else { return nil }
            digits.removeLast()
            shift += 1
        }
        var magnitude: UInt64 = 0
        for digit in digits {
            let (times, overflow) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, carry) = times.addingReportingOverflow(UInt64(digit))
            guard !overflow, !carry else { return nil }
            magnitude = sum
        }
        while shift > 0, magnitude != 0 {
            let (times, overflow) = magnitude.multipliedReportingOverflow(by: 10)
            guard !overflow else { return nil }
            magnitude = times
            shift -= 1
        }
        if negative { return magnitude <= UInt64(Int64.max) + 1 ? Int64(truncatingIfNeeded: 0 &- magnitude) : nil }
        return magnitude <= UInt64(Int64.max) ? Int64(magnitude) : nil
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private mutating func skipDigits() {
        while index < bytes.count, isDigit(bytes[index]) { index += 1 }
    }
}
