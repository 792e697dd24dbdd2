import Foundation

// Google Play's facts: a fetched purchase state, and a voided purchase.
// https://developer.android.com/google/play/billing/rtdn-reference
extension Decider {
    /// A fetched state: new unless the same state of the token as of the
    /// same instant was recorded (a push delivered again). A state equal to
    /// the one before it is still recorded: pushes arrive out of order, and
    /// a state left out because it repeated its predecessor would be lost
    /// once a push observed between the two arrives. The token is claimed
    /// like an original transaction (restore policy when another holds it).
    func decide(_ purchase: GooglePlayPurchase, ledger: SubscriberLedger, owner: (String) -> String?,
                now: Date, source: String) throws(LedgerError) -> Decision {
        let event = LedgerEvent.googlePlayPurchase(purchase)
        if let key = event.idempotencyKey, let position = ledger.position(ofKey: key) { return .duplicate(of: position) }
        let token = purchase.purchaseToken
        if let recorded = ledger.playPurchases[token]?.first?.value, recorded.environment != purchase.environment {
            throw otherEnvironment(token, recorded: recorded.environment, field: "purchaseToken")
        }
        guard Evaluation.playProduct(purchase, catalog: catalog) != nil else {
            throw .unknownProduct(purchase.catalogIDs[0], field: "productId")
        }
        var decision = Decision()
        try claim(token, store: .googlePlay, environment: purchase.environment, transaction: nil, event: event, ledger: ledger,
                  owner: owner, now: now, source: source, field: "purchaseToken", into: &decision)
        return decision
    }

    /// A voided purchase of a token this subscriber holds.
    func decide(_ void: GooglePlayVoid, ledger: SubscriberLedger, owner: (String) -> String?,
                now: Date, source: String) throws(LedgerError) -> Decision {
        let event = LedgerEvent.googlePlayVoided(void)
        if let key = event.idempotencyKey, let position = ledger.position(ofKey: key) { return .duplicate(of: position) }
        guard ledger.holds(playToken: void.purchaseToken, environment: void.environment) else {
            throw LedgerError(kind: .notFound, code: .transactionNotFound,
                              message: "No Google Play purchase with this token is recorded for the subscriber in \(void.environment.rawValue).",
                              field: "purchaseToken")
        }
        let key = Store.googlePlay.ownershipKey(void.purchaseToken, environment: void.environment)
        if let other = owner(key), other != ledger.subscriberID {
            throw ownedByOther(void.purchaseToken, field: "purchaseToken")
        }
        return Decision(events: [event])
    }
}
