/// A request the ledger refuses: `{"error": {"code", "message", "field"}}`,
/// with a `kind` the edge maps to its own status (HTTP: 400, 409, 422, 404).
public struct LedgerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What sort of refusal it is.
    public enum Kind: Sendable, Equatable {
        /// Bad JSON or a bad field (HTTP 400).
        case badRequest
        /// Conflicts with what is recorded, e.g. owned by another subscriber (HTTP 409).
        case conflict
        /// Well-formed but against a rule: `unknown_product`, `not_restorable`, ... (HTTP 422).
        case rule
        /// Names a transaction or subscriber the ledger does not know (HTTP 404).
        case notFound
        /// Names a subscriber that was erased: a write for it (HTTP 410).
        case gone
    }

    public var kind: Kind
    /// Stable machine-readable code, e.g. `invalid_field`, `unknown_product`.
    public var code: ErrorCode
    /// Human-readable; names the field and what was expected.
    public var message: String
    /// The JSON field at fault (`transactions[1].purchaseDate`), if any.
    public var field: String?

    public init(kind: Kind, code: ErrorCode, message: String, field: String? = nil) {
        self.kind = kind
        self.code = code
        self.message = message
        self.field = field
    }

    public var description: String {
        "\(code): \(message)" + (field.map { " (field \($0))" } ?? "")
    }

    public static func invalidJSON(_ detail: String) -> LedgerError {
        LedgerError(kind: .badRequest, code: .invalidJSON, message: "The body is not valid JSON: \(detail)")
    }

    public static func missingField(_ field: String, _ detail: String? = nil) -> LedgerError {
        LedgerError(kind: .badRequest, code: .missingField,
                    message: "Field '\(field)' is required" + (detail.map { ": \($0)" } ?? "."), field: field)
    }

    public static func invalidField(_ field: String, expected: String, got: String? = nil) -> LedgerError {
        LedgerError(kind: .badRequest, code: .invalidField,
                    message: "Field '\(field)' must be \(expected)" + (got.map { ", got \($0)." } ?? "."), field: field)
    }

    /// A new fact, grant or restore for an erased subscriber (410).
    public static let erased = LedgerError(kind: .gone, code: .erased,
                                           message: "The subscriber was erased; nothing more is recorded for it.")

    /// A read of an erased subscriber (404).
    public static let erasedSubscriber = LedgerError(kind: .notFound, code: .erased, message: "The subscriber was erased.")

    static func unknownProduct(_ productID: String, field: String) -> LedgerError {
        LedgerError(kind: .rule, code: .unknownProduct,
                    message: "Product '\(productID)' is not in the catalog.", field: field)
    }
}
