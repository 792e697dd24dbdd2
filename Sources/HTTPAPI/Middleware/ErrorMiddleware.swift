import Foundation
import JSON
import Hummingbird
import Ledger
import Logging
import Metrics
import Postgres
import SubledgerApp

/// Turns every error into the contract's JSON body. Framework errors keep their
/// status; anything unexpected is logged and answered 500 without detail.
struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    let logger: Logger
    /// The configured body limit, which a 413 names.
    let maximumBodySize: Int
    /// `subledger_database_unavailable_total`, by reason.
    private let unavailable: [PostgresError.Unavailability: Counter]

    init(logger: Logger, maximumBodySize: Int, factory: any MetricsFactory = MetricsSystem.factory) {
        self.logger = logger
        self.maximumBodySize = maximumBodySize
        unavailable = Dictionary(uniqueKeysWithValues: PostgresError.Unavailability.allCases.map { reason in
            (reason, Counter(label: "subledger_database_unavailable_total", dimensions: [("reason", reason.rawValue)], factory: factory))
        })
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as APIError {
            return try error.response(from: request, context: context)
        } catch let error as LedgerError {
            return try APIError(error).response(from: request, context: context)
        } catch let error as ServiceError {
            return try APIError(error).response(from: request, context: context)
        } catch let error as AppStoreAPIError {
            logger.warning("app store server api call failed", metadata: [
                "http.method": "\(request.method)", "http.path": "\(LogReference.path(request.uri.path))", "error": "\(error)",
            ])
            return try APIError(error.serviceError).response(from: request, context: context)
        } catch let error as WriteContention {
            unavailable[.contention]?.increment()
            return try APIError(.serviceUnavailable, code: .contention, message: error.description, retryAfter: 1)
                .response(from: request, context: context)
        } catch let error as PostgresError where error.isDataError {
            // A value the database cannot store or index: the input's fault.
            return try APIError(.badRequest, code: .invalidField,
                                message: "a value of the request cannot be stored (SQLSTATE \(error.sqlState?.rawValue ?? "?"))")
                .response(from: request, context: context)
        } catch let error as HTTPError {
            let apiError: APIError = switch error.status {
            case .contentTooLarge:
                APIError.bodyTooLarge(limit: maximumBodySize)
            case .notFound:
                APIError(.notFound, code: .notFound, message: "no such route: \(request.method) \(request.uri.path)")
            case .methodNotAllowed:
                APIError(.methodNotAllowed, code: .methodNotAllowed, message: "\(request.method) is not allowed on \(request.uri.path)")
            default:
                APIError(error.status, code: .http(error.status.code), message: error.body ?? error.status.reasonPhrase)
            }
            return try apiError.response(from: request, context: context)
        } catch let error as PostgresError where error.unavailability != nil {
            // A limit of the database or the database away: temporary, so 503
            // and not a server bug.
            let reason = error.unavailability ?? .connectionLost
            unavailable[reason]?.increment()
            logger.warning("database unavailable for a request", metadata: [
                "http.method": "\(request.method)", "http.path": "\(LogReference.path(request.uri.path))", "db.unavailable": "\(reason.rawValue)",
                "error": "\(error)",
            ])
            return try APIError.databaseUnavailable(reason).response(from: request, context: context)
        } catch {
            logger.error("request failed", metadata: [
                "http.method": "\(request.method)", "http.path": "\(LogReference.path(request.uri.path))", "error": "\(String(reflecting: error))",
            ])
            return try APIError(.internalServerError, code: .internalError, message: "the server failed to answer; it has been logged")
                .response(from: request, context: context)
        }
    }
}
