import AppStore
import AppStoreTesting
import Foundation
import Ledger
import Testing

/// Apple's own sample payloads (`AppleSamples`), re-signed with the test
/// chain, through the verifier: every shape of notification Apple documents
/// (https://developer.apple.com/documentation/appstoreservernotifications/responsebodyv2decodedpayload)
/// is accepted for this app and refused for another, and the signed data
/// nested in them decodes, fields this ledger does not read included.
@Suite struct AppleSampleVerificationTests {
    let store: TestAppStore

    init() throws { store = try TestAppStore() }

    static func field(_ json: String, _ key: String) -> String? {
        (try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])?[key] as? String
    }

    /// Why `verifier` refuses `signed`; nil when it accepts it.
    static func refusal(_ signed: String, by verifier: AppStoreVerifier) async -> AppStoreVerificationError.Code? {
        do {
            _ = try await verifier.verifyNotification(signedPayload: signed)
            return nil
        } catch {
            return error.code
        }
    }

    @Test(arguments: AppleSamples.notifications.map(\.name))
    func everyShapeVerifiesForThisApp(_ name: String) async throws {
        let json = try #require(AppleSamples.notifications.first { $0.name == name }?.json)
        let uuid = UUID().uuidString.lowercased()
        let verified = try await store.verifier.verifyNotification(signedPayload: store.signedSample(json, uuid: uuid))
        #expect(verified.payload.notificationUUID == uuid)
        #expect(verified.payload.notificationType.rawValue == Self.field(json, "notificationType"))
        #expect(verified.payload.subtype?.rawValue == Self.field(json, "subtype"))
    }

    @Test(arguments: AppleSamples.notifications.map(\.name))
    func everyShapeIsRefusedForAnotherApp(_ name: String) async throws {
        let json = try #require(AppleSamples.notifications.first { $0.name == name }?.json)
        let signed = try store.signedSample(json, bundleID: "com.example.someone-else", uuid: UUID().uuidString.lowercased())
        #expect(await Self.refusal(signed, by: store.verifier) == .bundleIDMismatch)
    }

    /// An external purchase token names no environment: a Sandbox token's
    /// `externalPurchaseId` starts with "SANDBOX"
    /// (https://developer.apple.com/documentation/appstoreservernotifications/externalpurchaseid,
    /// and Apple's samples of both).
    @Test func anExternalPurchaseTokensEnvironmentIsInItsID() async throws {
        let production = try store.signedSample(AppleSamples.signedExternalPurchaseTokenNotification, uuid: "token-production")
        let sandbox = try store.signedSample(AppleSamples.signedExternalPurchaseTokenSandboxNotification, uuid: "token-sandbox")
        var productionOnly = store.verifier
        productionOnly.environments = [.production]
        var sandboxOnly = store.verifier
        sandboxOnly.environments = [.sandbox]
        _ = try await productionOnly.verifyNotification(signedPayload: production)
        _ = try await sandboxOnly.verifyNotification(signedPayload: sandbox)
        #expect(await Self.refusal(sandbox, by: productionOnly) == .environmentNotAccepted)
        #expect(await Self.refusal(production, by: sandboxOnly) == .environmentNotAccepted)
    }

    /// `appAppleId` is checked in every shape: Apple's samples name 41234
    /// (`data`, `summary`, `appData`) and 55555 (`externalPurchaseToken`).
    @Test func theAppAppleIDIsCheckedInEveryShape() async throws {
        var verifier = store.verifier
        verifier.appAppleID = 41234
        _ = try await verifier.verifyNotification(signedPayload: store.signedSample(AppleSamples.signedRescindConsentNotification, uuid: "r-1"))
        _ = try await verifier.verifyNotification(signedPayload: store.signedSample(AppleSamples.signedSummaryNotification, uuid: "s-1"))
        for sample in [AppleSamples.signedExternalPurchaseTokenNotification, AppleSamples.signedExternalPurchaseTokenSandboxNotification] {
            #expect(await Self.refusal(try store.signedSample(sample, uuid: "t-1"), by: verifier) == .appAppleIDMismatch)
        }
    }

    /// https://developer.apple.com/documentation/appstoreserverapi/jwstransactiondecodedpayload
    @Test func applesTransactionSamplesDecode() async throws {
        let transaction = try await store.verifier.verifyTransaction(
            store.signedSample(AppleSamples.signedTransaction, bundleID: TestAppStore.bundleID))
        #expect(transaction.transactionID == "23456")
        #expect(transaction.originalTransactionID == "12345")
        #expect(transaction.webOrderLineItemID == "34343")
        #expect(transaction.productID == "com.example.product")
        #expect(transaction.type == .autoRenewable)
        #expect(transaction.purchaseDate == Date(timeIntervalSince1970: 1_698_148_900))
        #expect(transaction.expiresDate == Date(timeIntervalSince1970: 1_698_149_000))
        #expect(transaction.appAccountToken == "7e3fb20b-4cdb-47cc-936d-99d65f608138")
        #expect(transaction.inAppOwnershipType == "PURCHASED")
        #expect(transaction.revocationReason == 1)
        #expect(transaction.revocationDate == Date(timeIntervalSince1970: 1_698_148_950))
        #expect(transaction.environment == .localTesting)
        #expect(transaction.price == 10990)
        #expect(transaction.currency == "USD")
        #expect(transaction.offerDiscountType == "PAY_AS_YOU_GO")
        // What a fact records of it: 10990 milliunits are 10.99.
        #expect(transaction.details.sale == SaleTerms(price: Amount(decimal: "10.99"), currency: "USD", offerDiscount: .payAsYouGo,
                                                      storefront: "USA"))

        let revoked = try await store.verifier.verifyTransaction(
            store.signedSample(AppleSamples.signedTransactionWithRevocation, bundleID: TestAppStore.bundleID))
        #expect(revoked.transactionID == "23456")
        #expect(revoked.revocationDate == Date(timeIntervalSince1970: 1_698_148_950))
    }

    /// https://developer.apple.com/documentation/appstoreserverapi/jwsrenewalinfodecodedpayload
    @Test func applesRenewalInfoSampleDecodes() async throws {
        let renewal = try await store.verifier.verifyRenewalInfo(store.signedSample(AppleSamples.signedRenewalInfo, bundleID: nil))
        #expect(renewal.originalTransactionID == "12345")
        #expect(renewal.productID == "com.example.product")
        #expect(renewal.autoRenewProductID == "com.example.product.2")
        #expect(renewal.autoRenew == true)
        #expect(renewal.expirationIntent == 1)
        #expect(renewal.isInBillingRetryPeriod == true)
        #expect(renewal.gracePeriodExpiresDate == Date(timeIntervalSince1970: 1_698_148_900))
        #expect(renewal.renewalDate == Date(timeIntervalSince1970: 1_698_148_850))
        #expect(renewal.environment == .localTesting)
    }
}
