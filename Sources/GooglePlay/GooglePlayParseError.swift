import JSON
import Ledger

/// A Google Play document (a Pub/Sub push, a fetched purchase, a voided
/// page, the token endpoint's answer) that is not what Google documents:
/// which field, and what it should have been.
///
/// Whose fault it is depends on where the document came from, so the caller
/// decides what it becomes: a push body is the sender's (`ledgerError`, a
/// 400), an answer fetched from Google is the Play API's (the caller's 503).
public struct GooglePlayParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `invalid_json`, `missing_field` or `invalid_field`, as for any request.
    public var code: ErrorCode
    /// The field at fault, as a path from the document's root
    /// (`message.data`, `lineItems[1].expiryTime`); "" for the document.
    public var field: String
    /// What was wrong and what was expected. It may quote what was sent, so
    /// it is cut to `messageLimit` UTF-8 bytes; it never holds key material.
    public var message: String

    /// The longest message kept, in UTF-8 bytes (before the length note).
    public static let messageLimit = 400

    public init(_ code: ErrorCode, field: String, message: String) {
        self.code = code
        self.field = field
        self.message = UntrustedText.capped(message, limit: Self.messageLimit)
    }

    /// A required field that is absent (or `null`).
    static func missing(_ field: String, expected: String) -> GooglePlayParseError {
        GooglePlayParseError(.missingField, field: field, message: "Field '\(field)' is required: \(expected).")
    }

    /// A field that is present but not what Google documents.
    static func invalid(_ field: String, expected: String, got: String? = nil) -> GooglePlayParseError {
        GooglePlayParseError(.invalidField, field: field,
                             message: "Field '\(field)' must be \(expected)" + (got.map { ", got \($0)." } ?? "."))
    }

    public var description: String { "\(code): \(message)" + (field.isEmpty ? "" : " (field \(field))") }

    /// The refusal of a push body as the ledger's error (kind `.badRequest`),
    /// so the edge answers `{"error": {"code", "message", "field"}}` and 400.
    public var ledgerError: LedgerError {
        LedgerError(kind: .badRequest, code: code, message: message, field: field.isEmpty ? nil : field)
    }
}

/// What Google Play documents may hold, checked as they are read so a huge or
/// hostile push costs little and cannot reach the ledger.
public enum GooglePlayLimits {
    /// A whole push body (the envelope and its base64 data), in bytes.
    public static let maximumPushBodyBytes = 128 * 1024
    /// `message.data`, the base64 text of the `DeveloperNotification`.
    public static let maximumDataBytes = 64 * 1024
    /// A purchase token (`purchaseToken`, `linkedPurchaseToken`): Google
    /// documents no length, and real ones are a few hundred characters.
    public static let maximumTokenBytes = 4096
    /// Pub/Sub's own limits on attributes
    /// (https://cloud.google.com/pubsub/quotas#resource_limits).
    public static let maximumAttributes = 100
    public static let maximumAttributeKeyBytes = 256
    public static let maximumAttributeValueBytes = 1024
    /// Text that is neither an identifier nor a token (a `version`, a
    /// `subscription` path, a `messageId`).
    public static let maximumTextBytes = 1024
}
