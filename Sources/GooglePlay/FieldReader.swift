import Foundation
import JSON
import Ledger

/// Reads one JSON object of a Google document, naming every field by its
/// path from the root (`lineItems[1].expiryTime`), so a refusal says exactly
/// which field was wrong and what was expected (`JSONDecoder` cannot).
///
/// Each reader answers nil for an absent field and for `null` (Google's
/// JSON omits fields at their default), and throws when a field is present
/// but not what Google documents; `require` makes a field mandatory.
struct FieldReader {
    let fields: [String: JSONValue]
    /// The object's own path: "" for the root.
    let path: String

    init(_ value: JSONValue, path: String, expected: String) throws(GooglePlayParseError) {
        guard case .object(let fields) = value else {
            throw path.isEmpty
                ? GooglePlayParseError(.invalidJSON, field: "", message: "The document must be \(expected), got \(value.kindDescription).")
                : .invalid(path, expected: expected, got: value.kindDescription)
        }
        self.fields = fields
        self.path = path
    }

    /// Parses a whole document, which must be a JSON object.
    static func document(_ data: Data, expected: String, path: String = "") throws(GooglePlayParseError) -> FieldReader {
        switch JSONValue.parse(data) {
        case .success(let value): return try FieldReader(value, path: path, expected: expected)
        case .failure(let failure):
            throw GooglePlayParseError(.invalidJSON, field: path, message: "Expected \(expected); not valid JSON: \(failure.detail)")
        }
    }

    func name(_ key: String) -> String { path.isEmpty ? key : path + "." + key }

    /// The value of `key`; nil when absent or `null`.
    func value(_ key: String) -> JSONValue? {
        guard let value = fields[key], value != .null else { return nil }
        return value
    }

    func require<T>(_ value: T?, _ key: String, _ expected: String) throws(GooglePlayParseError) -> T {
        guard let value else { throw .missing(name(key), expected: expected) }
        return value
    }

    // MARK: Text

    func string(_ key: String, maximumBytes: Int = GooglePlayLimits.maximumTextBytes) throws(GooglePlayParseError) -> String? {
        guard let value = value(key) else { return nil }
        guard case .string(let text) = value else {
            throw .invalid(name(key), expected: "a string", got: value.kindDescription)
        }
        guard text.utf8.count <= maximumBytes else {
            throw .invalid(name(key), expected: "at most \(maximumBytes) bytes", got: "\(text.utf8.count) bytes")
        }
        return text
    }

    static let identifierExpectation = "1 to 200 bytes of UTF-8 without control characters"

    /// An id the ledger stores (`orderId`, `productId`, `packageName`):
    /// within `InputLimits`, in NFC.
    func identifier(_ key: String) throws(GooglePlayParseError) -> String? {
        guard let text = try string(key) else { return nil }
        do {
            return try InputLimits.identifier(text, field: name(key))
        } catch {
            throw GooglePlayParseError(.invalidField, field: name(key), message: error.message)
        }
    }

    static let tokenExpectation = "a purchase token of 1 to \(GooglePlayLimits.maximumTokenBytes) bytes without control characters"

