import Foundation
import GooglePlay
import Hummingbird
import JSON
import Ledger
import Logging
import SubledgerApp

/// Google Play's routes: `POST /v1/googleplay/notifications` (Pub/Sub push;
/// no API key: the push's OIDC token is the authentication) and
/// `POST /v1/subscribers/{id}/googleplay/purchases` (role ingest).
struct GooglePlayController {
    let googlePlay: GooglePlayIntegration
    let keys: APIKeys
    let logger: Logger

    func addRoutes(to router: Router<AppRequestContext>) {
        router.post("v1/googleplay/notifications", use: receivePush)
        router.group("v1/subscribers")
            .add(middleware: AuthMiddleware(keys: keys, access: .write))
            .post(":subscriberId/googleplay/purchases", use: linkPurchase)
    }

    /// Checks the token before reading anything else of the push: a bad one
    /// is 401 and nothing is stored.
    /// https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions
    @Sendable func receivePush(request: Request, context: AppRequestContext) async throws -> Response {
        let service = try googlePlay.requireService()
        guard let keys = googlePlay.pushKeys else {
            throw APIError(.serviceUnavailable, code: .googlePlayNotConfigured, message: googlePlay.unavailable)
        }
        let authorization = request.headers[.authorization] ?? ""
        guard authorization.count < 8192, authorization.lowercased().hasPrefix("bearer ") else {
            throw APIError(.unauthorized, code: .googlePlayPushUnauthorized,
                           message: "A Pub/Sub push must carry its OIDC token: Authorization: Bearer <JWT>.")
        }
        do throws(GoogleIDTokenError) {
            _ = try await keys.verify(token: String(authorization.dropFirst(7)).trimmingCharacters(in: .whitespaces), now: Date())
        } catch {
            GooglePlayService.count(kind: "unverified", outcome: error.isTokenRefused ? "unauthorized" : "keys_unavailable")
            guard error.isTokenRefused else {
                throw APIError(.serviceUnavailable, code: .googlePlayUnavailable,
                               message: "Google's keys for push tokens could not be read; Pub/Sub will deliver the push again.", retryAfter: 5)
            }
            logger.notice("google play push refused", metadata: ["error": "\(UntrustedText.escaped("\(error)", limit: 300))"])
            throw APIError(.unauthorized, code: .googlePlayPushUnauthorized, message: "The push's token was refused: \(error)")
        }
        let body = try await RequestInput.body(request, context)
        let push: PubSubPush
        do throws(GooglePlayParseError) {
            push = try PubSubPush.parse(body: body)
        } catch {
            throw APIError(error.ledgerError)
        }
        return try .json(try await service.receive(push))
    }

    /// `{"purchaseToken", "productId", "type": "subscription"|"product"}`.
    struct LinkBody {
        var purchaseToken: String
        var productID: String
        var kind: GooglePlayPurchase.Kind

        static func parse(_ data: Data) throws(LedgerError) -> LinkBody {
            let reader = try FieldReader(body: data)
            guard let token = try reader.string("purchaseToken", maxLength: InputLimits.purchaseTokenBytes.upperBound) else {
                throw .missingField("purchaseToken", "the purchase token Google Play Billing gave the app")
            }
            try InputLimits.checkPurchaseToken(token, field: "purchaseToken")
            guard let productID = try reader.identifier("productId") else {
                throw .missingField("productId", "Play's product id (the subscription id for a subscription)")
            }
            let kind: GooglePlayPurchase.Kind
            switch try reader.oneOf("type", ["subscription", "product"]) {
            case "product"?: kind = .product
            case "subscription"?: kind = .subscription
            default: throw .missingField("type", "subscription or product")
            }
            return LinkBody(purchaseToken: token, productID: productID, kind: kind)
        }
    }

    @Sendable func linkPurchase(request: Request, context: AppRequestContext) async throws -> Response {
        let subscriberID = try RequestInput.subscriberID(context)
        let service = try googlePlay.requireService()
        let body = try LinkBody.parse(try await RequestInput.body(request, context))
        let state = try await service.link(subscriberID: subscriberID, purchaseToken: body.purchaseToken, productID: body.productID,
                                           kind: body.kind)
        // Acknowledge now rather than at the worker's next round; the worker
        // retries whatever this does not settle.
        if let acknowledger = googlePlay.acknowledger { _ = try? await acknowledger.acknowledgeDue() }
        return try .json(state)
    }
}
