import Foundation
import Hummingbird
import Ledger
import SubledgerApp

/// The routes that ask the App Store Server API:
/// `POST /v1/subscribers/{id}/appstore/refresh` (admin).
/// Without the API configured they answer 503 `appstore_api_not_configured`.
struct AppStoreAPIController {
    let appStore: AppStoreIntegration
    let keys: APIKeys

    func addRoutes(to router: Router<AppRequestContext>) {
        router.group("v1/subscribers")
            .add(middleware: AuthMiddleware(keys: keys, access: .admin))
            .post(":subscriberId/appstore/refresh", use: refresh)
    }

    @Sendable func refresh(request: Request, context: AppRequestContext) async throws -> Response {
        let subscriberID = try RequestInput.subscriberID(context)
        return try .json(try await appStore.refresh(subscriberID: subscriberID))
    }
}