    /// A purchase token: opaque, longer than an identifier may be, but never
    /// holding a control character (ownership keys are built with one,
    /// `Store.ownershipKey`) and kept in NFC like every id.
    func token(_ key: String) throws(GooglePlayParseError) -> String? {
        guard let text = try string(key, maximumBytes: GooglePlayLimits.maximumTokenBytes) else { return nil }
        guard !text.isEmpty else { throw .invalid(name(key), expected: Self.tokenExpectation, got: "an empty string") }
        if text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return text }
        guard !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw .invalid(name(key), expected: Self.tokenExpectation, got: "a control character")
        }
        return text.precomposedStringWithCanonicalMapping
    }

    // MARK: Numbers and booleans

    /// A whole JSON number.
    func integer(_ key: String) throws(GooglePlayParseError) -> Int64? {
        guard let value = value(key) else { return nil }
        guard let number = value.wholeNumber else {
            throw .invalid(name(key), expected: "a whole number", got: value.kindDescription)
        }
        return number
    }

    /// Google's `int64`, which its JSON writes as a string of digits
    /// (`"purchaseTimeMillis": "1704067200000"`); a number is accepted too.
    func int64(_ key: String) throws(GooglePlayParseError) -> Int64? {
        guard let value = value(key) else { return nil }
        if case .string(let text) = value {
            guard text.utf8.count <= 19, !text.isEmpty, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
                  let number = Int64(text)
            else { throw .invalid(name(key), expected: "an int64 as a string of digits", got: "\"\(text.prefix(40))\"") }
            return number
        }
        guard let number = value.wholeNumber else {
            throw .invalid(name(key), expected: "an int64 (a string of digits or a whole number)", got: value.kindDescription)
        }
        return number
    }

    func bool(_ key: String) throws(GooglePlayParseError) -> Bool? {
        guard let value = value(key) else { return nil }
        guard case .bool(let flag) = value else { throw .invalid(name(key), expected: "true or false", got: value.kindDescription) }
        return flag
    }

    // MARK: Structure

    func object(_ key: String, expected: String = "an object") throws(GooglePlayParseError) -> FieldReader? {
        guard let value = value(key) else { return nil }
        return try FieldReader(value, path: name(key), expected: expected)
    }

    func array(_ key: String) throws(GooglePlayParseError) -> [JSONValue]? {
        guard let value = value(key) else { return nil }
        guard case .array(let items) = value else { throw .invalid(name(key), expected: "an array", got: value.kindDescription) }
        return items
    }

    /// The objects of an array, each read under `key[index]`.
    func objects(_ key: String, expected: String) throws(GooglePlayParseError) -> [FieldReader]? {
        guard let items = try array(key) else { return nil }
        var readers: [FieldReader] = []
        for (index, item) in items.enumerated() {
            readers.append(try FieldReader(item, path: "\(name(key))[\(index)]", expected: expected))
        }
        return readers
    }

    // MARK: Instants

    static let instantRange = "between 1970-01-01T00:00:00Z and 9999-12-31T23:59:59Z"

    /// Milliseconds since 1970 (`eventTimeMillis`, `purchaseTimeMillis`).
    func milliseconds(_ key: String) throws(GooglePlayParseError) -> Date? {
        guard let milliseconds = try int64(key) else { return nil }
        let date = RFC3339.date(milliseconds: milliseconds)
        guard InputLimits.contains(date) else {
            throw .invalid(name(key), expected: "milliseconds since 1970 of an instant \(Self.instantRange)", got: "\(milliseconds)")
        }
        return date
    }

    /// An RFC 3339 date-time; Google's carry up to nine fraction digits
    /// (`2024-01-01T00:00:00.123456789Z`), kept to the millisecond.
    func rfc3339(_ key: String) throws(GooglePlayParseError) -> Date? {
        guard let text = try string(key, maximumBytes: 64) else { return nil }
        guard let date = RFC3339.parse(text), InputLimits.contains(date) else {
            throw .invalid(name(key), expected: "an RFC 3339 date-time such as \"2024-01-01T00:00:00.123Z\" \(Self.instantRange)",
                           got: "\"\(text)\"")
        }
        return date
    }
}

/// Base64url without padding (RFC 7515 §2), as JWS and JWK use it.
package enum Base64URL {
    package static func decode(_ text: some StringProtocol) -> Data? {
        guard text.utf8.allSatisfy({ byte in
            (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
        }) else { return nil }
        var base64 = String(text).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        switch base64.utf8.count % 4 {
        case 2: base64 += "=="
        case 3: base64 += "="
        case 1: return nil
        default: break
        }
        return Data(base64Encoded: base64)
    }

    package static func encode(_ data: some DataProtocol) -> String {
        Data(data).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// JSON written the same way every time (sorted keys, `/` unescaped), for
/// what this module signs and what tests compare.
package enum CanonicalJSON {
    package static func encode(_ value: JSONValue) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // A JSONValue always encodes: it holds nothing but JSON.
        return (try? encoder.encode(value)) ?? Data("null".utf8)
    }
}
