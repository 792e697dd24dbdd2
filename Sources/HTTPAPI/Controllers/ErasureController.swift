import Foundation
import Hummingbird
import Ledger
import SubledgerApp

/// `DELETE /v1/subscribers/{subscriberId}` (admin): erases the subscriber
/// (`ErasureService`). `{"reason"}` → `200 {"subscriberId", "erasedAt", "position"}`.
struct ErasureController {
    let service: ErasureService
    let keys: APIKeys

    func addRoutes(to router: Router<AppRequestContext>) {
        router.group("v1/subscribers")
            .add(middleware: AuthMiddleware(keys: keys, access: .admin))
            .delete(":subscriberId", use: erase)
    }

    @Sendable func erase(request: Request, context: AppRequestContext) async throws -> Response {
        let subscriberID = try RequestInput.subscriberID(context)
        let erasure = try ErasureRequest.parse(json: try await RequestInput.body(request, context))
        return try .json(try await service.erase(subscriberID, request: erasure, by: context.actorStamp))
    }
}
