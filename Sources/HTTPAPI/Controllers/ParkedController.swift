import Foundation
import Hummingbird
import Ledger
import SubledgerApp

/// `GET /v1/parked?consumer=&limit=` (admin): events a projection set aside
/// after its handler kept refusing them, newest first.
struct ParkedController {
    let store: ParkedEventStore
    let keys: APIKeys

    func addRoutes(to router: Router<AppRequestContext>) {
        router.group("v1/parked")
            .add(middleware: AuthMiddleware(keys: keys, access: .admin))
            .get(use: list)
    }

    struct ListBody: Encodable {
        var parked: [ParkedEventStore.Entry]
    }

    @Sendable func list(request: Request, context: AppRequestContext) async throws -> Response {
        let consumer = request.uri.queryParameters.get("consumer")
        if let consumer, consumer.isEmpty || consumer.utf8.count > 200
            || consumer.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        {
            throw LedgerError(kind: .badRequest, code: .invalidField,
                              message: "Field 'consumer' must be a consumer name of 1 to 200 bytes without control characters.",
                              field: "consumer")
        }
        let parked = try await store.list(consumer: consumer,
                                          limit: try RequestInput.limit(in: request, default: 100, range: 1...1000))
        return try .json(ListBody(parked: parked))
    }
}
