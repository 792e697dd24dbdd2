import Foundation
import JSON
import Hummingbird
import Ledger
import Logging
import Metrics
import SubledgerApp

/// Turns every error into the contract's JSON body, as
/// `APIError.answering` maps it; anything unexpected is logged and answered
/// 500 without detail.
struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    let logger: Logger
    /// The configured body limit, which a 413 names.
    let maximumBodySize: Int
    /// `subledger_database_unavailable_total`, by reason.
    private let unavailable: [DatabaseUnavailability: Counter]

    init(logger: Logger, maximumBodySize: Int, factory: any MetricsFactory = MetricsSystem.factory) {
        self.logger = logger
        self.maximumBodySize = maximumBodySize
        unavailable = Dictionary(uniqueKeysWithValues: DatabaseUnavailability.allCases.map { reason in
            (reason, Counter(label: "subledger_database_unavailable_total", dimensions: [("reason", reason.rawValue)], factory: factory))
        })
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            let path = request.uri.path
            guard let answer = APIError.answering(error, method: request.method, path: path, maximumBodySize: maximumBodySize) else {
                logger.error("request failed", metadata: [
                    "http.method": "\(request.method)", "http.path": "\(LogReference.path(path))", "error": "\(String(reflecting: error))",
                ])
                return try APIError.internalError.response(from: request, context: context)
            }
            note(error, request)
            return try answer.response(from: request, context: context)
        }
    }

    /// What an answered error leaves besides its answer: a store's failure
    /// and the database away are logged, and the database's unavailability
    /// counted by reason.
    private func note(_ error: any Error, _ request: Request) {
        let route: Logger.Metadata = ["http.method": "\(request.method)", "http.path": "\(LogReference.path(request.uri.path))"]
        switch (error, DatabaseFailure(error)) {
        case (is WriteContention, _):
            unavailable[.contention]?.increment()
        case (_, .unavailable(let reason)?):
            unavailable[reason]?.increment()
            logger.warning("database unavailable for a request", metadata: route.merging([
                "db.unavailable": "\(reason.rawValue)", "error": "\(error)",
            ]) { $1 })
        case (let error as any ServiceErrorConvertible, _):
            logger.warning("store api call failed", metadata: route.merging(["error": "\(error)"]) { $1 })
        default:
            break
        }
    }
}
