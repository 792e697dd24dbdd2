import Foundation
import Hummingbird
import Ledger
import SubledgerApp

/// `GET /v1/reminders?status=&dueBefore=&limit=` (support, admin).
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
        let query = request.uri.queryParameters
        var status: ReminderStatus?
        if let text = query.get("status") {
            guard let parsed = ReminderStatus(rawValue: text) else {
                let allowed = ReminderStatus.allCases.map(\.rawValue).joined(separator: ", ")
                throw APIError(.badRequest, code: "invalid_field",
                               message: "Field 'status' must be one of \(allowed), got \"\(text.prefix(64))\".", field: "status")
            }
            status = parsed
        }
        let dueBefore = try RequestInput.instant("dueBefore", in: request)
        var limit = 1000
        if let text = query.get("limit") {
            guard let parsed = Int(text), (1...10_000).contains(parsed) else {
                throw APIError(.badRequest, code: "invalid_field",
                               message: "Field 'limit' must be a whole number from 1 to 10000, got \"\(text.prefix(64))\".", field: "limit")
            }
            limit = parsed
        }
        return try .json(ListBody(reminders: try await store.list(status: status, dueBefore: dueBefore, limit: limit)))
    }
}
