import AppStore
import Foundation
import Hummingbird
import Ledger
import Logging

/// The App Store's routes: `POST /v1/appstore/notifications` (no API key: the
/// signature is the authentication) and `POST /v1/subscribers/{id}/receipts`
/// (role ingest).
struct AppStoreController {
    /// nil when `SUBLEDGER_APPSTORE_ROOT_CERTS` / `SUBLEDGER_APPSTORE_BUNDLE_ID`
    /// are missing or unreadable; `unavailable` says which.
    let notifications: NotificationService?
    let unavailable: String
    let receipts: ReceiptService
    let keys: APIKeys

    func addRoutes(to router: Router<AppRequestContext>) {
        router.post("v1/appstore/notifications", use: receiveNotification)
        router.group("v1/subscribers")
            .add(middleware: AuthMiddleware(keys: keys, access: .write))
            .post(":subscriberId/receipts", use: validateReceipt)
    }

    @Sendable func receiveNotification(request: Request, context: AppRequestContext) async throws -> Response {
        guard let notifications else {
            throw APIError(.serviceUnavailable, code: "appstore_not_configured", message: unavailable)
        }
        let body = try await SubscriberController.body(request, context)
        let verified: VerifiedNotification
        do throws(AppStoreVerificationError) {
            verified = try await notifications.verifier.verifyNotification(body: body)
        } catch {
            NotificationService.count(type: "unverified", outcome: "invalid")
            notifications.logger.notice("app store notification refused", metadata: [
                "error.code": "\(error.code)", "error.field": "\(error.field)", "error.message": "\(error.message)",
            ])
            throw APIError(error.ledgerError)
        }
        // Verified, so the body is {"signedPayload": "..."}: keep it as Apple sent it.
        let signedPayload = (try? JSONDecoder().decode([String: String].self, from: body))?["signedPayload"] ?? ""
        return try .json(try await notifications.receive(verified, signedPayload: signedPayload))
    }

    struct ReceiptBody {
        var receiptData: String
        var deviceId: String?

        static func parse(_ data: Data) throws(LedgerError) -> ReceiptBody {
            guard let object = try? JSONSerialization.jsonObject(with: data), let fields = object as? [String: Any] else {
                throw LedgerError(kind: .badRequest, code: "invalid_json",
                                  message: "The body must be a JSON object {\"receiptData\": \"<base64 receipt>\", \"deviceId\": \"...\"}.")
            }
            guard let receipt = fields["receiptData"] as? String, !receipt.isEmpty else {
                throw LedgerError(kind: .badRequest, code: "invalid_field",
                                  message: "Field 'receiptData' must be the app receipt as a non-empty base64 string.", field: "receiptData")
            }
            var deviceID: String?
            if let value = fields["deviceId"], !(value is NSNull) {
                guard let text = value as? String, !text.isEmpty, text.count <= 200 else {
                    throw LedgerError(kind: .badRequest, code: "invalid_field",
                                      message: "Field 'deviceId' must be a string of 1 to 200 characters.", field: "deviceId")
                }
                deviceID = text
            }
            return ReceiptBody(receiptData: receipt, deviceId: deviceID)
        }
    }

    @Sendable func validateReceipt(request: Request, context: AppRequestContext) async throws -> Response {
        let subscriberID = try SubscriberController.subscriberID(context)
        let body = try ReceiptBody.parse(try await SubscriberController.body(request, context))
        return try .json(try await receipts.record(receiptData: body.receiptData, deviceID: body.deviceId, subscriberID: subscriberID))
    }
}

/// Builds the App Store routes from the dependencies and tells the ledger's
/// writes about claims, so pending notifications follow their original.
public struct AppStoreIntegration: Sendable {
    public let notifications: NotificationService?
    let unavailable: String
    let validator: ReceiptValidator

    public init(_ dependencies: AppDependencies) {
        let configuration = dependencies.configuration
        var verifier = dependencies.appStoreVerifier
        var unavailable = ""
        if verifier == nil {
            do {
                verifier = try Self.makeVerifier(configuration)
            } catch {
                unavailable = "\(error)"
                dependencies.logger.error("app store notifications disabled", metadata: ["error": "\(error)"])
            }
        }
        self.notifications = verifier.map {
            NotificationService(verifier: $0, ledger: LedgerService(dependencies), logger: dependencies.logger)
        }
        self.unavailable = unavailable
        self.validator = ReceiptValidator(configuration: configuration, logger: dependencies.logger)
    }

    /// The verifier `SUBLEDGER_APPSTORE_ROOT_CERTS` and `SUBLEDGER_APPSTORE_BUNDLE_ID` describe.
    public static func makeVerifier(_ configuration: ServerConfiguration) throws -> AppStoreVerifier {
        guard !configuration.appStoreRootCertificates.isEmpty else {
            throw ConfigurationError(variable: "SUBLEDGER_APPSTORE_ROOT_CERTS",
                                     message: "not set: App Store notifications need Apple's root certificate (AppleRootCA-G3.cer)")
        }
        guard let bundleID = configuration.appStoreBundleID else {
            throw ConfigurationError(variable: "SUBLEDGER_APPSTORE_BUNDLE_ID", message: "not set: App Store notifications need the app's bundle id")
        }
        return try AppStoreVerifier(rootCertificatePaths: configuration.appStoreRootCertificates.joined(separator: ","), bundleID: bundleID)
    }

    /// For `LedgerService.claimObserver`: applies what waited for these originals.
    public var claimObserver: (@Sendable ([String], String) async -> Void)? {
        guard let notifications else { return nil }
        return { originals, _ in await notifications.applyPending(originalTransactionIDs: originals) }
    }

    func addRoutes(to router: Router<AppRequestContext>, ledger: LedgerService, keys: APIKeys) {
        AppStoreController(notifications: notifications, unavailable: unavailable,
                           receipts: ReceiptService(validator: validator, ledger: ledger), keys: keys)
            .addRoutes(to: router)
    }
}
