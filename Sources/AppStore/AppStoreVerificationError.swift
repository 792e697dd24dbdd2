import Ledger

/// Why a signed App Store payload (a notification or the transaction and
/// renewal info inside it) was refused. Every case is the sender's fault: a
/// bad request (`ledgerError.kind == .badRequest`), and nothing is stored.
public struct AppStoreVerificationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Stable machine-readable codes, as `{"error": {"code"}}` carries them.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The body is not `{"signedPayload": "..."}`.
        public static let invalidBody = Code(rawValue: "invalid_body")
        /// Not a compact JWS (three base64url parts, JSON header).
        public static let invalidJWS = Code(rawValue: "invalid_jws")
        /// The header's `alg` is not `ES256`.
        public static let unsupportedAlgorithm = Code(rawValue: "unsupported_algorithm")
        /// `x5c` is not three certificates that chain leaf → intermediate → root.
        public static let invalidCertificateChain = Code(rawValue: "invalid_certificate_chain")
        /// The root in `x5c` is not one of `SUBLEDGER_APPSTORE_ROOT_CERTS`.
        public static let untrustedRoot = Code(rawValue: "untrusted_root")
        /// A certificate of the chain was not valid at the payload's `signedDate`.
        public static let certificateExpired = Code(rawValue: "certificate_expired")
        /// The leaf or intermediate lacks Apple's marker extension.
        public static let missingAppleOID = Code(rawValue: "missing_apple_oid")
        /// The ES256 signature does not verify with the leaf's key.
        public static let invalidSignature = Code(rawValue: "invalid_signature")
        /// Signed for another app than `SUBLEDGER_APPSTORE_BUNDLE_ID`.
        public static let bundleIDMismatch = Code(rawValue: "bundle_id_mismatch")
        /// Signed for another app Apple ID than `SUBLEDGER_APPSTORE_APP_APPLE_ID`.
        public static let appAppleIDMismatch = Code(rawValue: "app_apple_id_mismatch")
        /// From an environment `SUBLEDGER_APPSTORE_ENVIRONMENTS` does not accept.
        public static let environmentNotAccepted = Code(rawValue: "environment_not_accepted")
        /// The nested transaction or renewal info is of another environment than the notification.
        public static let environmentMismatch = Code(rawValue: "environment_mismatch")
        /// The signed payload is not the JSON Apple documents.
        public static let invalidPayload = Code(rawValue: "invalid_payload")
        /// A field of the signed payload is outside the input limits (a date
        /// outside 1970…9999, an identifier over 200 bytes...); `field` names it.
        public static let invalidField = Code(rawValue: "invalid_field")
    }

    public var code: Code
    /// What failed, for the client and the log; never contains key material.
    public var message: String
    /// Which JWS failed: `signedPayload`, `data.signedTransactionInfo` or
    /// `data.signedRenewalInfo`; with `invalidField`, the field inside it
    /// (`data.signedTransactionInfo.expiresDate`).
    public var field: String

    public init(_ code: Code, _ message: String, field: String = "signedPayload") {
        self.code = code
        self.message = message
        self.field = field
    }

    public var description: String { "\(code): \(message) (field \(field))" }

    /// The same refusal as the ledger's error type (kind `.badRequest`), so
    /// the edge maps it with the rest: `{"error": {"code", "message", "field"}}`.
    public var ledgerError: LedgerError {
        LedgerError(kind: .badRequest, code: code.rawValue, message: message, field: field)
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
