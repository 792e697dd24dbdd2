/// A request the ledger refuses, with what the HTTP edge needs to answer it:
/// `{"error": {"code", "message", "field"}}` with the status of `kind`.
public struct LedgerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// How the refusal maps to HTTP.
    public enum Kind: Sendable, Equatable {
        /// 400: bad JSON or a bad field.
        case badRequest
        /// 409: conflicts with what is recorded (e.g. owned by another subscriber).
        case conflict
        /// 422: well-formed but against a rule (`unknown_product`, `not_restorable`, ...).
        case rule
        /// 404: names a transaction or subscriber the ledger does not know.
        case notFound

        /// The HTTP status code for this kind.
        public var httpStatus: Int {
            switch self {
            case .badRequest: 400
            case .conflict: 409
            case .rule: 422
            case .notFound: 404
            }
        }
    }

    public var kind: Kind
    /// Stable machine-readable code, e.g. `invalid_field`, `unknown_product`.
    public var code: String
    /// Human-readable; names the field and what was expected.
    public var message: String
    /// The JSON field at fault (`transactions[1].purchaseDate`), if any.
    public var field: String?

    public init(kind: Kind, code: String, message: String, field: String? = nil) {
        self.kind = kind
        self.code = code
        self.message = message
        self.field = field
    }

    public var description: String {
        "\(code): \(message)" + (field.map { " (field \($0))" } ?? "")
    }

    static func invalidJSON(_ detail: String) -> LedgerError {
        LedgerError(kind: .badRequest, code: "invalid_json", message: "The body is not valid JSON: \(detail)")
    }

    static func missingField(_ field: String, _ detail: String? = nil) -> LedgerError {
        LedgerError(kind: .badRequest, code: "missing_field",
                    message: "Field '\(field)' is required" + (detail.map { ": \($0)" } ?? "."), field: field)
    }

    static func invalidField(_ field: String, expected: String, got: String? = nil) -> LedgerError {
        LedgerError(kind: .badRequest, code: "invalid_field",
                    message: "Field '\(field)' must be \(expected)" + (got.map { ", got \($0)." } ?? "."), field: field)
    }

    static func unknownProduct(_ productID: String, field: String) -> LedgerError {
        LedgerError(kind: .rule, code: "unknown_product",
                    message: "Product '\(productID)' is not in the catalog.", field: field)
    }
}
