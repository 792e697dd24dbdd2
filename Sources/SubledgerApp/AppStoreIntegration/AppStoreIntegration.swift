import AppStore
import Foundation
import Ledger
import Logging

/// The App Store's side of the application: notifications (when configured)
/// and receipts, the claim observer that lets pending notifications follow
/// their original transaction, and what calls the App Store Server API
/// (reconciliation, verified restores, refresh, order lookup: `AppStoreAPIClient`
/// and the types beside it in this folder).
public struct AppStoreIntegration: Sendable {
    public let notifications: NotificationService?
    /// Why notifications are off (`SUBLEDGER_APPSTORE_ROOT_CERTS` or
    /// `SUBLEDGER_APPSTORE_BUNDLE_ID` missing or unreadable).
    public let unavailable: String
    /// The App Store Server API client, when its key is configured.
    public let api: AppStoreAPIClient?
    /// Why `api` is nil.
    public let apiUnavailable: String
    let validator: ReceiptValidator
    let receipts: ReceiptService
    /// The write path, telling pending notifications about claims.
    let writer: LedgerWriter
    let reader: SubscriberReader
    let restoreVerification: RestoreVerification
    let reconcileEnvironments: [Ledger.Environment]
    /// Where an order id is looked up when the caller names no environment:
    /// the accepted ones (`SUBLEDGER_APPSTORE_ENVIRONMENTS`), Production first.
    let orderEnvironments: [Ledger.Environment]
    let logger: Logger

    public init(_ dependencies: AppDependencies) {
        let configuration = dependencies.configuration
        var verifier = dependencies.appStoreVerifier
        var unavailable = ""
        if verifier == nil {
            do {
                verifier = try Self.makeVerifier(configuration)
            } catch {
                unavailable = "\(error)"
                // Not configured at all is a choice, which `serve` notes once
                // at start; configured and unusable is an error.
                if !configuration.appStoreRootCertificates.isEmpty || configuration.appStoreBundleID != nil {
                    dependencies.logger.error("app store notifications disabled", metadata: ["error": "\(error)"])
                }
            }
        }
        self.notifications = verifier.map {
            NotificationService(verifier: $0, writer: LedgerWriter(dependencies), logger: dependencies.logger)
        }
        self.unavailable = unavailable
        self.validator = ReceiptValidator(configuration: configuration, logger: dependencies.logger)
        var writer = LedgerWriter(dependencies)
        if let notifications = self.notifications {
            writer.claimObserver = { originals, _ in await notifications.applyPending(originalTransactionIDs: originals) }
        }
        self.receipts = ReceiptService(validator: validator, writer: writer, reader: SubscriberReader(dependencies))
        self.writer = writer
        self.reader = SubscriberReader(dependencies)
        self.restoreVerification = configuration.restoreVerification
        self.reconcileEnvironments = configuration.reconcileEnvironments
        self.orderEnvironments = [.production, .sandbox].filter { configuration.appStoreEnvironments.contains($0) }
        self.logger = dependencies.logger
        (self.api, self.apiUnavailable) = Self.makeAPIClient(dependencies, verifier: verifier, unavailable: unavailable)
    }

    private static func makeAPIClient(_ dependencies: AppDependencies, verifier: AppStoreVerifier?,
                                      unavailable: String) -> (AppStoreAPIClient?, String) {
        if let client = dependencies.appStoreAPIClient { return (client, "") }
        let configuration = dependencies.configuration
        guard configuration.hasAppStoreAPIKey else {
            return (nil, "The App Store Server API is not configured: set SUBLEDGER_APPSTORE_KEY_FILE, SUBLEDGER_APPSTORE_KEY_ID and SUBLEDGER_APPSTORE_ISSUER_ID.")
        }
        guard let verifier else {
            return (nil, "The App Store Server API needs SUBLEDGER_APPSTORE_ROOT_CERTS and SUBLEDGER_APPSTORE_BUNDLE_ID to verify Apple's answers: \(unavailable)")
        }
        do {
            return (try AppStoreAPIClient.make(configuration, verifier: verifier, logger: dependencies.logger), "")
        } catch {
            dependencies.logger.error("app store server api disabled", metadata: ["error": "\(error)"])
            return (nil, "\(error)")
        }
    }

    /// The API client, or the error saying what to configure.
    public func requireAPI() throws(AppStoreAPIError) -> AppStoreAPIClient {
        guard let api else { throw AppStoreAPIError(.notConfigured, message: apiUnavailable) }
        return api
    }

    /// The verifier `SUBLEDGER_APPSTORE_ROOT_CERTS` and `SUBLEDGER_APPSTORE_BUNDLE_ID` describe.
    public static func makeVerifier(_ configuration: SubledgerConfiguration) throws -> AppStoreVerifier {
        guard !configuration.appStoreRootCertificates.isEmpty else {
            throw ConfigurationError(variable: "SUBLEDGER_APPSTORE_ROOT_CERTS",
                                     message: "not set: App Store notifications need Apple's root certificate (AppleRootCA-G3.cer)")
        }
        guard let bundleID = configuration.appStoreBundleID else {
            throw ConfigurationError(variable: "SUBLEDGER_APPSTORE_BUNDLE_ID", message: "not set: App Store notifications need the app's bundle id")
        }
        var verifier = try AppStoreVerifier(rootCertificatePaths: configuration.appStoreRootCertificates.joined(separator: ","),
                                            bundleID: bundleID)
        verifier.appAppleID = configuration.appStoreAppAppleID
        verifier.environments = configuration.appStoreEnvironments
        return verifier
    }

    /// For `LedgerWriter.claimObserver`: applies what waited for these originals.
    public var claimObserver: (@Sendable ([String], String) async -> Void)? {
        guard let notifications else { return nil }
        return { originals, _ in await notifications.applyPending(originalTransactionIDs: originals) }
    }

    /// Validates an app receipt and records its transactions for `subscriberID`.
    public func recordReceipt(_ receiptData: String, deviceID: String?, subscriberID: String) async throws -> SubscriberState {
        try await receipts.record(receiptData: receiptData, deviceID: deviceID, subscriberID: subscriberID)
    }
}
