import Foundation
import Hummingbird
import Ledger
import SubledgerApp

/// `GET /v1/audit`: who read or changed which subscriber (admin).
struct AuditController {
    let trail: AuditTrail
    let store: AuditStore
    let keys: APIKeys

    func addRoutes(to router: Router<AppRequestContext>) {
        router.group("v1/audit")
            .add(middleware: AuthMiddleware(keys: keys, access: .admin))
            .get(use: list)
    }

    /// `{"entries": [...], "nextCursor"}`: oldest first; `nextCursor` (null
    /// on the last page) is passed back as `after`.
    struct ListBody: Encodable {
        var entries: [AuditStore.Row]
        @ExplicitNull var nextCursor: String?
    }

    @Sendable func list(request: Request, context: AppRequestContext) async throws -> Response {
        let subscriberID = try RequestInput.identifier("subscriberId", in: request)
        var after: Int64 = 0
        if let text = request.uri.queryParameters.get("after") {
            guard let value = Int64(text), value >= 0 else {
                throw LedgerError.invalidField("after", expected: "the nextCursor of a previous page (a whole number)",
                                               got: "\"\(text.prefix(64))\"")
            }
            after = value
        }
        let limit = try RequestInput.limit(in: request, default: 100, range: 1...1000)
        // What this instance recorded up to now is in the answer (its own
        // reads included); other instances' entries follow within their
        // next flush.
        try await store.flush(trail)
        let page = try await store.list(subscriberID: subscriberID, after: after, limit: limit)
        return try .json(ListBody(entries: page.rows, nextCursor: page.more ? page.rows.last.map { String($0.position) } : nil))
    }
}
