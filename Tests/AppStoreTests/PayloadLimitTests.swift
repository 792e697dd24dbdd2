import AppStore
import AppStoreTesting
import Foundation
import Testing

/// App Store payloads meet the input limits of docs/api.md like every other entry
/// point: dates in 1970…9999-12-31T23:59:59Z, identifiers of 1–200 bytes
/// without control characters, normalised to NFC; otherwise `invalid_field`
/// naming the field inside the signed data, and nothing is stored.
@Suite struct PayloadLimitTests {
    let store: TestAppStore

    init() throws { store = try TestAppStore() }

    func refusal(field: String, _ body: () async throws -> Void) async {
        do {
            try await body()
            Issue.record("accepted; expected invalid_field on \(field)")
        } catch let error as AppStoreVerificationError {
            #expect(error.code.rawValue == "invalid_field", "\(error)")
            #expect(error.field == field, "\(error)")
            #expect(error.ledgerError.kind == .badRequest)
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }

    static let beforeRange = Date(timeIntervalSince1970: -0.001)
    /// 10000-01-01T00:00:00Z.
    static let afterRange = Date(timeIntervalSince1970: 253_402_300_800)

    @Test func transactionDatesOutsideTheRangeAreRefused() async throws {
        var early = TestAppStore.subscription(purchaseDate: Self.beforeRange)
        await refusal(field: "signedTransactionInfo.purchaseDate") { _ = try await store.verifier.verifyTransaction(try store.sign(early)) }
        early = TestAppStore.subscription(expiresDate: Self.afterRange)
        let signed = try store.signedNotification(.didRenew, transaction: early)
        await refusal(field: "data.signedTransactionInfo.expiresDate") {
            _ = try await store.verifier.verifyNotification(signedPayload: signed)
        }
        let revoked = TestAppStore.subscription(revocationDate: Self.afterRange)
        await refusal(field: "signedTransactionInfo.revocationDate") { _ = try await store.verifier.verifyTransaction(try store.sign(revoked)) }
    }

    @Test func renewalInfoDatesOutsideTheRangeAreRefused() async throws {
        let signed = try store.signedNotification(.didFailToRenew, .gracePeriod, transaction: TestAppStore.subscription(),
                                                  renewal: TestAppStore.renewalInfo(gracePeriodExpiresDate: Self.afterRange))
        await refusal(field: "data.signedRenewalInfo.gracePeriodExpiresDate") {
            _ = try await store.verifier.verifyNotification(signedPayload: signed)
        }
    }

    @Test func identifiersOutsideTheLimitsAreRefused() async throws {
        let stacked = "a" + String(repeating: "\u{301}", count: 1500)
        for bad in [String(repeating: "9", count: 201), stacked, "20\u{0}00"] {
            await refusal(field: "signedTransactionInfo.transactionId") {
                _ = try await store.verifier.verifyTransaction(try store.sign(TestAppStore.subscription(transactionID: bad)))
            }
            await refusal(field: "signedTransactionInfo.productId") {
                _ = try await store.verifier.verifyTransaction(try store.sign(TestAppStore.subscription(productID: bad)))
            }
            let signed = try store.signedNotification(.didChangeRenewalStatus, .autoRenewDisabled,
                                                      renewal: TestAppStore.renewalInfo(originalTransactionID: bad))
            await refusal(field: "data.signedRenewalInfo.originalTransactionId") {
                _ = try await store.verifier.verifyNotification(signedPayload: signed)
            }
        }
    }

    @Test func identifiersAreNormalisedToNFC() async throws {
        let transaction = try await store.verifier.verifyTransaction(
            try store.sign(TestAppStore.subscription(originalTransactionID: "cafe\u{301}", productID: "com.example.cafe\u{301}")))
        #expect(Array(transaction.productID.utf8) == Array("com.example.caf\u{E9}".utf8))
        #expect(Array((transaction.originalTransactionID ?? "").utf8) == Array("caf\u{E9}".utf8))
    }
}
