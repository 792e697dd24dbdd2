import Foundation
import JSON

extension LedgerEvent {
    /// The key that makes the fact idempotent within a subscriber's stream
    /// (docs/api.md, "Idempotency"): the transaction id for purchases,
    /// renewals and restores; `refund:` + transaction id + `:` + revocation
    /// date; `expiry:` + original transaction id (+ `@`
    /// end when known) or `expiry:` + group + `@` + end; transfers and other
    /// facts get keys derived from what identifies them.
    public var idempotencyKey: String? {
        switch self {
        case .purchased(let fact), .renewed(let fact), .restored(let fact):
            return fact.transactionID
        case .refunded(let refund):
            return Self.refundKey(transactionID: refund.transactionID, date: refund.revocationDate)
        case .refundReversed(let reversal):
            return Self.refundReversalKey(transactionID: reversal.transactionID, date: reversal.date)
        case .renewalExtended(let renewalExtension):
            // The same transaction can be extended more than once, each time to a new end.
            return "renewal-extended:\(renewalExtension.transactionID)@\(RFC3339.format(renewalExtension.expiresDate))"
        case .expired(let expiry):
            // Sandbox coverage of a group ends apart from production's: its own key.
            let key = Self.expiryKey(originalTransactionID: expiry.originalTransactionID, group: expiry.group,
                                     end: expiry.expiresDate)
            return expiry.originalTransactionID == nil && expiry.environment == .sandbox ? key + "@Sandbox" : key
        case .autoRenewChanged(let change):
            return "auto-renew:\(change.originalTransactionID):\(change.autoRenew ? "on" : "off"):\(RFC3339.format(change.effectiveDate))"
        case .billingIssue(let issue):
            return "billing-issue:\(issue.originalTransactionID):\(RFC3339.format(issue.effectiveDate))"
        case .transferredOut(let transfer):
            return "transfer-out:\(transfer.ownershipKey):\(transfer.fromSubscriberID)>\(transfer.toSubscriberID)@\(transfer.afterPosition)"
        case .transferredIn(let transfer):
            return "transfer-in:\(transfer.ownershipKey):\(transfer.fromSubscriberID)>\(transfer.toSubscriberID)@\(transfer.afterPosition)"
        case .deviceSeen(let device):
            return "device:" + device.deviceID
        case .reminderSent(let delivery):
            return "reminder-sent:" + delivery.reminderID
        case .reminderFailed(let delivery):
            return "reminder-failed:\(delivery.reminderID):\(delivery.attempt)"
        case .granted(let grant):
            return "grant:" + grant.grantID
        case .grantRevoked(let revocation):
            return "grant-revoked:" + revocation.grantID
        case .erased:
            return "erased"
        case .googlePlayPurchase(let purchase):
            // A state as of its instant: a push delivered twice is the same
            // key; the same state again after another is news (a
            // resubscription after a cancellation).
            let key = Store.googlePlay.ownershipKey(purchase.purchaseToken, environment: purchase.environment)
            return "google-play:\(key):\(purchase.state.rawValue):\(purchase.orderID ?? "")"
                + ":\(purchase.expiryTime.map(RFC3339.format) ?? ""):\(purchase.autoRenew.map { $0 ? "on" : "off" } ?? "")"
                + ":\(purchase.acknowledged ? "ack" : ""):\(RFC3339.format(purchase.observedAt))"
        case .googlePlayVoided(let void):
            let key = Store.googlePlay.ownershipKey(void.purchaseToken, environment: void.environment)
            return "google-play-voided:\(key):\(void.orderID ?? "")"
        case .unknown:
            return nil
        }
    }

    /// `refund:` + transaction id + `:` + revocation date: one key per
    /// refund, so a refund, its reversal and a second refund each count.
    static func refundKey(transactionID: String, date: Date) -> String {
        "refund:" + transactionID + ":" + RFC3339.format(date)
    }

    /// `refund-reversed:` + transaction id + `:` + the reversal's date.
    static func refundReversalKey(transactionID: String, date: Date) -> String {
        "refund-reversed:" + transactionID + ":" + RFC3339.format(date)
    }

    static func expiryKey(originalTransactionID: String?, group: String, end: Date?) -> String {
        let end = end.map { "@" + RFC3339.format($0) } ?? ""
        if let originalTransactionID { return "expiry:" + originalTransactionID + end }
        return "expiry:" + group + end
    }
}
