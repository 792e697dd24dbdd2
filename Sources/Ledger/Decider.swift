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
    /// For a duplicate, the stream position of the fact's first copy (the
    /// last position of the stream for a restore, or when the first copy
    /// cannot be told), so a repeat answers as the first time did; nil when
    /// the decision is not a duplicate.
    public internal(set) var duplicatePosition: Int64?

    /// True when every fact was already recorded: nothing to append, answer
    /// as the first time (`"duplicate": true`, `duplicatePosition`).
    public var isDuplicate: Bool { events.isEmpty && transfers.isEmpty }

    init(events: [LedgerEvent] = []) {
        self.events = events
    }

    /// Nothing to append: the fact was first recorded at `position`.
    static func duplicate(of position: Int64?) -> Decision {
        var decision = Decision()
        decision.duplicatePosition = position
        return decision
    }

    /// Sets `duplicatePosition` exactly when the decision is a duplicate.
    func settled(lastPosition: Int64) -> Decision {
        var decision = self
        decision.duplicatePosition = isDuplicate ? duplicatePosition ?? lastPosition : nil
        return decision
    }
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

    /// Decides one fact. Every request is first checked against
    /// `InputLimits` (400 `invalid_field` / `date_in_future`), whoever built it.
    ///
    /// - Parameters:
    ///   - owner: the subscriber owning an original transaction id, from the
    ///     ownership lookup of the request's `referencedTransactionIDs`
    ///     (nil: nobody).
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
        try request.checkLimits(now: now)
        let decision: Decision
        switch request {
        case .purchase(let purchase):
            decision = try decideTransaction(purchase.fact(source: source), renewal: nil, ledger: ledger, owner: owner,
                                             now: now, source: source)
        case .renewal(let renewal):
            decision = try decideTransaction(renewal.fact(source: source), renewal: renewal, ledger: ledger, owner: owner,
                                             now: now, source: source)
        case .restore(let restore):
            let restored = try decide(RestoreRequest(deviceID: restore.deviceID, transactions: [restore.transaction]),
                                      ledger: ledger, owner: owner, now: now, source: source, fieldPrefix: { _ in "" })
            decision = restored.isDuplicate
                ? .duplicate(of: ledger.position(ofTransaction: restore.transaction.transactionID)) : restored
        case .refund(let refund):
            decision = try decide(refund, ledger: ledger, owner: owner, now: now, source: source)
        case .refundReversal(let reversal):
            decision = try decide(reversal, ledger: ledger, owner: owner, now: now, source: source)
        case .expiry(let expiry):
            decision = try decide(expiry, ledger: ledger, now: now, source: source)
        case .autoRenewChange(let change) where (change.effectiveDate == nil || change.isReportedState)
            && ledger.knowsAlready(change):
            // Undated (an API fact) its key would be new on every retry; a
            // state a renewal info reports is news only when it differs from
            // what the ledger knows (on, when nothing said otherwise) and is
            // not older than it.
            decision = .duplicate(of: ledger.currentAutoRenew(of: change.originalTransactionID, environment: change.environment)?.position)
        case .billingIssue(let issue):
            // Undated or reported, the same open issue again is a duplicate.
            if issue.effectiveDate == nil || issue.isReportedState,
               let open = ledger.openBillingIssue(of: issue.originalTransactionID),
               open.value.gracePeriodExpiresDate == issue.gracePeriodExpiresDate {
                decision = .duplicate(of: open.position)
            } else {
                decision = try decideSubscriptionChange(
                    originalTransactionID: issue.originalTransactionID, productID: issue.productID,
                    environment: issue.environment, ledger: ledger, owner: owner
                ) { productID in
                    .billingIssue(BillingIssue(originalTransactionID: issue.originalTransactionID, productID: productID,
                                               effectiveDate: issue.effectiveDate ?? now,
                                               gracePeriodExpiresDate: issue.gracePeriodExpiresDate,
                                               environment: issue.environment, source: source))
                }
            }
        case .autoRenewChange(let change):
            decision = try decideSubscriptionChange(
                originalTransactionID: change.originalTransactionID, productID: change.productID,
                environment: change.environment, ledger: ledger, owner: owner
            ) { productID in
                .autoRenewChanged(AutoRenewChange(originalTransactionID: change.originalTransactionID, productID: productID,
                                                  autoRenew: change.autoRenew, effectiveDate: change.effectiveDate ?? now,
                                                  environment: change.environment, source: source))
            }
        case .googlePlayPurchase(let purchase):
            decision = try decide(purchase, ledger: ledger, owner: owner, now: now, source: source)
        case .googlePlayVoid(let void):
            decision = try decide(void, ledger: ledger, owner: owner, now: now, source: source)
        }
        return decision.settled(lastPosition: ledger.lastPosition)
    }

    /// As `decide(_:subscriberID:history:...)` for a restore, from a ledger already folded.
    public func decide(_ request: RestoreRequest, ledger: SubscriberLedger, owner: (String) -> String?,
                       now: Date, source: String = FactSource.api) throws(LedgerError) -> Decision {
        try request.checkLimits(now: now)
        return try decide(request, ledger: ledger, owner: owner, now: now, source: source, fieldPrefix: { "transactions[\($0)]." })
            .settled(lastPosition: ledger.lastPosition)
    }

    func ownedByOther(_ original: String, field: String) -> LedgerError {
        LedgerError(kind: .conflict, code: .ownedByOtherSubscriber,
                    message: "Original transaction '\(original)' belongs to another subscriber; send the fact to its owner.", field: field)
    }

    /// A fact of one environment naming a transaction recorded in the other:
    /// Sandbox never touches Production, nor the reverse.
    func otherEnvironment(_ transactionID: String, recorded: Environment, field: String) -> LedgerError {
        LedgerError(kind: .conflict, code: .environmentConflict,
                    message: "Transaction '\(transactionID)' is recorded in \(recorded.rawValue); a fact from the other environment cannot change it.",
                    field: field)
    }
}

extension FactRequest.Purchase {
    /// The fact as requested, before the catalog's terms are added.
    func fact(source: String) -> TransactionFact {
        TransactionFact(transactionID: transactionID, originalTransactionID: originalTransactionID, productID: productID,
                        purchaseDate: purchaseDate, expiresDate: expiresDate, quantity: quantity, autoRenew: autoRenew,
                        deviceID: deviceID, environment: environment, source: source, details: details)
    }
}

extension FactRequest.Renewal {
    /// The fact as requested, before the catalog's terms are added.
    func fact(source: String) -> TransactionFact {
        TransactionFact(transactionID: transactionID, originalTransactionID: originalTransactionID, productID: productID,
                        purchaseDate: purchaseDate, expiresDate: expiresDate, quantity: quantity, autoRenew: autoRenew,
                        deviceID: deviceID, environment: environment, source: source, details: details)
    }
}
