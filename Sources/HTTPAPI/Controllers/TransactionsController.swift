import Foundation
import Hummingbird
import Ledger
import SubledgerApp

/// `GET /v1/transactions/{id}` (support, admin): who owns a transaction and
/// its facts, found by transaction id or original transaction id.
struct TransactionsController {
    let reader: SubscriberReader
    let keys: APIKeys

    func addRoutes(to router: Router<AppRequestContext>) {
        router.group("v1/transactions")
            .add(middleware: AuthMiddleware(keys: keys, access: .support))
            .get(":transactionId", use: transaction)
    }

    @Sendable func transaction(request: Request, context: AppRequestContext) async throws -> Response {
        guard let raw = context.parameters.get("transactionId"), let decoded = raw.removingPercentEncoding else {
            throw LedgerError(kind: .badRequest, code: .invalidField,
                              message: "Field 'transactionId' must be a percent-encoded path segment.", field: "transactionId")
        }
        // 1–200 bytes, no control characters (a NUL is refused, never cut), in NFC.
        let id = try InputLimits.identifier(decoded, field: "transactionId")
        guard let report = try await reader.transaction(id) else {
            throw LedgerError(kind: .notFound, code: .transactionNotFound,
                              message: "No transaction or original transaction '\(id.prefix(256))' is recorded.", field: "transactionId")
        }
        context.auditFound?.set(report.subscriberID)
        return .json(bytes: report.encodedJSON())
    }
}
