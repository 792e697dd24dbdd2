import Foundation

/// What to do when a restore names an original transaction another
/// subscriber owns (`SUBLEDGER_RESTORE_POLICY`).
public enum RestorePolicy: String, Sendable, Hashable, CaseIterable {
    /// Move it: `transferred_out` on the owner, `transferred_in` here (default).
    case transfer
    /// Refuse with 409 `owned_by_other_subscriber`.
    case keepOriginal = "keep-original"
}

/// The events a request produces, to be appended atomically.
public struct Decision: Sendable, Equatable {
    /// Events another subscriber's stream receives in the same transaction.
    public struct Transfer: Sendable, Equatable {
        public var fromSubscriberID: String
        public var events: [LedgerEvent]
    }

    /// Events for the requesting subscriber's stream, in order.
    public var events: [LedgerEvent] = []
    /// Events for the previous owners' streams (`transferred_out`).
    public var transfers: [Transfer] = []
    /// Original transaction ids this subscriber owns from now on.
    public var claims: [String] = []
    /// True when every fact was already recorded: nothing to append, answer
    /// as the first time (`"duplicate": true`).
    public var isDuplicate: Bool { events.isEmpty && transfers.isEmpty }
}

/// Decides which events a request produces, from the subscriber's history:
/// a pure function of its inputs, so replays decide the same.
public struct Decider: Sendable {
    public var catalog: Catalog
    public var restorePolicy: RestorePolicy

    public init(catalog: Catalog, restorePolicy: RestorePolicy = .transfer) {
        self.catalog = catalog
        self.restorePolicy = restorePolicy
    }

    /// Decides one fact.
    ///
    /// - Parameters:
    ///   - owner: the subscriber owning an original transaction id, from the
    ///     ownership lookup (nil: nobody).
    ///   - now: the decision time (transfers, restored devices, default
    ///     revocation and change dates).
    ///   - source: stored in the events (`api`, `import`, `appstore`).
    public func decide(_ request: FactRequest, subscriberID: String, history: [RecordedLedgerEvent],
                       owner: (String) -> String?, now: Date, source: String = FactSource.api) throws(LedgerError) -> Decision {
        let ledger = SubscriberLedger(subscriberID: subscriberID, events: history)
        return try decide(request, ledger: ledger, owner: owner, now: now, source: source)
    }

    /// Decides a restore: every restorable transaction becomes available to
    /// the subscriber, and the device is added.
    public func decide(_ request: RestoreRequest, subscriberID: String, history: [RecordedLedgerEvent],
                       owner: (String) -> String?, now: Date, source: String = FactSource.api) throws(LedgerError) -> Decision {
        let ledger = SubscriberLedger(subscriberID: subscriberID, events: history)
        return try decide(request, ledger: ledger, owner: owner, now: now, source: source)
    }

    /// As `decide(_:subscriberID:history:...)`, from a ledger already folded.
    public func decide(_ request: FactRequest, ledger: SubscriberLedger, owner: (String) -> String?,
                       now: Date, source: String = FactSource.api) throws(LedgerError) -> Decision {
        switch request.type {
        case .purchase, .renewal:
            return try decideTransaction(request, ledger: ledger, owner: owner, now: now, source: source)
        case .restore:
            let restore = RestoreRequest(deviceId: request.deviceId, transactions: [
                RestoreRequest.Transaction(transactionId: request.transactionId!, originalTransactionId: request.originalTransactionId,
                                           productId: request.productId!, purchaseDate: request.purchaseDate!,
                                           expiresDate: request.expiresDate, environment: request.environment),
            ])
            return try decide(restore, ledger: ledger, owner: owner, now: now, source: source, fieldPrefix: { _ in "" })
        case .refund:
            return try decideRefund(request, ledger: ledger, owner: owner, now: now, source: source)
        case .refundReversal:
            return try decideRefundReversal(request, ledger: ledger, owner: owner, now: now, source: source)
        case .expiry:
            return try decideExpiry(request, ledger: ledger, now: now, source: source)
        case .autoRenewChange, .billingIssue:
            return try decideSubscriptionChange(request, ledger: ledger, owner: owner, now: now, source: source)
        }
    }

    /// As `decide(_:subscriberID:history:...)` for a restore, from a ledger already folded.
    public func decide(_ request: RestoreRequest, ledger: SubscriberLedger, owner: (String) -> String?,
                       now: Date, source: String = FactSource.api) throws(LedgerError) -> Decision {
        try decide(request, ledger: ledger, owner: owner, now: now, source: source, fieldPrefix: { "transactions[\($0)]." })
    }

    // MARK: - Purchases and renewals

