import AppStore
import Foundation
import JSON
import Hummingbird
import Ledger
import Logging
import SubledgerApp

/// The App Store's routes: `POST /v1/appstore/notifications` (no API key: the
/// signature is the authentication) and `POST /v1/subscribers/{id}/receipts`
/// (role ingest).
struct AppStoreController {
    /// nil when `SUBLEDGER_APPSTORE_ROOT_CERTS` / `SUBLEDGER_APPSTORE_BUNDLE_ID`
    /// are missing or unreadable; `unavailable` says which.
    let appStore: AppStoreIntegration
    let keys: APIKeys

    func addRoutes(to router: Router<AppRequestContext>) {
        router.post("v1/appstore/notifications", use: receiveNotification)
        router.group("v1/subscribers")
            .add(middleware: AuthMiddleware(keys: keys, access: .write))
            .post(":subscriberId/receipts", use: validateReceipt)
    }

    @Sendable func receiveNotification(request: Request, context: AppRequestContext) async throws -> Response {
        guard let notifications = appStore.notifications else {
            throw APIError(.serviceUnavailable, code: .appStoreNotConfigured, message: appStore.unavailable)
        }
        struct Body: Decodable { var signedPayload: String }
        let body = try await RequestInput.body(request, context)
        let verified: VerifiedNotification
        let signedPayload: String
        do throws(AppStoreVerificationError) {
            // Other members are allowed and ignored; the payload is kept as Apple sent it.
            guard let decoded = try? JSONDecoder().decode(Body.self, from: body) else {
                throw AppStoreVerificationError(.invalidBody, "The body must be a JSON object {\"signedPayload\": \"<JWS>\"}.")
            }
            signedPayload = decoded.signedPayload
            verified = try await notifications.verifier.verifyNotification(signedPayload: signedPayload)
        } catch {
            NotificationService.count(type: "unverified", outcome: "invalid")
            notifications.logger.notice("app store notification refused", metadata: [
                // The message quotes the sender's header and certificate subjects.
                "error.code": "\(error.code)", "error.field": "\(error.field)",
                "error.message": "\(UntrustedText.escaped(error.message, limit: 512))",
            ])
            throw APIError(error.ledgerError)
        }
        return try .json(try await notifications.receive(verified, signedPayload: signedPayload))
    }

    struct ReceiptBody {
        var receiptData: String
        var deviceID: String?

        static func parse(_ data: Data) throws(LedgerError) -> ReceiptBody {
            let reader = try FieldReader(body: data)
            guard let receipt = try reader.string("receiptData", maxLength: 1 << 20) else {
                throw LedgerError(kind: .badRequest, code: .invalidField,
                                  message: "Field 'receiptData' must be the app receipt as a non-empty base64 string.", field: "receiptData")
            }
            return ReceiptBody(receiptData: receipt, deviceID: try reader.identifier("deviceId"))
        }
    }

    @Sendable func validateReceipt(request: Request, context: AppRequestContext) async throws -> Response {
        let subscriberID = try RequestInput.subscriberID(context)
        let body = try ReceiptBody.parse(try await RequestInput.body(request, context))
        return try .json(try await appStore.recordReceipt(body.receiptData, deviceID: body.deviceID, subscriberID: subscriberID))
    }
}

