import Foundation

// Refunds, their reversals, expiries and subscription changes: facts about
// what the subscriber already holds.
extension Decider {
    func decide(_ refund: FactRequest.Refund, ledger: SubscriberLedger, owner: (String) -> String?,
                now: Date, source: String) throws(LedgerError) -> Decision {
        let transactionID = refund.transactionID
        if let first = ledger.position(ofKey: LedgerEvent.refundKey(transactionID: transactionID)) { return .duplicate(of: first) }
        let recorded = try heldTransaction(transactionID, originalTransactionID: refund.originalTransactionID,
                                           ledger: ledger, owner: owner)
        let fact = RefundFact(transactionID: transactionID, originalTransactionID: recorded.fact.originalTransactionID,
                              productID: recorded.fact.productID, revocationDate: refund.revocationDate ?? now,
                              reason: refund.reason, environment: refund.environment, source: source)
        return Decision(events: [.refunded(fact)])
    }

    /// Undoes a refund (`REFUND_REVERSED`). Recorded even before the refund
    /// arrives: the fold compares dates, so delivery order does not matter.
    func decide(_ reversal: FactRequest.RefundReversal, ledger: SubscriberLedger, owner: (String) -> String?,
                now: Date, source: String) throws(LedgerError) -> Decision {
        let transactionID = reversal.transactionID
        if let first = ledger.position(ofKey: LedgerEvent.refundReversalKey(transactionID: transactionID)) {
            return .duplicate(of: first)
        }
        let recorded = try heldTransaction(transactionID, originalTransactionID: reversal.originalTransactionID,
                                           ledger: ledger, owner: owner)
        let fact = RefundReversal(transactionID: transactionID, originalTransactionID: recorded.fact.originalTransactionID,
                                  productID: recorded.fact.productID, date: reversal.effectiveDate ?? now,
                                  reason: reversal.reason, environment: reversal.environment, source: source)
        return Decision(events: [.refundReversed(fact)])
    }

    /// The subscriber's record of a transaction a refund or its reversal names:
    /// 404 when it is not recorded here, 409 when another subscriber holds it.
    private func heldTransaction(_ transactionID: String, originalTransactionID: String?, ledger: SubscriberLedger,
                                 owner: (String) -> String?) throws(LedgerError) -> SubscriberLedger.TransactionRecord {
        guard let recorded = ledger.transactions[transactionID] else {
            if let original = originalTransactionID, let other = owner(original), other != ledger.subscriberID {
                throw ownedByOther(original, field: "transactionId")
            }
            throw LedgerError(kind: .notFound, code: .transactionNotFound,
                              message: "Transaction '\(transactionID)' is not recorded for this subscriber.", field: "transactionId")
        }
        if let other = owner(recorded.fact.originalTransactionID), other != ledger.subscriberID {
            throw ownedByOther(recorded.fact.originalTransactionID, field: "transactionId")
        }
        return recorded
    }

    func decide(_ expiry: FactRequest.Expiry, ledger: SubscriberLedger, now: Date, source: String) throws(LedgerError) -> Decision {
        let fact: ExpiryFact
        switch expiry.subject {
        case .subscription(let original, let end):
            guard let latest = ledger.latestTransaction(ofOriginal: original) else {
                throw LedgerError(kind: .notFound, code: .transactionNotFound,
                                  message: "Original transaction '\(original)' is not recorded for this subscriber.",
                                  field: "originalTransactionId")
            }
            let group = latest.fact.group ?? catalog.product(id: latest.fact.productID)?.group ?? latest.fact.productID
            // Without an end from the caller, the end is what the ledger knows, so a replay gets the same key.
            let knownEnd = latest.fact.expiresDate
                ?? Evaluation(ledger: ledger, catalog: catalog, at: now, environment: latest.fact.environment).nonRenewingGroups.first { $0.group == group }?.periods.last?.end
            fact = ExpiryFact(originalTransactionID: original, group: group, productID: latest.fact.productID,
                              expiresDate: end ?? knownEnd ?? now, reason: expiry.reason,
                              environment: expiry.environment, source: source)
        case .coverage(let productID, let end):
            guard let product = catalog.product(id: productID) else { throw .unknownProduct(productID, field: "productId") }
            fact = ExpiryFact(originalTransactionID: nil, group: product.group, productID: productID, expiresDate: end,
                              reason: expiry.reason, environment: expiry.environment, source: source)
        }
        return Self.unlessRecorded(.expired(fact), in: ledger)
    }

    /// An auto-renew change or billing issue of an original transaction held
    /// here; `event` makes it for a product (given, or the latest transaction's).
    func decideSubscriptionChange(originalTransactionID original: String, productID: String?, ledger: SubscriberLedger,
                                  owner: (String) -> String?, event: (String?) -> LedgerEvent) throws(LedgerError) -> Decision {
        if let other = owner(original), other != ledger.subscriberID {
            throw ownedByOther(original, field: "originalTransactionId")
        }
        guard ledger.knows(originalTransactionID: original) else {
            throw LedgerError(kind: .notFound, code: .transactionNotFound,
                              message: "Original transaction '\(original)' is not recorded for this subscriber.",
                              field: "originalTransactionId")
        }
        return Self.unlessRecorded(event(productID ?? ledger.latestTransaction(ofOriginal: original)?.fact.productID), in: ledger)
    }

    /// The event, or a duplicate of the one already recorded with its key.
    private static func unlessRecorded(_ event: LedgerEvent, in ledger: SubscriberLedger) -> Decision {
        if let key = event.idempotencyKey, let first = ledger.position(ofKey: key) { return .duplicate(of: first) }
        return Decision(events: [event])
    }
}