    private func decideTransaction(_ request: FactRequest, ledger: SubscriberLedger, owner: (String) -> String?,
                                   now: Date, source: String) throws(LedgerError) -> Decision {
        let transactionID = request.transactionId!
        let productID = request.productId!
        if ledger.knows(transactionID: transactionID) {
            let duplicate = try duplicateOrConflict(transactionID: transactionID, productID: productID, ledger: ledger)
            return try extensionOf(request, ledger: ledger, owner: owner, now: now, source: source) ?? duplicate
        }
        guard let product = catalog.product(id: productID) else { throw .unknownProduct(productID, field: "productId") }
        if request.type == .renewal, product.type != .autoRenewable {
            throw LedgerError(kind: .rule, code: "not_renewable",
                              message: "Product '\(productID)' is \(product.type.rawValue); only auto-renewable products renew.",
                              field: "productId")
        }
        if product.type == .autoRenewable, request.expiresDate == nil {
            throw .missingField("expiresDate", "an auto-renewable \(request.type.rawValue) needs the store's expiresDate")
        }
        let fact = TransactionFact(
            transactionId: transactionID, originalTransactionId: request.originalTransactionId ?? transactionID,
            productId: productID, productType: product.type, group: product.group, duration: product.duration,
            purchaseDate: request.purchaseDate!, expiresDate: product.type == .autoRenewable ? request.expiresDate : nil,
            quantity: request.quantity ?? 1,
            autoRenew: product.type == .autoRenewable ? request.autoRenew : nil,
            deviceId: request.deviceId, environment: request.environment, source: source)
        var decision = Decision()
        let event: LedgerEvent = request.type == .renewal ? .renewed(fact) : .purchased(fact)
        try claim(fact, product: product, event: event, ledger: ledger, owner: owner, now: now, source: source,
                  field: "originalTransactionId", into: &decision)
        return decision
    }

    /// Records `event` for a transaction, settling who owns its original
    /// transaction: nobody → claim it; another subscriber → transfer or 409.
    private func claim(_ fact: TransactionFact, product: Product, event: LedgerEvent, ledger: SubscriberLedger,
                       owner: (String) -> String?, now: Date, source: String, field: String,
                       into decision: inout Decision) throws(LedgerError) {
        let original = fact.originalTransactionId
        guard product.type.isRestorable else {
            decision.events.append(event)
            return
        }
        let claimedHere = decision.claims.contains(original)
        let currentOwner = claimedHere ? ledger.subscriberID
            : owner(original) ?? (ledger.holds(originalTransactionID: original) ? ledger.subscriberID : nil)
        switch currentOwner {
        case ledger.subscriberID?:
            decision.events.append(event)
            // Held here but missing from the lookup: claim it again so the lookup heals.
            if !claimedHere, owner(original) == nil { decision.claims.append(original) }
        case nil:
            decision.events.append(event)
            decision.claims.append(original)
        case let other?:
            guard restorePolicy == .transfer else {
                throw LedgerError(kind: .conflict, code: "owned_by_other_subscriber",
                                  message: "Original transaction '\(original)' belongs to another subscriber and the restore policy is keep-original.",
                                  field: field)
            }
            let transfer = TransferFact(originalTransactionId: original, fromSubscriberId: other, toSubscriberId: ledger.subscriberID,
                                    afterPosition: ledger.lastPosition, date: now, source: source)
            var incoming = transfer
            incoming.transaction = fact
            decision.events.append(.transferredIn(incoming))
            if let index = decision.transfers.firstIndex(where: { $0.fromSubscriberID == other }) {
                decision.transfers[index].events.append(.transferredOut(transfer))
            } else {
                decision.transfers.append(Decision.Transfer(fromSubscriberID: other, events: [.transferredOut(transfer)]))
            }
            decision.claims.append(original)
        }
    }

    /// A renewal of a recorded auto-renewable transaction with a later end is
    /// the store extending it (`RENEWAL_EXTENDED`); the same or an earlier end
    /// is a duplicate, so a late copy never moves the end back.
    private func extensionOf(_ request: FactRequest, ledger: SubscriberLedger, owner: (String) -> String?,
                             now: Date, source: String) throws(LedgerError) -> Decision? {
        guard request.type == .renewal, let transactionID = request.transactionId, let newEnd = request.expiresDate,
              let recorded = ledger.transactions[transactionID],
              let knownEnd = ledger.expiresDate(ofTransaction: transactionID), newEnd > knownEnd
        else { return nil }
        let original = recorded.fact.originalTransactionId
        if let other = owner(original), other != ledger.subscriberID {
            throw ownedByOther(original, field: "originalTransactionId")
        }
        let renewalExtension = RenewalExtension(
            transactionId: transactionID, originalTransactionId: original, productId: recorded.fact.productId,
            expiresDate: newEnd, effectiveDate: request.effectiveDate ?? now, environment: request.environment, source: source)
        return Decision(events: [.renewalExtended(renewalExtension)])
    }

