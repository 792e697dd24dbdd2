import JSON
import Ledger

/// Why a signed App Store payload (a notification or the transaction and
/// renewal info inside it) was refused. Every case is the sender's fault: a
/// bad request (`ledgerError.kind == .badRequest`), and nothing is stored.
public struct AppStoreVerificationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Its codes live with every other error code (`ErrorCode`:
    /// `invalidSignature`, `untrustedRoot`, `bundleIDMismatch`, ...).
    public typealias Code = ErrorCode

    public var code: Code
    /// What failed, for the client and the log; never contains key material.
    /// It may quote what the sender sent (a decoder's complaint, a header
    /// value), so it is cut to `messageLimit` UTF-8 bytes: an unauthenticated
    /// sender cannot flood a log line. Log lines escape it
    /// (`UntrustedText.escaped`), the JSON answer encodes it.
    public var message: String

    /// The longest message kept, in UTF-8 bytes (before the length note).
    public static let messageLimit = 400
    /// Which JWS failed: `signedPayload`, `data.signedTransactionInfo` or
    /// `data.signedRenewalInfo`; with `invalidField`, the field inside it
    /// (`data.signedTransactionInfo.expiresDate`).
    public var field: String

    public init(_ code: Code, _ message: String, field: String = "signedPayload") {
        self.code = code
        self.message = UntrustedText.capped(message, limit: Self.messageLimit)
        self.field = field
    }

    public var description: String { "\(code): \(message) (field \(field))" }

    /// The same refusal as the ledger's error type (kind `.badRequest`), so
    /// the edge maps it with the rest: `{"error": {"code", "message", "field"}}`.
    public var ledgerError: LedgerError {
        LedgerError(kind: .badRequest, code: code, message: message, field: field)
    }
}

/// `SUBLEDGER_APPSTORE_ROOT_CERTS` could not be loaded; names the file.
public struct AppStoreConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The offending path ("" when the list itself is empty).
    public var path: String
    public var message: String

    public init(path: String, message: String) {
        self.path = path
        self.message = message
    }

    public var description: String {
        path.isEmpty ? "SUBLEDGER_APPSTORE_ROOT_CERTS: \(message)" : "SUBLEDGER_APPSTORE_ROOT_CERTS: \(path): \(message)"
    }
}
