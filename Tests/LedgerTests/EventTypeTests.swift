import Foundation
import Testing
@testable import Ledger

/// One table of type names: every known type encodes under its name and
/// decodes back from it.
struct EventTypeTests {
    static let day = date("2024-01-01T00:00:00Z")
    static let fact = TransactionFact(transactionID: "t", originalTransactionID: "t", productID: IDs.level2, purchaseDate: day)
    static let transfer = TransferFact(originalTransactionID: "t", fromSubscriberID: "a", toSubscriberID: "b", afterPosition: 1, date: day)
    static let delivery = ReminderDelivery(reminderID: "r", type: .expiryPrompt, group: "pass", productID: IDs.pass, expiresAt: day,
                                           lead: .zero, dueAt: day, date: day)
    static let samples: [LedgerEvent] = [
        .purchased(fact), .renewed(fact), .restored(fact),
        .refunded(RefundFact(transactionID: "t", originalTransactionID: "t", productID: IDs.level2, revocationDate: day)),
        .refundReversed(RefundReversal(transactionID: "t", originalTransactionID: "t", productID: IDs.level2, date: day)),
        .renewalExtended(RenewalExtension(transactionID: "t", originalTransactionID: "t", productID: IDs.monthly, expiresDate: day,
                                          effectiveDate: day)),
        .expired(ExpiryFact(originalTransactionID: nil, group: "pass", productID: IDs.pass, expiresDate: day)),
        .autoRenewChanged(AutoRenewChange(originalTransactionID: "t", productID: nil, autoRenew: false, effectiveDate: day)),
        .billingIssue(BillingIssue(originalTransactionID: "t", productID: nil, effectiveDate: day, gracePeriodExpiresDate: nil)),
        .transferredOut(transfer), .transferredIn(transfer),
        .deviceSeen(DeviceSeen(deviceID: "D1", date: day)),
        .reminderSent(delivery), .reminderFailed(delivery),
        .granted(SupportGrant(grantID: "g", entitlement: "pro", startsAt: day, endsAt: day + 86_400, reason: "apology",
                              grantedBy: ActorStamp(role: "admin", keyFingerprint: "0123456789ab", actor: "Ann"))),
        .grantRevoked(GrantRevocation(grantID: "g", date: day + 3600, reason: nil,
                                      revokedBy: ActorStamp(role: "admin", keyFingerprint: "0123456789ab"))),
        .erased(SubscriberErasure(date: day + 7200, reason: "account deleted",
                                  erasedBy: ActorStamp(role: "admin", keyFingerprint: "0123456789ab", actor: "Ann"), source: "api")),
        .googlePlayPurchase(GooglePlayPurchase(kind: .subscription, purchaseToken: "tok", orderID: "GPA.1", productID: "pro_sub",
                                               state: .active, startTime: day, expiryTime: day + 86_400, autoRenew: true,
                                               acknowledged: true, observedAt: day)),
        .googlePlayVoided(GooglePlayVoid(purchaseToken: "tok", orderID: "GPA.1", voidedAt: day + 3600, reason: 1, voidedSource: 0)),
    ]

    @Test func theNamesAreTheContracts() {
        #expect(LedgerEventType.allCases.map(\.rawValue) == [
            "purchased", "renewed", "restored", "refunded", "refund_reversed", "renewal_extended", "expired",
            "auto_renew_changed", "billing_issue", "transferred_out", "transferred_in", "device_seen", "reminder_sent",
            "reminder_failed", "granted", "grant_revoked", "erased", "google_play_purchase", "google_play_voided",
        ])
    }

    @Test func everyTypeEncodesUnderItsNameAndDecodesBack() throws {
        #expect(Self.samples.compactMap(\.knownType) == LedgerEventType.allCases)
        for event in Self.samples {
            #expect(event.type == event.knownType?.rawValue)
            #expect(try LedgerEvent.decode(type: event.type, schemaVersion: 1, data: event.encodedData()) == event)
        }
        let unknown = LedgerEvent.unknown(type: "gift_received", schemaVersion: 1, data: Data("{}".utf8))
        #expect(unknown.knownType == nil)
        #expect(unknown.type == "gift_received")
    }
}