    private func duplicateOrConflict(transactionID: String, productID: String, ledger: SubscriberLedger) throws(LedgerError) -> Decision {
        if let recorded = ledger.transactions[transactionID], recorded.fact.productId != productID {
            throw LedgerError(kind: .conflict, code: "transaction_conflict",
                              message: "Transaction '\(transactionID)' is already recorded for product '\(recorded.fact.productId)', not '\(productID)'.",
                              field: "transactionId")
        }
        return Decision()
    }

    // MARK: - Restores

    private func decide(_ request: RestoreRequest, ledger: SubscriberLedger, owner: (String) -> String?, now: Date,
                        source: String, fieldPrefix: (Int) -> String) throws(LedgerError) -> Decision {
        var decision = Decision()
        if let deviceID = request.deviceId, !ledger.knows(deviceID: deviceID) {
            decision.events.append(.deviceSeen(DeviceSeen(deviceId: deviceID, date: now, source: source)))
        }
        var seenInRequest: Set<String> = []
        for (index, transaction) in request.transactions.enumerated() {
            let prefix = fieldPrefix(index)
            guard let product = catalog.product(id: transaction.productId) else {
                throw .unknownProduct(transaction.productId, field: prefix + "productId")
            }
            guard product.type.isRestorable else {
                throw LedgerError(kind: .rule, code: "not_restorable",
                                  message: "Product '\(product.id)' is consumable; consumables cannot be restored.",
                                  field: prefix + "productId")
            }
            if product.type == .autoRenewable, transaction.expiresDate == nil {
                throw .missingField(prefix + "expiresDate", "a restored auto-renewable needs the store's expiresDate")
            }
            let fact = TransactionFact(
                transactionId: transaction.transactionId, originalTransactionId: transaction.originalTransactionId,
                productId: product.id, productType: product.type, group: product.group, duration: product.duration,
                purchaseDate: transaction.purchaseDate,
                expiresDate: product.type == .autoRenewable ? transaction.expiresDate : nil,
                deviceId: request.deviceId, environment: transaction.environment, source: source)
            guard seenInRequest.insert(fact.transactionId).inserted else { continue }
            let original = fact.originalTransactionId
            let ownedElsewhere = !decision.claims.contains(original)
                && (owner(original).map { $0 != ledger.subscriberID } ?? false)
            if ledger.knows(transactionID: fact.transactionId), !ownedElsewhere {
                _ = try duplicateOrConflict(transactionID: fact.transactionId, productID: fact.productId, ledger: ledger)
                continue
            }
            try claim(fact, product: product, event: .restored(fact), ledger: ledger, owner: owner, now: now, source: source,
                      field: prefix + "originalTransactionId", into: &decision)
        }
        return decision
    }

    // MARK: - Refunds, expiries, subscription changes

    private func decideRefund(_ request: FactRequest, ledger: SubscriberLedger, owner: (String) -> String?,
                              now: Date, source: String) throws(LedgerError) -> Decision {
        let transactionID = request.transactionId!
        if ledger.keys.contains("refund:" + transactionID) { return Decision() }
        let recorded = try heldTransaction(transactionID, request: request, ledger: ledger, owner: owner)
        let original = recorded.fact.originalTransactionId
        let refund = RefundFact(transactionId: transactionID, originalTransactionId: original, productId: recorded.fact.productId,
                                revocationDate: request.revocationDate ?? now, reason: request.reason,
                                environment: request.environment, source: source)
        return Decision(events: [.refunded(refund)])
    }

    /// The subscriber's record of a transaction a refund or its reversal names:
    /// 404 when it is not recorded here, 409 when another subscriber holds it.
    private func heldTransaction(_ transactionID: String, request: FactRequest, ledger: SubscriberLedger,
                                 owner: (String) -> String?) throws(LedgerError) -> SubscriberLedger.TransactionRecord {
        guard let recorded = ledger.transactions[transactionID] else {
            if let original = request.originalTransactionId, let other = owner(original), other != ledger.subscriberID {
                throw ownedByOther(original, field: "transactionId")
            }
            throw LedgerError(kind: .notFound, code: "transaction_not_found",
                              message: "Transaction '\(transactionID)' is not recorded for this subscriber.", field: "transactionId")
        }
        if let other = owner(recorded.fact.originalTransactionId), other != ledger.subscriberID {
            throw ownedByOther(recorded.fact.originalTransactionId, field: "transactionId")
        }
        return recorded
    }

