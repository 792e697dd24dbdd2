import Foundation

// Purchases, renewals and restores: the facts that record a transaction and
// settle who owns its original transaction.
extension Decider {
    /// `requested` is the fact as the request gave it; the catalog's terms
    /// are added here. `renewal` is set for a renewal (it may extend a
    /// recorded transaction).
    func decideTransaction(_ requested: TransactionFact, renewal: FactRequest.Renewal?, ledger: SubscriberLedger,
                           owner: (String) -> String?, now: Date, source: String) throws(LedgerError) -> Decision {
        let transactionID = requested.transactionID
        let productID = requested.productID
        if let recorded = ledger.transactions[transactionID] {
            guard recorded.fact.environment == requested.environment else {
                throw otherEnvironment(transactionID, recorded: recorded.fact.environment, field: "transactionId")
            }
            try checkSameProduct(recorded, productID: productID)
            if let renewal,
               let extended = try renewalExtension(of: recorded, by: renewal, ledger: ledger, owner: owner, now: now, source: source) {
                return extended
            }
            return .duplicate(of: recorded.position)
        }
        guard let product = catalog.product(id: productID) else { throw .unknownProduct(productID, field: "productId") }
        if renewal != nil, product.type != .autoRenewable {
            throw LedgerError(kind: .rule, code: .notRenewable,
                              message: "Product '\(productID)' is \(product.type.rawValue); only auto-renewable products renew.",
                              field: "productId")
        }
        if product.type == .autoRenewable, requested.expiresDate == nil {
            throw .missingField("expiresDate", "an auto-renewable \(renewal == nil ? "purchase" : "renewal") needs the store's expiresDate")
        }
        let fact = withTerms(of: product, requested)
        try checkComputedInstants(of: fact, product: product, ledger: ledger, fieldPrefix: "")
        var decision = Decision()
        try claim(fact, product: product, event: renewal == nil ? .purchased(fact) : .renewed(fact), ledger: ledger,
                  owner: owner, now: now, source: source, field: "originalTransactionId", into: &decision)
        return decision
    }

    /// The fact with the catalog's terms of sale, and without what the
    /// product type does not have (an end, auto-renew).
    private func withTerms(of product: Product, _ requested: TransactionFact) -> TransactionFact {
        var fact = requested
        fact.productID = product.id
        fact.productType = product.type
        fact.group = product.group
        fact.duration = product.duration
        // Periods are a subscription's; other products have one sale per original.
        if product.type != .autoRenewable { fact.details.webOrderLineItemID = nil }
        if product.type != .autoRenewable {
            fact.expiresDate = nil
            fact.autoRenew = nil
        }
        return fact
    }

    /// Records `event` for a transaction, settling who owns its original
    /// transaction: nobody → claim it; another subscriber → transfer or 409.
    private func claim(_ fact: TransactionFact, product: Product, event: LedgerEvent, ledger: SubscriberLedger,
                       owner: (String) -> String?, now: Date, source: String, field: String,
                       into decision: inout Decision) throws(LedgerError) {
        guard product.type.isRestorable else {
            decision.events.append(event)
            return
        }
        try claim(fact.originalTransactionID, store: .appStore, environment: fact.environment, transaction: fact, event: event,
                  ledger: ledger, owner: owner, now: now, source: source, field: field, into: &decision)
    }

    /// Records `event` for a purchase of `store` (its original transaction
    /// id, or a Play purchase token), settling who owns it.
    func claim(_ original: String, store: Store, environment: Environment, transaction fact: TransactionFact?, event: LedgerEvent,
               ledger: SubscriberLedger, owner: (String) -> String?, now: Date, source: String, field: String,
               into decision: inout Decision) throws(LedgerError) {
        // Ownership is per store and environment: a Sandbox fact never
        // claims or moves a Production original, nor the reverse, and a
        // Play token never names an App Store purchase.
        let key = store.ownershipKey(original, environment: environment)
        let claimedHere = decision.claims.contains(key)
        let holdsHere = store == .appStore ? ledger.holds(originalTransactionID: original, environment: environment)
            : ledger.holds(playToken: original, environment: environment)
        let currentOwner = claimedHere ? ledger.subscriberID : owner(key) ?? (holdsHere ? ledger.subscriberID : nil)
        switch currentOwner {
        case ledger.subscriberID?:
            decision.events.append(event)
            // Held here but missing from the lookup: claim it again so the lookup heals.
            if !claimedHere, owner(key) == nil { decision.claims.append(key) }
        case nil:
            decision.events.append(event)
            decision.claims.append(key)
        case let other?:
            guard restorePolicy == .transfer else {
                throw LedgerError(kind: .conflict, code: .ownedByOtherSubscriber,
                                  message: "Original transaction '\(original)' belongs to another subscriber and the restore policy is keep-original.",
                                  field: field)
            }
            let transfer = TransferFact(originalTransactionID: original, fromSubscriberID: other, toSubscriberID: ledger.subscriberID,
                                        afterPosition: ledger.lastPosition, date: now, source: source,
                                        environment: environment == .production ? nil : environment,
                                        store: store == .appStore ? nil : store)
            var incoming = transfer
            incoming.transaction = fact
            decision.events.append(.transferredIn(incoming))
            // A Play purchase's state is its own event beside the transfer.
            if fact == nil { decision.events.append(event) }
            if let index = decision.transfers.firstIndex(where: { $0.fromSubscriberID == other }) {
                decision.transfers[index].events.append(.transferredOut(transfer))
            } else {
                decision.transfers.append(Decision.Transfer(fromSubscriberID: other, events: [.transferredOut(transfer)]))
            }
            decision.claims.append(key)
        }
    }

