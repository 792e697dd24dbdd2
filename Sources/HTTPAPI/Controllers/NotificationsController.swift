import Foundation
import Hummingbird
import Ledger
import SubledgerApp

/// `GET /v1/appstore/notifications?subscriberId=&status=&limit=` (support,
/// admin): stored App Store notifications, newest first, without their signed
/// payloads. `status=pending` lists the unattributed ones.
struct NotificationsController {
    let store: NotificationStore
    let keys: APIKeys

    func addRoutes(to router: Router<AppRequestContext>) {
        router.group("v1/appstore/notifications")
            .add(middleware: AuthMiddleware(keys: keys, access: .support))
            .get(use: list)
    }

    struct ListBody: Encodable {
        var notifications: [NotificationView]
    }

    @Sendable func list(request: Request, context: AppRequestContext) async throws -> Response {
        let notifications = try await store.list(
            subscriberID: try RequestInput.subscriberID(in: request),
            status: try RequestInput.choice("status", in: request, as: NotificationStatus.self),
            limit: try RequestInput.limit(in: request, default: 100, range: 1...1000))
        return try .json(ListBody(notifications: notifications))
    }
}