    /// Undoes a refund (`REFUND_REVERSED`). Recorded even before the refund
    /// arrives: the fold compares dates, so delivery order does not matter.
    private func decideRefundReversal(_ request: FactRequest, ledger: SubscriberLedger, owner: (String) -> String?,
                                      now: Date, source: String) throws(LedgerError) -> Decision {
        let transactionID = request.transactionId!
        if ledger.keys.contains("refund-reversed:" + transactionID) { return Decision() }
        let recorded = try heldTransaction(transactionID, request: request, ledger: ledger, owner: owner)
        let original = recorded.fact.originalTransactionId
        let reversal = RefundReversal(transactionId: transactionID, originalTransactionId: original,
                                      productId: recorded.fact.productId, date: request.effectiveDate ?? now,
                                      reason: request.reason, environment: request.environment, source: source)
        return Decision(events: [.refundReversed(reversal)])
    }

    private func ownedByOther(_ original: String, field: String) -> LedgerError {
        LedgerError(kind: .conflict, code: "owned_by_other_subscriber",
                    message: "Original transaction '\(original)' belongs to another subscriber; send the fact to its owner.", field: field)
    }

    private func decideExpiry(_ request: FactRequest, ledger: SubscriberLedger, now: Date, source: String) throws(LedgerError) -> Decision {
        let expiry: ExpiryFact
        if let original = request.originalTransactionId {
            let chain = ledger.transactions.values.filter { $0.fact.originalTransactionId == original }
            guard let latest = chain.max(by: { ($0.fact.purchaseDate, $0.position) < ($1.fact.purchaseDate, $1.position) }) else {
                throw LedgerError(kind: .notFound, code: "transaction_not_found",
                                  message: "Original transaction '\(original)' is not recorded for this subscriber.",
                                  field: "originalTransactionId")
            }
            let group = latest.fact.group ?? catalog.product(id: latest.fact.productId)?.group ?? latest.fact.productId
            // Without an end from the caller, the end is what the ledger knows, so a replay gets the same key.
            let knownEnd = latest.fact.expiresDate
                ?? Evaluation(ledger: ledger, catalog: catalog, at: now).nonRenewingGroups.first { $0.group == group }?.periods.last?.end
            expiry = ExpiryFact(originalTransactionId: original, group: group, productId: latest.fact.productId,
                                expiresDate: request.expiresDate ?? knownEnd ?? now, reason: request.reason,
                                environment: request.environment, source: source)
            let event = LedgerEvent.expired(expiry)
            if let key = event.idempotencyKey, ledger.keys.contains(key) { return Decision() }
            return Decision(events: [event])
        }
        let productID = request.productId!
        guard let product = catalog.product(id: productID) else { throw .unknownProduct(productID, field: "productId") }
        guard let end = request.expiresDate else {
            throw .missingField("expiresDate", "an expiry by productId needs the coverage end it reports")
        }
        expiry = ExpiryFact(originalTransactionId: nil, group: product.group, productId: productID, expiresDate: end,
                            reason: request.reason, environment: request.environment, source: source)
        let event = LedgerEvent.expired(expiry)
        if let key = event.idempotencyKey, ledger.keys.contains(key) { return Decision() }
        return Decision(events: [event])
    }

    private func decideSubscriptionChange(_ request: FactRequest, ledger: SubscriberLedger, owner: (String) -> String?,
                                          now: Date, source: String) throws(LedgerError) -> Decision {
        let original = request.originalTransactionId!
        if let other = owner(original), other != ledger.subscriberID {
            throw ownedByOther(original, field: "originalTransactionId")
        }
        guard ledger.knows(originalTransactionID: original) else {
            throw LedgerError(kind: .notFound, code: "transaction_not_found",
                              message: "Original transaction '\(original)' is not recorded for this subscriber.",
                              field: "originalTransactionId")
        }
        let productID = request.productId ?? ledger.transactions.values
            .filter { $0.fact.originalTransactionId == original }
            .max { ($0.fact.purchaseDate, $0.position) < ($1.fact.purchaseDate, $1.position) }?.fact.productId
        let event: LedgerEvent
        if request.type == .autoRenewChange {
            event = .autoRenewChanged(AutoRenewChange(originalTransactionId: original, productId: productID,
                                                      autoRenew: request.autoRenew!, effectiveDate: request.effectiveDate ?? now,
                                                      environment: request.environment, source: source))
        } else {
            event = .billingIssue(BillingIssue(originalTransactionId: original, productId: productID,
                                               effectiveDate: request.effectiveDate ?? now,
                                               gracePeriodExpiresDate: request.gracePeriodExpiresDate,
                                               environment: request.environment, source: source))
        }
        if let key = event.idempotencyKey, ledger.keys.contains(key) { return Decision() }
        return Decision(events: [event])
    }
}
