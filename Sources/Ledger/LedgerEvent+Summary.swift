import Foundation
import JSON

/// A readable line for an event in a subscriber's history, e.g.
/// "Purchased com.example.pass.30d (transaction 1001) on device ABC"
/// (`LedgerEvent.summary`).
private func summary(of event: LedgerEvent) -> String {
    func on(_ fact: TransactionFact) -> String {
        var text = " \(fact.productID) (transaction \(fact.transactionID)"
        if fact.originalTransactionID != fact.transactionID { text += ", original \(fact.originalTransactionID)" }
        text += ")"
        if fact.quantity > 1 { text += " ×\(fact.quantity)" }
        if let expires = fact.expiresDate { text += ", expires \(RFC3339.format(expires))" }
        if let device = fact.deviceID { text += " on device \(device)" }
        if fact.environment == .sandbox { text += " [Sandbox]" }
        return text + Evaluation.storeNote(fact, refund: nil)
    }
    switch event {
    case .purchased(let fact):
        return "Purchased" + on(fact)
    case .renewed(let fact):
        return "Renewed" + on(fact)
    case .restored(let fact):
        return "Restored" + on(fact)
    case .refunded(let refund):
        return "Refunded \(refund.productID) (transaction \(refund.transactionID)), access ended \(RFC3339.format(refund.revocationDate))"
            + (refund.reason.map { ": \($0)" } ?? "")
            + Evaluation.storeNote(TransactionFact(transactionID: refund.transactionID, originalTransactionID: refund.originalTransactionID,
                                                   productID: refund.productID, purchaseDate: refund.revocationDate),
                                   refund: refund.reason == nil ? refund : refund.withoutReasonCode)
    case .refundReversed(let reversal):
        return "Refund of \(reversal.productID) (transaction \(reversal.transactionID)) reversed at \(RFC3339.format(reversal.date)); access restored"
    case .renewalExtended(let renewalExtension):
        return "Extended \(renewalExtension.productID) (transaction \(renewalExtension.transactionID)) to \(RFC3339.format(renewalExtension.expiresDate))"
            + (renewalExtension.environment == .sandbox ? " [Sandbox]" : "")
    case .expired(let expiry):
        if let original = expiry.originalTransactionID {
            return "Expired \(expiry.productID ?? expiry.group) (original transaction \(original)) at \(RFC3339.format(expiry.expiresDate))"
        }
        return "Coverage of group \(expiry.group) ended at \(RFC3339.format(expiry.expiresDate))"
    case .autoRenewChanged(let change):
        return "Auto-renew turned \(change.autoRenew ? "on" : "off") for \(change.productID ?? "original transaction") (original transaction \(change.originalTransactionID))"
    case .billingIssue(let issue):
        let grace = issue.gracePeriodExpiresDate.map { ", grace period until \(RFC3339.format($0))" } ?? ", no grace period"
        return "Billing issue for original transaction \(issue.originalTransactionID)" + grace
    case .transferredOut(let transfer):
        return "Transferred original transaction \(transfer.originalTransactionID) to subscriber \(transfer.toSubscriberID)"
    case .transferredIn(let transfer):
        let product = transfer.transaction.map { " (\($0.productID))" } ?? ""
        return "Received original transaction \(transfer.originalTransactionID)\(product) from subscriber \(transfer.fromSubscriberID)"
    case .deviceSeen(let device):
        return "Device \(device.deviceID) added"
    case .reminderSent(let delivery):
        return "Sent \(delivery.type == .expiryPrompt ? "expiry prompt" : "renewal reminder (\(delivery.lead) before)") for group \(delivery.group), coverage ends \(RFC3339.format(delivery.expiresAt))"
    case .reminderFailed(let delivery):
        return "Reminder \(delivery.reminderID) attempt \(delivery.attempt) failed" + (delivery.error.map { ": \($0)" } ?? "")
    case .granted(let grant):
        return "Granted \(grant.entitlement) (grant \(grant.grantID)) from \(RFC3339.format(grant.startsAt)) until \(RFC3339.format(grant.endsAt)) by \(grant.grantedBy.description): \(grant.reason)"
    case .grantRevoked(let revocation):
        return "Revoked grant \(revocation.grantID) at \(RFC3339.format(revocation.date)) by \(revocation.revokedBy.description)"
            + (revocation.reason.map { ": \($0)" } ?? "")
    case .erased(let erasure):
        return "Erased at \(RFC3339.format(erasure.date)) by \(erasure.erasedBy.description): \(erasure.reason)"
    case .googlePlayPurchase(let purchase):
        return "Google Play: " + purchase.summary
    case .googlePlayVoided(let void):
        return "Google Play voided purchase \(void.orderID.map { "order \($0), " } ?? "")token \(void.purchaseToken) at \(RFC3339.format(void.voidedAt))"
            + (void.reason.map { "; reason: \(GooglePlayVoid.reasonName($0))" } ?? "")
            + (void.environment == .sandbox ? " [Sandbox]" : "")
    case .unknown(let type, let version, _):
        return "Event \(type) (schema version \(version), not known to this version)"
    }
}

extension LedgerEvent {
    /// A readable line for this event in a subscriber's history.
    public var summary: String { Ledger.summary(of: self) }
}

extension RefundFact {
    /// The fact without `revocationReason`, when its `reason` already says it.
    var withoutReasonCode: RefundFact {
        var fact = self
        fact.details.revocationReason = nil
        return fact
    }
}
