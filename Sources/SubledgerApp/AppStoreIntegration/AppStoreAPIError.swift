import Foundation
import AppStore
import Ledger

/// Why a call to the App Store Server API failed. `serviceError` is what an
/// HTTP caller of Subledger sees (502/503), never a 500.
public struct AppStoreAPIError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The API is not configured (key, key id, issuer id, bundle id, roots).
        case notConfigured
        /// Apple answered 401: the key, key id, issuer id or bundle id is wrong.
        case unauthorized
        /// Apple answered 429 and the wait was longer than the client waits.
        case rateLimited(retryAt: Date)
        /// Apple answered 5xx (or a retryable error) on every attempt.
        case unavailable
        /// Apple could not be reached or timed out on every attempt.
        case unreachable
        /// Apple answered 404 (an unknown transaction, order or token).
        case notFound
        /// Apple refused the request (4xx other than 401, 404, 429).
        case rejected
        /// The answer is not the JSON Apple documents.
        case invalidAnswer
        /// A signed part of the answer failed verification; nothing of it was used.
        case unverifiedAnswer(AppStoreVerificationError)
    }

    public var kind: Kind
    public var endpoint: AppStoreAPIEndpoint?
    /// The HTTP status Apple answered, when it answered.
    public var status: Int?
    /// Apple's `errorCode` (4040010 TransactionIdNotFoundError...), when it sent one.
    public var appleErrorCode: Int?
    public var message: String

    public init(_ kind: Kind, endpoint: AppStoreAPIEndpoint? = nil, status: Int? = nil, appleErrorCode: Int? = nil, message: String) {
        self.kind = kind
        self.endpoint = endpoint
        self.status = status
        self.appleErrorCode = appleErrorCode
        self.message = message
    }

    public var description: String {
        var text = "App Store Server API"
        if let endpoint { text += " (\(endpoint.rawValue))" }
        text += ": \(message)"
        if let status { text += " [HTTP \(status)\(appleErrorCode.map { ", errorCode \($0)" } ?? "")]" }
        return text
    }

    /// Stable code for the JSON error body and metrics.
    public var code: ErrorCode {
        switch kind {
        case .notConfigured: .appStoreAPINotConfigured
        case .unauthorized: .appStoreAPIUnauthorized
        case .rateLimited: .appStoreAPIRateLimited
        case .unavailable: .appStoreAPIUnavailable
        case .unreachable: .appStoreAPIUnreachable
        case .notFound: .appStoreAPINotFound
        case .rejected: .appStoreAPIRejected
        case .invalidAnswer: .appStoreAPIInvalidAnswer
        case .unverifiedAnswer: .appStoreAPIUnverifiedAnswer
        }
    }

    /// What a Subledger client is told: Apple or its configuration is at
    /// fault, not the request (503 when it may pass, 502 otherwise).
    public var serviceError: ServiceError {
        switch kind {
        case .notConfigured, .unauthorized: ServiceError(.notConfigured, code: code, message: description)
        case .rateLimited(let retryAt):
            ServiceError(.upstreamUnavailable, code: code, message: description,
                         retryAfter: .seconds(max(1, Int64(retryAt.timeIntervalSinceNow.rounded(.up)))))
        case .unavailable: ServiceError(.upstreamUnavailable, code: code, message: description)
        case .unreachable, .notFound, .rejected, .invalidAnswer, .unverifiedAnswer:
            ServiceError(.upstreamUnreachable, code: code, message: description)
        }
    }

    /// Apple's error codes worth another try ("Error codes": the *Retryable* errors).
    static let retryableAppleCodes: Set<Int> = [4040002, 4040004, 4040006, 5000001]
}
