import Foundation
import Hummingbird
import JSON
import Ledger
import SubledgerApp

/// Webhook endpoints of the change feed (admin): `POST/GET /v1/webhooks`,
/// `DELETE /v1/webhooks/{id}`, `GET /v1/webhooks/{id}/deliveries` and
/// `POST /v1/webhooks/{id}/deliveries/{deliveryId}/retry`.
struct WebhooksController {
    let store: WebhookStore
    let keys: APIKeys
    /// Where endpoints may point (`SUBLEDGER_WEBHOOK_ALLOW_PRIVATE`).
    let destinations: WebhookDestinations

    func addRoutes(to router: Router<AppRequestContext>) {
        let group = router.group("v1/webhooks").add(middleware: AuthMiddleware(keys: keys, access: .admin))
        group.post(use: create)
        group.get(use: list)
        group.delete(":webhookId", use: delete)
        group.get(":webhookId/deliveries", use: deliveries)
        group.post(":webhookId/deliveries/:deliveryId/retry", use: retry)
        group.post(":webhookId/rotate-secret", use: rotateSecret)
    }

    struct ListBody: Encodable {
        var webhooks: [WebhookStore.Endpoint]
    }

    struct DeliveriesBody: Encodable {
        var deliveries: [WebhookStore.Delivery]
    }

    static let maximumURLBytes = WebhookDestinations.maximumURLBytes
    static let maximumDescriptionBytes = 500
    static let maximumTypes = 100

    @Sendable func create(request: Request, context: AppRequestContext) async throws -> Response {
        let data = try await RequestInput.body(request, context)
        guard let body = JSONValue(json: data), case .object(let fields) = body else {
            throw LedgerError.invalidJSON("expected an object {\"url\", \"types\", \"description\"}")
        }
        guard let urlValue = fields["url"], urlValue != .null else { throw LedgerError.missingField("url") }
        guard case .string(let url) = urlValue else {
            throw LedgerError.invalidField("url", expected: "an absolute https URL of at most \(Self.maximumURLBytes) bytes")
        }
        if let refusal = await destinations.checkForRegistration(url) {
            throw LedgerError.invalidField("url", expected: "an https URL of a public host, without credentials (\(refusal))")
        }
        var types: [String] = []
        switch fields["types"] {
        case nil, .null?: break
        case .array(let items)?:
            guard items.count <= Self.maximumTypes else {
                throw LedgerError.invalidField("types", expected: "at most \(Self.maximumTypes) change types")
            }
            for item in items {
                guard case .string(let name) = item, ChangesController.isTypeName(name) else {
                    throw LedgerError.invalidField("types", expected: "an array of change types (snake_case, e.g. \"entitlement_lost\")")
                }
                if !types.contains(name) { types.append(name) }
            }
        default:
            throw LedgerError.invalidField("types", expected: "an array of change types (snake_case, e.g. \"entitlement_lost\")")
        }
        var description = ""
        switch fields["description"] {
        case nil, .null?: break
        case .string(let text)?:
            guard text.utf8.count <= Self.maximumDescriptionBytes, !text.utf8.contains(0) else {
                throw LedgerError.invalidField("description", expected: "text of at most \(Self.maximumDescriptionBytes) bytes without NUL")
            }
            description = text
        default:
            throw LedgerError.invalidField("description", expected: "a string")
        }
        do {
            return try .json(try await store.create(url: url, types: types, description: description), status: .created)
        } catch is WebhookStore.LimitReached {
            throw LedgerError(kind: .conflict, code: .webhookLimitReached,
                              message: "At most \(WebhookStore.maximumEndpoints) webhook endpoints may be registered; delete one first.",
                              field: nil)
        }
    }

    /// A new secret, shown once; the old one signs too for 24 hours.
    @Sendable func rotateSecret(request: Request, context: AppRequestContext) async throws -> Response {
        let id = try Self.webhookID(context)
        if id == ReminderWebhook.endpointID {
            throw LedgerError.invalidField("webhookId", expected: "a registered endpoint; the reminder webhook's secret is set by configuration")
        }
        guard let endpoint = try await store.rotateSecret(of: id) else { throw Self.webhookNotFound }
        return try .json(endpoint)
    }

    @Sendable func list(request: Request, context: AppRequestContext) async throws -> Response {
        try .json(ListBody(webhooks: try await store.list()))
    }

    @Sendable func delete(request: Request, context: AppRequestContext) async throws -> Response {
        guard try await store.delete(try Self.webhookID(context)) else { throw Self.webhookNotFound }
        return Response(status: .noContent)
    }

    @Sendable func deliveries(request: Request, context: AppRequestContext) async throws -> Response {
        let id = try Self.webhookID(context)
        let status = try RequestInput.choice("status", in: request, as: WebhookStore.DeliveryStatus.self)
        let limit = try RequestInput.limit(in: request, default: 100, range: 1...1000)
        guard try await store.exists(id) else { throw Self.webhookNotFound }
        return try .json(DeliveriesBody(deliveries: try await store.deliveries(of: id, status: status, limit: limit)))
    }

    @Sendable func retry(request: Request, context: AppRequestContext) async throws -> Response {
        let id = try Self.webhookID(context)
        guard let text = context.parameters.get("deliveryId"), let deliveryID = Int64(text), deliveryID > 0 else {
            throw LedgerError.invalidField("deliveryId", expected: "a delivery id from the deliveries list")
        }
        guard try await store.exists(id) else { throw Self.webhookNotFound }
        guard let delivery = try await store.retry(endpointID: id, deliveryID: deliveryID) else {
            throw LedgerError(kind: .notFound, code: .deliveryNotFound, message: "The webhook has no delivery \(deliveryID).",
                              field: "deliveryId")
        }
        return try .json(delivery)
    }

    static func webhookID(_ context: AppRequestContext) throws(LedgerError) -> String {
        guard let id = context.parameters.get("webhookId"), id.utf8.count <= 64, !id.isEmpty else {
            throw LedgerError.invalidField("webhookId", expected: "a webhook id from POST /v1/webhooks")
        }
        return id
    }

    static var webhookNotFound: LedgerError {
        LedgerError(kind: .notFound, code: .webhookNotFound, message: "No webhook with that id.", field: "webhookId")
    }
}
