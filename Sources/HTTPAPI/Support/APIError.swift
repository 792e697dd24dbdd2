import Foundation
import Hummingbird
import Ledger
import SubledgerApp

/// An error answered as `{"error": {"code", "message", "field"}}`.
public struct APIError: Error, HTTPResponseError, Sendable {
    public var status: HTTPResponse.Status
    public var code: ErrorCode
    public var message: String
    public var field: String?
    /// Seconds a client should wait before trying again (`Retry-After`).
    public var retryAfter: Int?

    public init(_ status: HTTPResponse.Status, code: ErrorCode, message: String, field: String? = nil, retryAfter: Int? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.retryAfter = retryAfter
    }

    /// A limit of the database or the database away: worth retrying, soon
    /// for a limit that a moment clears, later for an outage.
    public static func databaseUnavailable(_ reason: DatabaseUnavailability) -> APIError {
        APIError(.serviceUnavailable, code: .databaseUnavailable,
                 message: "the database is busy or unreachable (\(reason.rawValue)); retry after \(reason.retryAfter) s",
                 retryAfter: reason.retryAfter)
    }

    /// The status of each kind of refusal: the one place the ledger's errors become HTTP.
    public init(_ error: LedgerError) {
        self.init(Self.status(of: error.kind), code: error.code, message: error.message, field: error.field)
    }

    public static func status(of kind: LedgerError.Kind) -> HTTPResponse.Status {
        switch kind {
        case .badRequest: .badRequest
        case .conflict: .conflict
        case .rule: .unprocessableContent
        case .notFound: .notFound
        case .gone: .gone
        }
    }

    public init(_ error: ServiceError) {
        let status: HTTPResponse.Status = switch error.kind {
        case .upstreamUnreachable: .badGateway
        case .upstreamUnavailable, .notConfigured: .serviceUnavailable
        }
        // An upstream that cannot now may later: say when to try again.
        let retryAfter = error.kind == .upstreamUnavailable ? Int(max(1, error.retryAfter?.components.seconds ?? 5)) : nil
        self.init(status, code: error.code, message: error.message, retryAfter: retryAfter)
    }

    public var headers: HTTPFields {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let retryAfter { headers[.retryAfter] = String(retryAfter) }
        return headers
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    var body: Data {
        var error: [String: String] = ["code": code.rawValue, "message": message]
        if let field { error["field"] = field }
        return (try? JSONSerialization.data(withJSONObject: ["error": error], options: [.sortedKeys])) ?? Data()
    }

    public static let unauthorized = APIError(.unauthorized, code: .unauthorized, message: "an API key is required: send Authorization: Bearer KEY")
    public static let forbidden = APIError(.forbidden, code: .forbidden, message: "this API key's role may not do this")

    /// 413, naming the configured limit (`SUBLEDGER_MAX_BODY_BYTES`) as it reads best.
    public static func bodyTooLarge(limit bytes: Int) -> APIError {
        let limit = bytes % (1 << 20) == 0 ? "\(bytes >> 20) MiB" : bytes % (1 << 10) == 0 ? "\(bytes >> 10) KiB" : "\(bytes) bytes"
        return APIError(.contentTooLarge, code: .bodyTooLarge, message: "the request body is larger than the \(limit) limit")
    }
}
