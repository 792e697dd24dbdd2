import AppStore
import Foundation
import Ledger
import Logging

/// The App Store's side of the application: notifications (when configured)
/// and receipts, and the claim observer that lets pending notifications
/// follow their original transaction.
public struct AppStoreIntegration: Sendable {
    public let notifications: NotificationService?
    /// Why notifications are off (`SUBLEDGER_APPSTORE_ROOT_CERTS` or
    /// `SUBLEDGER_APPSTORE_BUNDLE_ID` missing or unreadable).
    public let unavailable: String
    let validator: ReceiptValidator
    let receipts: ReceiptService

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
            NotificationService(verifier: $0, writer: LedgerWriter(dependencies), logger: dependencies.logger)
        }
        self.unavailable = unavailable
        self.validator = ReceiptValidator(configuration: configuration, logger: dependencies.logger)
        var writer = LedgerWriter(dependencies)
        if let notifications = self.notifications {
            writer.claimObserver = { originals, _ in await notifications.applyPending(originalTransactionIDs: originals) }
        }
        self.receipts = ReceiptService(validator: validator, writer: writer, reader: SubscriberReader(dependencies))
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
