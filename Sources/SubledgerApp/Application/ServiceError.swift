import Ledger

/// A failure that is nobody's input: a service Subledger depends on is away
/// or not set up. The HTTP layer answers 502 or 503 with its code.
public struct ServiceError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable {
        /// An upstream (the App Store) could not be reached or answered badly: 502.
        case upstreamUnreachable
        /// An upstream answered that it cannot do it now: 503.
        case upstreamUnavailable
        /// The feature is not configured: 503.
        case notConfigured
    }

    public var kind: Kind
    public var code: ErrorCode
    public var message: String
    /// When it is worth trying again (`Retry-After`); nil: not said.
    public var retryAfter: Duration?

    public init(_ kind: Kind, code: ErrorCode, message: String, retryAfter: Duration? = nil) {
        self.kind = kind
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
    }

    public var description: String { "\(code): \(message)" }
}

/// A store integration's error that an HTTP caller of Subledger sees as a
/// `ServiceError` (the store or its configuration at fault, not the request).
public protocol ServiceErrorConvertible: Error {
    var serviceError: ServiceError { get }
}

extension AppStoreAPIError: ServiceErrorConvertible {}
extension GooglePlayAPIError: ServiceErrorConvertible {}
