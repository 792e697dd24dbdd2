import Foundation
import Hummingbird
import Ledger
import SubledgerApp

/// The routes that ask the App Store Server API: `GET /v1/orders/{orderId}`
/// (support, admin) and `POST /v1/subscribers/{id}/appstore/refresh` (admin).
/// Without the API configured they answer 503 `appstore_api_not_configured`.
struct AppStoreAPIController {
    let appStore: AppStoreIntegration
    let keys: APIKeys

    func addRoutes(to router: Router<AppRequestContext>) {
        router.group("v1/orders")
            .add(middleware: AuthMiddleware(keys: keys, access: .support))
            .get(":orderId", use: order)
        router.group("v1/subscribers")
            .add(middleware: AuthMiddleware(keys: keys, access: .admin))
            .post(":subscriberId/appstore/refresh", use: refresh)
    }

    @Sendable func order(request: Request, context: AppRequestContext) async throws -> Response {
        guard let raw = context.parameters.get("orderId"), let orderID = raw.removingPercentEncoding else {
            throw LedgerError.invalidField("orderId", expected: "a percent-encoded path segment")
        }
        var environment: Ledger.Environment?
        if let text = request.uri.queryParameters.get("environment") {
            guard let parsed = Ledger.Environment(rawValue: String(text)) else {
                throw LedgerError.invalidField("environment", expected: "\"Production\" or \"Sandbox\"", got: "\"\(text.prefix(64))\"")
            }
            environment = parsed
        }
        return try .json(try await appStore.lookUpOrder(orderID, environment: environment))
    }

    @Sendable func refresh(request: Request, context: AppRequestContext) async throws -> Response {
        let subscriberID = try RequestInput.subscriberID(context)
        return try .json(try await appStore.refresh(subscriberID: subscriberID))
    }
}
