import Foundation

// Refunds, their reversals, expiries and subscription changes: facts about
// what the subscriber already holds.
extension Decider {
    /// A refund or revocation. Its key is per refund (transaction and date),
    /// so refund → reversal → refund again ends access again; an undated one
    /// (an API fact) repeats the refund in effect, if any.
    func decide(_ refund: FactRequest.Refund, ledger: SubscriberLedger, owner: (String) -> String?,
                now: Date, source: String) throws(LedgerError) -> Decision {
        let transactionID = refund.transactionID
        if let date = refund.revocationDate {
            if let first = ledger.position(ofKey: LedgerEvent.refundKey(transactionID: transactionID, date: date)) {
                return .duplicate(of: first)
            }
        } else if let inEffect = ledger.refundInEffect(ofTransaction: transactionID, at: now) {
            return .duplicate(of: inEffect.position)
        }
        let recorded = try saleNamed(transactionID, originalTransactionID: refund.originalTransactionID,
                                     environment: refund.environment, ledger: ledger, owner: owner)
        let fact = RefundFact(transactionID: transactionID, originalTransactionID: recorded.originalTransactionID,
                              productID: recorded.productID, revocationDate: refund.revocationDate ?? now,
                              reason: refund.reason, environment: refund.environment, source: source, details: refund.details)
        return Decision(events: [.refunded(fact)])
    }

    /// Undoes a refund (`REFUND_REVERSED`). Recorded even before the refund
    /// arrives: the fold compares dates, so delivery order does not matter.
    func decide(_ reversal: FactRequest.RefundReversal, ledger: SubscriberLedger, owner: (String) -> String?,
                now: Date, source: String) throws(LedgerError) -> Decision {
        let transactionID = reversal.transactionID
        if let date = reversal.effectiveDate,
           let first = ledger.position(ofKey: LedgerEvent.refundReversalKey(transactionID: transactionID, date: date)) {
            return .duplicate(of: first)
        }
        // A reversal dated after every refund of it already undid them all:
        // another has nothing left to undo.
        let latestRefund = ledger.refunds[transactionID]?.map(\.date).max() ?? .distantPast
        if let undone = ledger.refundReversals[transactionID]?.last(where: { $0.date >= latestRefund }) {
            return .duplicate(of: undone.position)
        }
        let recorded = try saleNamed(transactionID, originalTransactionID: reversal.originalTransactionID,
                                     environment: reversal.environment, ledger: ledger, owner: owner)
        let fact = RefundReversal(transactionID: transactionID, originalTransactionID: recorded.originalTransactionID,
                                  productID: recorded.productID, date: reversal.effectiveDate ?? now,
                                  reason: reversal.reason, environment: reversal.environment, source: source)
        return Decision(events: [.refundReversed(fact)])
    }

    /// The sale a refund or its reversal names: the transaction recorded
    /// here, or, when only copies of its purchase are (a restore gives a
    /// new transaction id to the same original), the purchase those copies
    /// are of. 404 when neither is recorded here, 409 when another
    /// subscriber holds it or it is of the other environment.
    private func saleNamed(_ transactionID: String, originalTransactionID: String?, environment: Environment,
                           ledger: SubscriberLedger, owner: (String) -> String?) throws(LedgerError) -> (originalTransactionID: String, productID: String) {
        let sale: (originalTransactionID: String, productID: String, environment: Environment)
        if let recorded = ledger.transactions[transactionID] {
            sale = (recorded.fact.originalTransactionID, recorded.fact.productID, recorded.fact.environment)
        } else if let copy = ledger.latestTransaction(ofOriginal: originalTransactionID ?? transactionID, environment: environment) {
            sale = (copy.fact.originalTransactionID, copy.fact.productID, copy.fact.environment)
        } else {
            if let original = originalTransactionID, let other = owner(environment.ownershipKey(original)), other != ledger.subscriberID {
                throw ownedByOther(original, field: "transactionId")
            }
            throw LedgerError(kind: .notFound, code: .transactionNotFound,
                              message: "Transaction '\(transactionID)' is not recorded for this subscriber.", field: "transactionId")
        }
        guard sale.environment == environment else {
            throw otherEnvironment(transactionID, recorded: sale.environment, field: "transactionId")
        }
        if let other = owner(environment.ownershipKey(sale.originalTransactionID)), other != ledger.subscriberID {
            throw ownedByOther(sale.originalTransactionID, field: "transactionId")
        }
        return (sale.originalTransactionID, sale.productID)
    }

    func decide(_ expiry: FactRequest.Expiry, ledger: SubscriberLedger, now: Date, source: String) throws(LedgerError) -> Decision {
        let fact: ExpiryFact
        switch expiry.subject {
        case .subscription(let original, let end):
            guard let latest = ledger.latestTransaction(ofOriginal: original, environment: expiry.environment) else {
                throw LedgerError(kind: .notFound, code: .transactionNotFound,
                                  message: "Original transaction '\(original)' is not recorded for this subscriber.",
                                  field: "originalTransactionId")
            }
            let group = latest.fact.group ?? catalog.product(id: latest.fact.productID)?.group ?? latest.fact.productID
            // Without an end from the caller, the end is the latest the ledger
            // knows (renewals and extensions included), so a replay gets the same key.
            let knownEnd = ledger.expiresDate(ofTransaction: latest.fact.transactionID)
                ?? Evaluation(ledger: ledger, catalog: catalog, at: now, environment: latest.fact.environment, includingGrants: false)
                    .nonRenewingGroups.first { $0.group == group }?.periods.last?.end
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
    func decideSubscriptionChange(originalTransactionID original: String, productID: String?, environment: Environment,
                                  ledger: SubscriberLedger, owner: (String) -> String?,
                                  event: (String?) -> LedgerEvent) throws(LedgerError) -> Decision {
        if let other = owner(environment.ownershipKey(original)), other != ledger.subscriberID {
            throw ownedByOther(original, field: "originalTransactionId")
        }
        guard ledger.knows(originalTransactionID: original, environment: environment) else {
            throw LedgerError(kind: .notFound, code: .transactionNotFound,
                              message: "Original transaction '\(original)' is not recorded for this subscriber.",
                              field: "originalTransactionId")
        }
        return Self.unlessRecorded(event(productID ?? ledger.latestTransaction(ofOriginal: original, environment: environment)?.fact.productID),
                                   in: ledger)
    }

    /// The event, or a duplicate of the one already recorded with its key.
    private static func unlessRecorded(_ event: LedgerEvent, in ledger: SubscriberLedger) -> Decision {
        if let key = event.idempotencyKey, let first = ledger.position(ofKey: key) { return .duplicate(of: first) }
        return Decision(events: [event])
    }
}
