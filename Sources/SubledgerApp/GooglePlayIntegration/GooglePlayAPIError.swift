import Foundation
import Ledger

/// Why a call to the Google Play Developer API (or the token exchange
/// before it) failed. `serviceError` is what an HTTP caller of Subledger
/// sees (502/503), never a 500. The message never holds an access token,
/// the service account's key, nor the purchase token asked about.
public struct GooglePlayAPIError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// Google refused the service account: its assertion at the token
        /// endpoint (a wrong or deleted key), a fresh access token (401), or
        /// the account's access to the app (403).
        case unauthorized
        /// Google answered 429 and the wait was longer than the client waits.
        case rateLimited(retryAt: Date)
        /// Google answered 5xx or could not be reached on every attempt, or
        /// the client's own queue was too long to wait in.
        case unavailable
        /// Google does not know the purchase token, product or package (404;
        /// 410 for a subscription expired too long ago to be queried).
        case notFound
        /// Google refused the request (another 4xx).
        case rejected
        /// The answer is not the JSON Google documents.
        case invalidAnswer
    }

    public var kind: Kind
    public var endpoint: GooglePlayAPIEndpoint?
    /// The HTTP status Google answered, when it answered.
    public var status: Int?
    /// Google's reason (`errors[0].reason`, such as `purchaseTokenNotFound`,
    /// else `error.status`, such as `NOT_FOUND`), or the token endpoint's
    /// OAuth error (`invalid_grant`), when it sent one.
    public var reason: String?
    public var message: String

    public init(_ kind: Kind, endpoint: GooglePlayAPIEndpoint? = nil, status: Int? = nil, reason: String? = nil, message: String) {
        self.kind = kind
        self.endpoint = endpoint
        self.status = status
        self.reason = reason
        self.message = message
    }

    public var description: String {
        var text = "Google Play Developer API"
        if let endpoint { text += " (\(endpoint.rawValue))" }
        text += ": \(message)"
        if let status { text += " [HTTP \(status)\(reason.map { ", \($0)" } ?? "")]" }
        return text
    }

    /// Stable code for the JSON error body and metrics.
    public var code: ErrorCode {
        switch kind {
        case .unauthorized: .googlePlayAPIUnauthorized
        case .rateLimited: .googlePlayAPIRateLimited
        case .unavailable: .googlePlayAPIUnavailable
        case .notFound: .googlePlayAPINotFound
        case .rejected: .googlePlayAPIRejected
        case .invalidAnswer: .googlePlayAPIInvalidAnswer
        }
    }

    /// What a Subledger client is told: Google or the configuration is at
    /// fault, not the request (503 when it may pass, 502 otherwise). A
    /// caller for whom `notFound` means something (an unknown token sent by
    /// a client) maps it itself.
    public var serviceError: ServiceError {
        switch kind {
        case .unauthorized: ServiceError(.notConfigured, code: code, message: description)
        case .rateLimited(let retryAt):
            ServiceError(.upstreamUnavailable, code: code, message: description,
                         retryAfter: .seconds(max(1, Int64(retryAt.timeIntervalSinceNow.rounded(.up)))))
        case .unavailable: ServiceError(.upstreamUnavailable, code: code, message: description)
        case .notFound, .rejected, .invalidAnswer: ServiceError(.upstreamUnreachable, code: code, message: description)
        }
    }
}

/// Google's error body, `{"error": {"code", "message", "status", "errors":
/// [{"reason", "domain", "message"}]}}`.
/// https://cloud.google.com/apis/design/errors#http_mapping
struct GoogleErrorBody: Decodable {
    struct Detail: Decodable {
        var code: Int?
        var message: String?
        var status: String?
        var errors: [Item]?
    }

    struct Item: Decodable {
        var reason: String?
        var domain: String?
        var message: String?
    }

    var error: Detail?

    static func parse(_ data: Data) -> Detail? {
        (try? JSONDecoder().decode(GoogleErrorBody.self, from: data))?.error
    }

    /// The 403 reasons that are quota, not permission (Google's older APIs
    /// answer 403 for them where newer ones answer 429).
    static let quotaReasons: Set<String> = ["rateLimitExceeded", "userRateLimitExceeded", "quotaExceeded", "dailyLimitExceeded"]
}

extension GoogleErrorBody.Detail {
    /// The most specific reason Google gave.
    var reason: String? { errors?.first?.reason ?? status }

    var isQuota: Bool {
        status == "RESOURCE_EXHAUSTED" || (errors ?? []).contains { GoogleErrorBody.quotaReasons.contains($0.reason ?? "") }
    }
}
