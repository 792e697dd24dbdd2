/// The stable, machine-readable codes of `{"error": {"code", "message",
/// "field"}}`, every one the service answers with, in one place. Clients
/// match on these strings; a code's wire string never changes.
public struct ErrorCode: RawRepresentable, Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.rawValue = value }
    public var description: String { rawValue }
}

// MARK: Requests (400)
extension ErrorCode {
    /// The body is not valid JSON, or not a JSON object.
    public static let invalidJSON = ErrorCode(rawValue: "invalid_json")
    /// A required field is absent.
    public static let missingField = ErrorCode(rawValue: "missing_field")
    /// A field is present but not what it must be; `field` names it.
    public static let invalidField = ErrorCode(rawValue: "invalid_field")
    /// The fact's `type` is not one the ledger records.
    public static let invalidType = ErrorCode(rawValue: "invalid_type")
    /// An effective date more than 24 hours after the server's clock.
    public static let dateInFuture = ErrorCode(rawValue: "date_in_future")
    /// The body is larger than `SUBLEDGER_MAX_BODY_BYTES` (413).
    public static let bodyTooLarge = ErrorCode(rawValue: "body_too_large")
}

// MARK: Keys (401, 403)
extension ErrorCode {
    /// No API key, or one the server does not know.
    public static let unauthorized = ErrorCode(rawValue: "unauthorized")
    /// The key's role may not do this.
    public static let forbidden = ErrorCode(rawValue: "forbidden")
}

// MARK: The ledger's rules (404, 409, 422)
extension ErrorCode {
    /// A product missing from the catalog.
    public static let unknownProduct = ErrorCode(rawValue: "unknown_product")
    /// A renewal of a product that is not auto-renewable.
    public static let notRenewable = ErrorCode(rawValue: "not_renewable")
    /// A restore of something that cannot be restored (a consumable).
    public static let notRestorable = ErrorCode(rawValue: "not_restorable")
    /// The original transaction belongs to another subscriber
    /// (`SUBLEDGER_RESTORE_POLICY=keep-original`).
    public static let ownedByOtherSubscriber = ErrorCode(rawValue: "owned_by_other_subscriber")
    /// A transaction id already recorded for another product.
    public static let transactionConflict = ErrorCode(rawValue: "transaction_conflict")
    /// A fact of one store environment names a transaction recorded in the
    /// other: Sandbox never changes Production, nor the reverse.
    public static let environmentConflict = ErrorCode(rawValue: "environment_conflict")
    /// A transaction the ledger does not know.
    public static let transactionNotFound = ErrorCode(rawValue: "transaction_not_found")
    /// A subscriber the ledger does not know.
    public static let subscriberNotFound = ErrorCode(rawValue: "subscriber_not_found")
    /// The subscriber was erased (`DELETE /v1/subscribers/{id}`): reads
    /// answer 404 with it, new facts and grants 410.
    public static let erased = ErrorCode(rawValue: "erased")
    /// No such route, or no such file of the console.
    public static let notFound = ErrorCode(rawValue: "not_found")
}

// MARK: Parked events
extension ErrorCode {
    /// No projection of that name.
    public static let consumerNotFound = ErrorCode(rawValue: "consumer_not_found")
    /// No parked event at that position.
    public static let parkedEventNotFound = ErrorCode(rawValue: "parked_event_not_found")
    /// The replayed event failed again; it stays parked.
    public static let replayFailed = ErrorCode(rawValue: "replay_failed")
}

