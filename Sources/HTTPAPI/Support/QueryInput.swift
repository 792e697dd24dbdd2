import Foundation
import Hummingbird
import Ledger
import SubledgerApp

/// Query parameters of the read-model queries; a bad one is a 400
/// `invalid_field` naming it.
enum QueryInput {
    /// A value that must be one of a type's raw values; absent: nil.
    static func oneOf<Value: RawRepresentable & CaseIterable>(_ name: String, in request: Request, as _: Value.Type = Value.self)
        throws(LedgerError) -> Value? where Value.RawValue == String
    {
        guard let text = request.uri.queryParameters.get(name) else { return nil }
        guard let value = Value(rawValue: text) else {
            let allowed = Value.allCases.map(\.rawValue).joined(separator: ", ")
            throw .invalidField(name, expected: "one of \(allowed)", got: "\"\(text.prefix(64))\"")
        }
        return value
    }

    /// A whole number in `range`; absent: `defaultValue`.
    static func number(_ name: String, in request: Request, default defaultValue: Int, range: ClosedRange<Int>) throws(LedgerError) -> Int {
        guard let text = request.uri.queryParameters.get(name) else { return defaultValue }
        guard let value = Int(text), range.contains(value) else {
            throw .invalidField(name, expected: "a whole number from \(range.lowerBound) to \(range.upperBound)", got: "\"\(text.prefix(64))\"")
        }
        return value
    }

    /// An identifier (entitlement, group, product id); absent: nil.
    static func identifier(_ name: String, in request: Request) throws(LedgerError) -> String? {
        guard let text = request.uri.queryParameters.get(name) else { return nil }
        return try InputLimits.identifier(text, field: name)
    }

    /// An RFC 3339 instant in the accepted range; absent: nil.
    static func instant(_ name: String, in request: Request) throws(LedgerError) -> Date? {
        guard let text = request.uri.queryParameters.get(name) else { return nil }
        return try InputLimits.instant(parsing: text, field: name)
    }

    /// The store environment to answer for (default Production).
    static func environment(in request: Request) throws(LedgerError) -> Ledger.Environment {
        try oneOf("environment", in: request, as: Ledger.Environment.self) ?? .production
    }
}