    /// A renewal of a recorded auto-renewable transaction with a later end is
    /// the store extending it (`RENEWAL_EXTENDED`); the same or an earlier end
    /// is a duplicate (nil), so a late copy never moves the end back.
    private func renewalExtension(of recorded: SubscriberLedger.TransactionRecord, by renewal: FactRequest.Renewal,
                           ledger: SubscriberLedger, owner: (String) -> String?, now: Date,
                           source: String) throws(LedgerError) -> Decision? {
        let transactionID = recorded.fact.transactionID
        guard let knownEnd = ledger.expiresDate(ofTransaction: transactionID), renewal.expiresDate > knownEnd else { return nil }
        let original = recorded.fact.originalTransactionID
        if let other = owner(recorded.fact.environment.ownershipKey(original)), other != ledger.subscriberID {
            throw ownedByOther(original, field: "originalTransactionId")
        }
        try checkComputedInstants(ofExtendedEnd: renewal.expiresDate, productID: recorded.fact.productID)
        let renewalExtension = RenewalExtension(
            transactionID: transactionID, originalTransactionID: original, productID: recorded.fact.productID,
            expiresDate: renewal.expiresDate, effectiveDate: renewal.effectiveDate ?? now, environment: renewal.environment,
            source: source)
        return Decision(events: [.renewalExtended(renewalExtension)])
    }

    /// A transaction id names one sale: the same id for another product is a conflict.
    private func checkSameProduct(_ recorded: SubscriberLedger.TransactionRecord, productID: String) throws(LedgerError) {
        guard recorded.fact.productID != productID else { return }
        throw LedgerError(kind: .conflict, code: .transactionConflict,
                          message: "Transaction '\(recorded.fact.transactionID)' is already recorded for product '\(recorded.fact.productID)', not '\(productID)'.",
                          field: "transactionId")
    }

    // MARK: - Restores

    func decide(_ request: RestoreRequest, ledger: SubscriberLedger, owner: (String) -> String?, now: Date,
                source: String, fieldPrefix: (Int) -> String) throws(LedgerError) -> Decision {
        var decision = Decision()
        if let deviceID = request.deviceID, !ledger.knows(deviceID: deviceID) {
            decision.events.append(.deviceSeen(DeviceSeen(deviceID: deviceID, date: now, source: source)))
        }
        var seenInRequest: Set<String> = []
        for (index, transaction) in request.transactions.enumerated() {
            let prefix = fieldPrefix(index)
            guard let product = catalog.product(id: transaction.productID) else {
                throw .unknownProduct(transaction.productID, field: prefix + "productId")
            }
            guard product.type.isRestorable else {
                throw LedgerError(kind: .rule, code: .notRestorable,
                                  message: "Product '\(product.id)' is consumable; consumables cannot be restored.",
                                  field: prefix + "productId")
            }
            if product.type == .autoRenewable, transaction.expiresDate == nil {
                throw .missingField(prefix + "expiresDate", "a restored auto-renewable needs the store's expiresDate")
            }
            let fact = withTerms(of: product, TransactionFact(
                transactionID: transaction.transactionID, originalTransactionID: transaction.originalTransactionID,
                productID: product.id, purchaseDate: transaction.purchaseDate, expiresDate: transaction.expiresDate,
                deviceID: request.deviceID, environment: transaction.environment, source: source, details: transaction.details))
            guard seenInRequest.insert(fact.transactionID).inserted else { continue }
            let key = fact.environment.ownershipKey(fact.originalTransactionID)
            let ownedElsewhere = !decision.claims.contains(key)
                && (owner(key).map { $0 != ledger.subscriberID } ?? false)
            if let recorded = ledger.transactions[fact.transactionID], recorded.fact.environment != fact.environment {
                throw otherEnvironment(fact.transactionID, recorded: recorded.fact.environment, field: prefix + "transactionId")
            }
            if let recorded = ledger.transactions[fact.transactionID], !ownedElsewhere {
                try checkSameProduct(recorded, productID: fact.productID)
                continue
            }
            try checkComputedInstants(of: fact, product: product, ledger: ledger, fieldPrefix: prefix)
            try claim(fact, product: product, event: .restored(fact), ledger: ledger, owner: owner, now: now, source: source,
                      field: prefix + "originalTransactionId", into: &decision)
        }
        return decision
    }
}
