import Foundation
import Hummingbird
import Ledger
import SubledgerApp

/// `GET /v1/subscriptions` (support, admin): subscriptions across
/// subscribers from the read models, filtered, in keyset pages.
struct SubscriptionsController {
    let queries: ReadModelQueries
    let keys: APIKeys
    let now: @Sendable () -> Date

    func addRoutes(to router: Router<AppRequestContext>) {
        router.group("v1/subscriptions")
            .add(middleware: AuthMiddleware(keys: keys, access: .support))
            .get(use: list)
    }

    struct ListBody: Encodable {
        var subscriptions: [ReadModelQueries.ListedSubscription]
        @ExplicitNull var nextCursor: String?
    }

    @Sendable func list(request: Request, context: AppRequestContext) async throws -> Response {
        var filter = ReadModelQueries.SubscriptionFilter()
        filter.environment = try RequestInput.environment(in: request)
        filter.entitlement = try RequestInput.identifier("entitlement", in: request)
        filter.group = try RequestInput.identifier("group", in: request)
        filter.productID = try RequestInput.identifier("productId", in: request)
        filter.status = try RequestInput.choice("status", in: request, as: SubscriptionStatus.self)
        filter.store = try RequestInput.choice("store", in: request, as: Store.self)
        filter.expiresBefore = try RequestInput.instant("expiresBefore", in: request)
        filter.expiresAfter = try RequestInput.instant("expiresAfter", in: request)
        filter.limit = try RequestInput.limit(in: request, default: 100, range: 1...1000)
        if let token = request.uri.queryParameters.get("cursor") {
            guard let cursor = SubscriptionCursor(token: token) else {
                throw LedgerError.invalidField("cursor", expected: "the nextCursor of a previous page, unchanged")
            }
            filter.cursor = cursor
        }
        let (page, next) = try await queries.subscriptions(filter, now: now())
        return try .json(ListBody(subscriptions: page, nextCursor: next?.token))
    }
}
