import Foundation
import Hummingbird
import Ledger
import Logging
import Postgres
import SubledgerApp

/// Read-your-writes across standbys. A successful write answers
/// `Subledger-Consistency: <WAL position>` (read after its commit); a read
/// that sends the token back sees that write: a standby pool waits for its
/// server to replay the position, or hands the read to the primary
/// (`ReadConsistency`, `ReadPath`).
struct ConsistencyMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    static let header = HTTPFields.Element.Name("Subledger-Consistency")!

    let positions: CommitPositions
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        switch request.method {
        case .get, .head:
            guard let token = request.headers[Self.header] else { return try await next(request, context) }
            guard let position = WALPosition(token.trimmingCharacters(in: .whitespaces)) else {
                throw LedgerError(kind: .badRequest, code: .invalidField,
                                  message: "Expected the Subledger-Consistency value of a write's answer (a WAL position such as 0/16B3748).",
                                  field: Self.header.rawName)
            }
            return try await ReadConsistency.$minimumPosition.withValue(position) { try await next(request, context) }
        default:
            var response = try await next(request, context)
            guard (200..<300).contains(response.status.code) else { return response }
            do {
                response.headers[Self.header] = try await positions.current().description
            } catch {
                // The write is committed but its position is unknown (no
                // primary answered in time): the token sends the read that
                // carries it to the primary, which has the write.
                response.headers[Self.header] = WALPosition.primaryOnly.description
                logger.warning("a write's position could not be read; its token reads from the primary",
                               metadata: ["error": "\(error)"])
            }
            return response
        }
    }
}
