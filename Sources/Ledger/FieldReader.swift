import Foundation
import JSON

/// Reads typed fields out of a JSON object, throwing a `LedgerError` that
/// names the field (with `prefix`, e.g. `transactions[2].`). `null` counts as
/// absent; unknown keys are ignored so clients can send more than we read.
public struct FieldReader: Sendable {
    let fields: [String: JSONValue]
    let prefix: String

    public init(fields: [String: JSONValue], prefix: String = "") {
        self.fields = fields
        self.prefix = prefix
    }

    /// A reader of a request body that must be a JSON object.
    public init(body: Data) throws(LedgerError) {
        self.init(fields: try Self.object(from: body))
    }

    static func object(from data: Data) throws(LedgerError) -> [String: JSONValue] {
        switch JSONValue.parse(data) {
        case .failure(let failure): throw .invalidJSON(failure.detail)
        case .success(.object(let fields)): return fields
        case .success(let other):
            throw LedgerError(kind: .badRequest, code: .invalidJSON,
                              message: "The body must be a JSON object, got \(other.kindDescription).")
        }
    }

    public func name(_ key: String) -> String { prefix + key }

    private func value(_ key: String) -> JSONValue? {
        switch fields[key] {
        case nil, .null?: nil
        case let value?: value
        }
    }

    /// A name out of a fixed list (`type`), checked by the caller.
    public func string(_ key: String, maxLength: Int = 256) throws(LedgerError) -> String? {
        guard let value = value(key) else { return nil }
        guard case .string(let text) = value, !text.isEmpty, text.utf8.count <= maxLength else {
            throw .invalidField(name(key), expected: "a non-empty string of at most \(maxLength) bytes",
                                got: value.kindDescription == "a string" ? "an empty or too long string" : value.kindDescription)
        }
        return text
    }

    /// An identifier (`transactionId`, `productId`, `deviceId`...): 1–200
    /// bytes of UTF-8 without control characters, returned in NFC
    /// (`InputLimits`).
    public func identifier(_ key: String) throws(LedgerError) -> String? {
        guard let value = value(key) else { return nil }
        guard case .string(let text) = value else {
            throw .invalidField(name(key), expected: "a string of 1 to 200 bytes of UTF-8 without control characters",
                                got: value.kindDescription)
        }
        return try InputLimits.identifier(text, field: name(key))
    }

    public func requiredIdentifier(_ key: String, for purpose: String) throws(LedgerError) -> String {
        guard let text = try identifier(key) else { throw .missingField(name(key), purpose) }
        return text
    }

    /// Free text (`reason`): at most 1000 bytes of UTF-8 without NUL.
    public func text(_ key: String) throws(LedgerError) -> String? {
        guard let value = value(key) else { return nil }
        guard case .string(let text) = value else {
            throw .invalidField(name(key), expected: "a string of at most 1000 bytes", got: value.kindDescription)
        }
        try InputLimits.checkFreeText(text, field: name(key))
        return text
    }

    /// An RFC 3339 date-time with an offset, in the range `InputLimits` accepts.
    public func date(_ key: String) throws(LedgerError) -> Date? {
        guard let value = value(key) else { return nil }
        guard case .string(let text) = value else {
            throw .invalidField(name(key), expected: "an RFC 3339 date-time string such as \"2024-01-31T12:00:00Z\" \(InputLimits.rangeDescription)",
                                got: value.kindDescription)
        }
        return try InputLimits.instant(parsing: text, field: name(key))
    }

    public func requiredDate(_ key: String, for purpose: String) throws(LedgerError) -> Date {
        guard let date = try date(key) else { throw .missingField(name(key), purpose) }
        return date
    }

    public func bool(_ key: String) throws(LedgerError) -> Bool? {
        guard let value = value(key) else { return nil }
        guard case .bool(let flag) = value else {
            throw .invalidField(name(key), expected: "true or false", got: value.kindDescription)
        }
        return flag
    }

    public func positiveInteger(_ key: String, max: Int) throws(LedgerError) -> Int? {
        try integer(key, in: 1...max)
    }

    public func integer(_ key: String, in range: ClosedRange<Int>) throws(LedgerError) -> Int? {
        guard let value = value(key) else { return nil }
        guard let number = value.wholeNumber, number >= Int64(range.lowerBound), number <= Int64(range.upperBound) else {
            throw .invalidField(name(key), expected: "an integer from \(range.lowerBound) to \(range.upperBound)", got: value.kindDescription)
        }
        return Int(number)
    }

    /// One of `values`, exactly.
    public func oneOf(_ key: String, _ values: [String]) throws(LedgerError) -> String? {
        guard let value = value(key) else { return nil }
        guard case .string(let text) = value, values.contains(text) else {
            throw .invalidField(name(key), expected: "one of " + values.map { "\"\($0)\"" }.joined(separator: ", "),
                                got: { if case .string(let text) = value { return "\"\(text.prefix(64))\"" } else { return value.kindDescription } }())
        }
        return text
    }

    public func environment(_ key: String) throws(LedgerError) -> Environment? {
        guard let value = value(key) else { return nil }
        guard case .string(let text) = value, let environment = Environment(rawValue: text) else {
            throw .invalidField(name(key), expected: "\"Production\" or \"Sandbox\"",
                                got: { if case .string(let text) = value { return "\"\(text.prefix(64))\"" } else { return value.kindDescription } }())
        }
        return environment
    }

    public func array(_ key: String) throws(LedgerError) -> [JSONValue]? {
        guard let value = value(key) else { return nil }
        guard case .array(let items) = value else {
            throw .invalidField(name(key), expected: "an array", got: value.kindDescription)
        }
        return items
    }
}
