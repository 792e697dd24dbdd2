import Foundation
import Hummingbird
import Ledger
import SubledgerApp

/// `GET /v1/reminders?status=&subscriberId=&dueAfter=&dueBefore=&limit=`
/// (support, admin).
struct RemindersController {
    let store: ReminderStore
    let keys: APIKeys

    func addRoutes(to router: Router<AppRequestContext>) {
        router.group("v1/reminders")
            .add(middleware: AuthMiddleware(keys: keys, access: .support))
            .get(use: list)
    }

    struct ListBody: Encodable {
        var reminders: [ReminderView]
    }

    @Sendable func list(request: Request, context: AppRequestContext) async throws -> Response {
        let reminders = try await store.list(
            status: try RequestInput.choice("status", in: request, as: ReminderStatus.self),
            subscriberID: try RequestInput.subscriberID(in: request),
            dueAfter: try RequestInput.instant("dueAfter", in: request),
            dueBefore: try RequestInput.instant("dueBefore", in: request),
            limit: try RequestInput.limit(in: request, default: 1000, range: 1...10_000))
        return try .json(ListBody(reminders: reminders))
    }
}
