import Foundation
import JSON

// Reasons in words for `explain`: why an auto-renewable subscription grants
// or not at the instant, and what the App Store said about a transaction.
extension Evaluation {
    /// Whether `subscription` grants, until when, and why (without the
    /// store's note): a Google Play subscription's reason was worked out
    /// with its status (`playReason`); an App Store one's follows from it.
    static func grant(of subscription: AutoRenewable) -> (active: Bool, end: Date?, reason: String) {
        if let reason = subscription.playReason {
            let granting = subscription.status == .active || subscription.status == .grace
            return (granting, subscription.graceEnd ?? subscription.end, reason)
        }
        let fact = subscription.latest.fact
        let original = "original transaction \(fact.originalTransactionID), latest transaction \(fact.transactionID)"
        let grant: (Bool, Date?, String)
        switch subscription.status {
        case .active:
            grant = (true, subscription.end, "auto-renewable \(fact.productID) (\(original)) is paid until \(RFC3339.format(subscription.end))"
                     + (subscription.autoRenew ? " and renews" : "; auto-renew is off, so access ends then"))
        case .grace:
            grant = (true, subscription.graceEnd, "auto-renewable \(fact.productID) (\(original)) expired at \(RFC3339.format(subscription.end)) but is in its billing grace period until \(RFC3339.format(subscription.graceEnd!))")
        case .expired:
            var why = "auto-renewable \(fact.productID) (\(original)) expired at \(RFC3339.format(subscription.end))"
            if subscription.expiredByStore != nil { why += " as the App Store reported" }
            if let graceEnd = subscription.graceEnd { why += "; its grace period ended at \(RFC3339.format(graceEnd))" }
            grant = (false, subscription.graceEnd.map { max($0, subscription.end) } ?? subscription.end, why)
        case .revoked:
            let revokedAt = subscription.latest.revokedAt!
            grant = (false, revokedAt, "auto-renewable \(fact.productID) (\(original)) was refunded; access ended at \(RFC3339.format(revokedAt))")
        case .onHold, .paused, .pending:
            // Only Google Play's subscriptions have these (`playReason`).
            grant = (false, subscription.end, "auto-renewable \(fact.productID) (\(original)) is \(subscription.status.rawValue)")
        }
        return grant
    }

    /// What the App Store said about a transaction and its refund, in words
    /// for `explain` ("" when it said nothing).
    static func storeNote(_ fact: TransactionFact, refund: RefundFact?) -> String {
        var notes: [String] = []
        if fact.details.ownershipType == "FAMILY_SHARED" { notes.append("shared through Family Sharing") }
        switch fact.details.offerType {
        case 1?: notes.append("bought with an introductory offer")
        case 2?: notes.append("bought with a promotional offer")
        case 3?: notes.append("bought with an offer code")
        case 4?: notes.append("bought with a win-back offer")
        case let other?: notes.append("bought with offer type \(other)")
        case nil: break
        }
        if fact.details.isUpgraded == true { notes.append("the subscriber upgraded from it") }
        if let details = refund?.details {
            switch details.revocationType {
            case "REFUND_PRORATED"?:
                let share = details.revocationPercentage.map { " (\(Self.percentage(milliunits: $0))% refunded)" } ?? ""
                notes.append("prorated refund\(share)")
            case "FAMILY_REVOKE"?: notes.append("revoked: Family Sharing ended")
            case "REFUND_FULL"?: notes.append("full refund")
            default: break
            }
            switch details.revocationReason {
            case 1?: notes.append("refund reason: an issue with the app")
            case 0?: notes.append("refund reason: another reason")
            default: break
            }
        }
        return notes.isEmpty ? "" : "; " + notes.joined(separator: "; ")
    }

    /// A percentage Apple gives in milliunits, as a decimal with the digits
    /// it has: 50000 is "50", 67932 "67.932", 15 "0.015".
    /// https://developer.apple.com/documentation/appstoreservernotifications/revocationpercentage
    static func percentage(milliunits: Int) -> String {
        let whole = milliunits / 1000, fraction = abs(milliunits % 1000)
        guard fraction != 0 else { return "\(whole)" }
        var digits = String(fraction)
        digits = String(repeating: "0", count: 3 - digits.count) + digits
        while digits.hasSuffix("0") { digits.removeLast() }
        return "\(whole).\(digits)"
    }
}
