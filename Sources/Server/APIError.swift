import Foundation
import Hummingbird
import Ledger
import Logging
import Postgres

/// An error answered as `{"error": {"code", "message", "field"}}`.
public struct APIError: Error, HTTPResponseError, Sendable {
    public var status: HTTPResponse.Status
    public var code: String
    public var message: String
    public var field: String?

    public init(_ status: HTTPResponse.Status, code: String, message: String, field: String? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.field = field
    }

    public init(_ error: LedgerError) {
        let status: HTTPResponse.Status = switch error.kind {
        case .badRequest: .badRequest
        case .conflict: .conflict
        case .rule: .unprocessableContent
        case .notFound: .notFound
        }
        self.init(status, code: error.code, message: error.message, field: error.field)
    }

    public var headers: HTTPFields { [.contentType: "application/json"] }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    var body: Data {
        var error: [String: String] = ["code": code, "message": message]
        if let field { error["field"] = field }
        return (try? JSONSerialization.data(withJSONObject: ["error": error], options: [.sortedKeys])) ?? Data()
    }

    public static let unauthorized = APIError(.unauthorized, code: "unauthorized", message: "an API key is required: send Authorization: Bearer KEY")
    public static let forbidden = APIError(.forbidden, code: "forbidden", message: "this API key's role may not do this")
}

/// Turns every error into the contract's JSON body. Framework errors keep their
/// status; anything unexpected is logged and answered 500 without detail.
struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as APIError {
            return try error.response(from: request, context: context)
        } catch let error as LedgerError {
            return try APIError(error).response(from: request, context: context)
        } catch let error as HTTPError {
            let apiError: APIError = switch error.status {
            case .contentTooLarge:
                APIError(.contentTooLarge, code: "body_too_large", message: "the request body is larger than the 1 MiB limit")
            case .notFound:
                APIError(.notFound, code: "not_found", message: "no such route: \(request.method) \(request.uri.path)")
            case .methodNotAllowed:
                APIError(.methodNotAllowed, code: "method_not_allowed", message: "\(request.method) is not allowed on \(request.uri.path)")
            default:
                APIError(error.status, code: "http_\(error.status.code)", message: error.body ?? error.status.reasonPhrase)
            }
            return try apiError.response(from: request, context: context)
        } catch let error as PostgresError where error.code == .poolTimeout || error.code == .poolClosed
            || error.isConnectionBroken
        {
            // Overload or a database away: temporary, so 503 and not a server bug.
            logger.warning("database unavailable for a request", metadata: [
                "http.method": "\(request.method)", "http.path": "\(request.uri.path)", "error": "\(error)",
            ])
            return try APIError(.serviceUnavailable, code: "database_unavailable",
                                message: "the database is busy or unreachable; retry shortly")
                .response(from: request, context: context)
        } catch {
            logger.error("request failed", metadata: [
                "http.method": "\(request.method)", "http.path": "\(request.uri.path)", "error": "\(String(reflecting: error))",
            ])
            return try APIError(.internalServerError, code: "internal_error", message: "the server failed to answer; it has been logged")
                .response(from: request, context: context)
        }
    }
}

/// Requires an API key whose role allows `access`.
struct AuthMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let keys: APIKeys
    let access: Access

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer ") else { throw APIError.unauthorized }
        guard let role = keys.role(for: header.dropFirst("Bearer ".count)) else {
            throw APIError(.unauthorized, code: "unauthorized", message: "the API key is not valid")
        }
        guard access.allows(role) else { throw APIError.forbidden }
        var context = context
        context.role = role
        return try await next(request, context)
    }
}

extension Response {
    /// A JSON response from already-encoded bytes.
    static func json(_ data: Data, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> Response {
        var fields = headers
        fields[.contentType] = "application/json"
        return Response(status: status, headers: fields, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// A JSON response of an `Encodable` value, with the ledger's date format.
    static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) throws -> Response {
        json(try LedgerJSON.makeEncoder().encode(value), status: status, headers: headers)
    }
}