// MARK: Signed App Store payloads (400)
extension ErrorCode {
    /// The body is not `{"signedPayload": "..."}`.
    public static let invalidBody = ErrorCode(rawValue: "invalid_body")
    /// Not a compact JWS (three base64url parts, JSON header).
    public static let invalidJWS = ErrorCode(rawValue: "invalid_jws")
    /// The header's `alg` is not `ES256`.
    public static let unsupportedAlgorithm = ErrorCode(rawValue: "unsupported_algorithm")
    /// `x5c` is not three certificates that chain leaf → intermediate → root.
    public static let invalidCertificateChain = ErrorCode(rawValue: "invalid_certificate_chain")
    /// The root in `x5c` is not one of `SUBLEDGER_APPSTORE_ROOT_CERTS`.
    public static let untrustedRoot = ErrorCode(rawValue: "untrusted_root")
    /// A certificate of the chain was not valid at the payload's `signedDate`.
    public static let certificateExpired = ErrorCode(rawValue: "certificate_expired")
    /// The leaf or intermediate lacks Apple's marker extension.
    public static let missingAppleOID = ErrorCode(rawValue: "missing_apple_oid")
    /// The ES256 signature does not verify with the leaf's key.
    public static let invalidSignature = ErrorCode(rawValue: "invalid_signature")
    /// Signed (or a receipt issued) for another app than `SUBLEDGER_APPSTORE_BUNDLE_ID`.
    public static let bundleIDMismatch = ErrorCode(rawValue: "bundle_id_mismatch")
    /// Signed for another app Apple ID than `SUBLEDGER_APPSTORE_APP_APPLE_ID`.
    public static let appAppleIDMismatch = ErrorCode(rawValue: "app_apple_id_mismatch")
    /// From an environment `SUBLEDGER_APPSTORE_ENVIRONMENTS` does not accept.
    public static let environmentNotAccepted = ErrorCode(rawValue: "environment_not_accepted")
    /// The nested transaction or renewal info is of another environment than the notification.
    public static let environmentMismatch = ErrorCode(rawValue: "environment_mismatch")
    /// The signed payload is not the JSON Apple documents.
    public static let invalidPayload = ErrorCode(rawValue: "invalid_payload")
}

// MARK: Receipts (422)
extension ErrorCode {
    /// `verifyReceipt` status 21003.
    public static let receiptInvalid = ErrorCode(rawValue: "receipt_invalid")
    /// Status 21004: `SUBLEDGER_APPSTORE_SHARED_SECRET` is wrong.
    public static let receiptSharedSecretMismatch = ErrorCode(rawValue: "receipt_shared_secret_mismatch")
    /// Status 21008.
    public static let receiptEnvironmentMismatch = ErrorCode(rawValue: "receipt_environment_mismatch")
    /// Status 21010.
    public static let receiptAccountNotFound = ErrorCode(rawValue: "receipt_account_not_found")
    /// Status 21000.
    public static let receiptMalformed = ErrorCode(rawValue: "receipt_malformed")
    /// Any other status; the message names it.
    public static let receiptRejected = ErrorCode(rawValue: "receipt_rejected")
}

// MARK: The App Store Server API
extension ErrorCode {
    /// A plain restore Apple does not confirm (`SUBLEDGER_RESTORE_VERIFY=api`).
    public static let restoreNotVerified = ErrorCode(rawValue: "restore_not_verified")
    /// Look Up Order ID: Apple does not know the order.
    public static let orderNotFound = ErrorCode(rawValue: "order_not_found")
    /// The App Store Server API's key is not configured (503).
    public static let appStoreAPINotConfigured = ErrorCode(rawValue: "appstore_api_not_configured")
    /// Apple refused the key, key id, issuer id or bundle id (503).
    public static let appStoreAPIUnauthorized = ErrorCode(rawValue: "appstore_api_unauthorized")
    /// Apple rate-limits for longer than a request waits (503).
    public static let appStoreAPIRateLimited = ErrorCode(rawValue: "appstore_api_rate_limited")
    /// Apple answered 5xx, or a retryable error, on every attempt (503).
    public static let appStoreAPIUnavailable = ErrorCode(rawValue: "appstore_api_unavailable")
    /// Apple could not be reached, or timed out, on every attempt (502).
    public static let appStoreAPIUnreachable = ErrorCode(rawValue: "appstore_api_unreachable")
    /// Apple answered 404 (502).
    public static let appStoreAPINotFound = ErrorCode(rawValue: "appstore_api_not_found")
    /// Apple refused the request (502).
    public static let appStoreAPIRejected = ErrorCode(rawValue: "appstore_api_rejected")
    /// Apple's answer is not the JSON it documents (502).
    public static let appStoreAPIInvalidAnswer = ErrorCode(rawValue: "appstore_api_invalid_answer")
    /// A signed part of Apple's answer failed verification; nothing of it was used (502).
    public static let appStoreAPIUnverifiedAnswer = ErrorCode(rawValue: "appstore_api_unverified_answer")
}

// MARK: The Google Play Developer API
extension ErrorCode {
    /// Google refused the service account (its key, or its access to the app) (503).
    public static let googlePlayAPIUnauthorized = ErrorCode(rawValue: "googleplay_api_unauthorized")
    /// Google rate-limits for longer than a request waits (503).
    public static let googlePlayAPIRateLimited = ErrorCode(rawValue: "googleplay_api_rate_limited")
    /// Google answered 5xx or could not be reached on every attempt, or the client's queue was full (503).
    public static let googlePlayAPIUnavailable = ErrorCode(rawValue: "googleplay_api_unavailable")
    /// Google does not know the purchase token (or the package) (502).
    public static let googlePlayAPINotFound = ErrorCode(rawValue: "googleplay_api_not_found")
    /// Google refused the request (502).
    public static let googlePlayAPIRejected = ErrorCode(rawValue: "googleplay_api_rejected")
    /// Google's answer is not the JSON it documents (502).
    public static let googlePlayAPIInvalidAnswer = ErrorCode(rawValue: "googleplay_api_invalid_answer")
}

// MARK: The service and what it depends on (500, 502, 503)
extension ErrorCode {
    /// Notifications or receipts are not configured.
    public static let appStoreNotConfigured = ErrorCode(rawValue: "appstore_not_configured")
    /// `verifyReceipt` could not be reached or answered badly (502).
    public static let appStoreUnreachable = ErrorCode(rawValue: "appstore_unreachable")
    /// `verifyReceipt` still answered a temporary status after the retries (503).
    public static let appStoreUnavailable = ErrorCode(rawValue: "appstore_unavailable")
    /// The database is busy or unreachable (503).
    public static let databaseUnavailable = ErrorCode(rawValue: "database_unavailable")
    /// Writes for one subscriber kept colliding (503).
    public static let contention = ErrorCode(rawValue: "contention")
    /// Anything unexpected; logged (500).
    public static let internalError = ErrorCode(rawValue: "internal_error")
}

// MARK: The change feed and webhooks (404)
extension ErrorCode {
    /// No webhook endpoint with that id.
    public static let webhookNotFound = ErrorCode(rawValue: "webhook_not_found")
    /// The endpoint has no delivery with that id.
    public static let deliveryNotFound = ErrorCode(rawValue: "delivery_not_found")
    /// As many webhook endpoints as allowed (50) are registered already (409).
    public static let webhookLimitReached = ErrorCode(rawValue: "webhook_limit_reached")
}

// MARK: Support actions
extension ErrorCode {
    /// A grant of an entitlement the catalog does not have (422).
    public static let unknownEntitlement = ErrorCode(rawValue: "unknown_entitlement")
    /// A grant id the subscriber never had (404).
    public static let grantNotFound = ErrorCode(rawValue: "grant_not_found")
}

// MARK: Google Play
extension ErrorCode {
    /// No `SUBLEDGER_GOOGLEPLAY_*` configuration (503).
    public static let googlePlayNotConfigured = ErrorCode(rawValue: "googleplay_not_configured")
    /// The Play Developer API (or Google's keys) could not be asked now (503; a push is delivered again).
    public static let googlePlayUnavailable = ErrorCode(rawValue: "googleplay_unavailable")
    /// A push whose OIDC token is missing, badly signed, expired, or for
    /// another audience, issuer or service account (401).
    public static let googlePlayPushUnauthorized = ErrorCode(rawValue: "googleplay_push_unauthorized")
}
