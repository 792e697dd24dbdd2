import Foundation
import JSON

/// The rules applied to a ledger at one instant; `SubscriberState`, coverage,
/// reminders and explanations are all read from it.
struct Evaluation {
    struct Transaction {
        var fact: TransactionFact
        var position: Int64
        var type: ProductType
        var group: String
        var duration: ISODuration?
        /// Set when a refund took effect at or before the instant.
        var refund: SubscriberLedger.Dated<RefundFact>?
        var revokedAt: Date? { refund?.date }
    }

    struct Period: Equatable {
        var group: String
        var productID: String
        var transactionID: String
        var originalTransactionID: String
        var start: Date
        var end: Date
        var position: Int64
    }

    struct AutoRenewable {
        var latest: Transaction
        var group: String
        var status: SubscriptionStatus
        /// The store's end, cut short by a reported expiry.
        var end: Date
        var graceEnd: Date?
        var autoRenew: Bool
        var expiredByStore: Dated?
        /// The events behind it, in no order and possibly repeated (`explain`
        /// sorts them; sorting thousands on every read was a cost of its own).
        var positions: [Int64]
        /// A Google Play subscription's reason, in words, for `explain`.
        var playReason: String? = nil
        /// A Google Play subscription's state that speaks for the instant.
        var playState: GooglePlayPurchase.State? = nil
    }

    struct Dated { var date: Date; var position: Int64 }

    struct NonRenewingGroup {
        var group: String
        var periods: [Period]
        var refunded: [Transaction]
        var covering: Period?
        /// End of the contiguous run of periods covering the instant.
        var coveredUntil: Date?
    }

    /// One way an entitlement was given, active or not at the instant.
    struct Grant {
        var entitlement: String
        var productID: String
        var source: String
        var active: Bool
        /// nil: never ends.
        var end: Date?
        var reason: String
        /// The events behind it, in no order and possibly repeated.
        var positions: [Int64]
        /// The store that sold what gives it; nil for a support grant.
        var store: Store? = .appStore
    }

    let at: Date
    /// The store environment evaluated: a sandbox purchase never grants production.
    let environment: Environment
    var transactions: [Transaction] = []
    var autoRenewables: [AutoRenewable] = []
    var nonRenewingGroups: [NonRenewingGroup] = []
    var grants: [Grant] = []

    /// - Parameter environment: only that environment's transactions (and
    ///   what follows from them); nil: every environment (the read models'
    ///   checks over a whole ledger).
    /// - Parameter includingGrants: whether to work out `grants`, whose
    ///   reasons are long formatted strings; the read models, coverage ends,
    ///   due expiries and validity read none of them (an eighth of the
    ///   reminders' rebuild went into working them out).
    init(ledger: SubscriberLedger, catalog: Catalog, at: Date, environment: Environment? = .production,
         includingGrants: Bool = true) {
        self.at = at
        self.environment = environment ?? .production
        // An auto-renewable chain is judged by its latest transaction: the
        // others only lend their positions and auto-renew flags, so only the
        // latest is made a full `Transaction` (a long-renewed subscription has
        // thousands, and building each dominated a read of its state).
        // Walked chain by chain (`byOriginal`): ownership is looked up once
        // per original, and a product's type once per run of transactions of
        // the same product, not once per transaction.
        var chains: [String: [ChainLink]] = [:]
        var known: (productID: String, type: ProductType?)?
        for (original, records) in ledger.byOriginal.records {
            var owns: Bool?
            var chain: [ChainLink] = []
            for record in records where environment == nil || record.fact.environment == environment {
                var type = record.fact.productType
                if type == nil {
                    let productID = record.fact.productID
                    if known?.productID != productID { known = (productID, catalog.product(id: productID)?.type) }
                    type = known?.type
                }
                if type == .autoRenewable {
                    guard record.visibleFrom <= at else { continue }
                    if owns == nil { owns = ledger.owns(original, environment: record.fact.environment, at: at) }
                    if owns == true {
                        chain.append(ChainLink(transactionID: record.fact.transactionID, purchaseDate: record.fact.purchaseDate,
                                               position: record.position, autoRenew: record.fact.autoRenew))
                    }
                } else if let transaction = Self.transaction(record, ledger: ledger, catalog: catalog, at: at) {
                    transactions.append(transaction)
                }
            }
            if !chain.isEmpty { chains[original] = chain }
        }
        var latestOfChains: [Transaction] = []
        for chain in chains.values {
            // Last in `purchaseOrder`.
            let latest = chain.max {
                ($0.purchaseDate, $0.position, $0.transactionID) < ($1.purchaseDate, $1.position, $1.transactionID)
            }!
            if let record = ledger.transactions[latest.transactionID],
               let transaction = Self.transaction(record, ledger: ledger, catalog: catalog, at: at) {
                latestOfChains.append(transaction)
            }
        }
        let playSubscriptions = evaluateGooglePlay(ledger: ledger, catalog: catalog, environment: environment)
        transactions = Self.sortedInPurchaseOrder(transactions + latestOfChains)
        evaluateAutoRenewables(ledger: ledger, chains: chains)
        if !playSubscriptions.isEmpty {
            autoRenewables += playSubscriptions
            autoRenewables.sort { ($0.group, $0.latest.fact.originalTransactionID) < ($1.group, $1.latest.fact.originalTransactionID) }
        }
        evaluateNonRenewing()
        if includingGrants {
            evaluateGrants(catalog: catalog)
            evaluateSupportGrants(ledger: ledger)
        }
    }

    /// Purchase date, then position, then id: the order periods stack in and
    /// the last of a chain is its latest transaction.
    static func purchaseOrder(_ left: Transaction, _ right: Transaction) -> Bool {
        (left.fact.purchaseDate, left.position, left.fact.transactionID) < (right.fact.purchaseDate, right.position, right.fact.transactionID)
    }

    /// `transactions` in `purchaseOrder`. Sorts indices and moves each
    /// transaction once: a transaction is a large value, and sorting them in
    /// place dominated evaluating a long history.
    static func sortedInPurchaseOrder(_ transactions: [Transaction]) -> [Transaction] {
        let order = transactions.indices.sorted { purchaseOrder(transactions[$0], transactions[$1]) }
        return order.map { transactions[$0] }
    }

    /// A recorded transaction as the rules see it at `at`: nil when it is not
    /// visible yet, its original is held by someone else, or its type is unknown.
    static func transaction(_ record: SubscriberLedger.TransactionRecord, ledger: SubscriberLedger, catalog: Catalog,
                            at: Date) -> Transaction? {
        guard record.visibleFrom <= at,
              ledger.owns(record.fact.originalTransactionID, environment: record.fact.environment, at: at) else { return nil }
        let fact = record.fact
        // Only non-renewing transactions use a duration (`stack`).
        let product = catalogProduct(of: fact, catalog: catalog, readingDuration: fact.productType == .nonRenewing)
        guard let type = fact.productType ?? product?.type else { return nil }
        let refund = ledger.refundInEffect(for: fact, isSubscription: type == .autoRenewable, at: at)
        var extended = fact
        if type == .autoRenewable { extended.expiresDate = ledger.expiresDate(ofTransaction: fact.transactionID, at: at) }
        return Transaction(fact: extended, position: record.position, type: type,
                           group: fact.group ?? product?.group ?? fact.productID,
                           duration: fact.duration ?? product?.duration, refund: refund)
    }

    /// The catalog's product of a fact, asked for only when the fact lacks a
    /// term the caller reads: a stored fact carries its type and group, and
    /// a non-renewing one its duration (a copy of the product per
    /// transaction was a cost of every fold).
    static func catalogProduct(of fact: TransactionFact, catalog: Catalog, readingDuration: Bool) -> Product? {
        let lacksTerms = fact.productType == nil || fact.group == nil || (readingDuration && fact.duration == nil)
        return lacksTerms ? catalog.product(id: fact.productID) : nil
    }

    /// What a chain's other transactions lend to its latest one.
    struct ChainLink {
        var transactionID: String
        var purchaseDate: Date
        var position: Int64
        var autoRenew: Bool?
    }

    /// - Parameter chains: each original's visible, owned transactions;
    ///   `transactions` holds the latest of each.
    private mutating func evaluateAutoRenewables(ledger: SubscriberLedger, chains: [String: [ChainLink]]) {
        for latest in transactions where latest.type == .autoRenewable {
            let original = latest.fact.originalTransactionID
            let chain = chains[original] ?? []
            let terms = Self.autoRenewableTerms(latest: latest, ledger: ledger, at: at)
            var positions = chain.map(\.position) + terms.positions
            // The latest auto-renew signal: a change reported by the store, or
            // the flag a transaction of the chain carried when it was bought.
            let autoRenewSignal = ledger.autoRenewSignal(
                of: original, at: at, flags: chain.lazy.map { (date: $0.purchaseDate, position: $0.position, value: $0.autoRenew) })
            if let signal = autoRenewSignal { positions.append(signal.position) }
            autoRenewables.append(AutoRenewable(
                latest: latest, group: latest.group, status: terms.status, end: terms.end, graceEnd: terms.graceEnd,
                autoRenew: autoRenewSignal?.value ?? true, expiredByStore: terms.expiredByStore,
                positions: positions))
        }
        autoRenewables.sort { ($0.group, $0.latest.fact.originalTransactionID) < ($1.group, $1.latest.fact.originalTransactionID) }
    }

    /// Periods stack in purchase order: start = max(purchase date, previous
    /// end); refunded purchases have no period.
    private mutating func evaluateNonRenewing() {
        let byGroup = Dictionary(grouping: transactions.filter { $0.type == .nonRenewing }, by: \.group)
        for group in byGroup.keys.sorted() {
            let (periods, refunded) = Self.stack(byGroup[group]!, group: group)
            var covering: Period?
            var coveredUntil: Date?
            if let index = periods.firstIndex(where: { $0.start <= at && at < $0.end }) {
                covering = periods[index]
                var end = periods[index].end
                for period in periods[(index + 1)...] where period.start == end { end = period.end }
                coveredUntil = end
            }
            nonRenewingGroups.append(NonRenewingGroup(group: group, periods: periods, refunded: refunded,
                                                      covering: covering, coveredUntil: coveredUntil))
        }
    }

    /// The periods of one group's transactions (in purchase order), and the
    /// refunded ones, which have none.
    static func stack(_ transactions: [Transaction], group: String) -> (periods: [Period], refunded: [Transaction]) {
        var periods: [Period] = []
        var refunded: [Transaction] = []
        for transaction in transactions {
            guard transaction.refund == nil else {
                refunded.append(transaction)
                continue
            }
            guard let duration = transaction.duration else { continue }
            let start = max(transaction.fact.purchaseDate, periods.last?.end ?? transaction.fact.purchaseDate)
            periods.append(Period(group: group, productID: transaction.fact.productID,
                                  transactionID: transaction.fact.transactionID,
                                  originalTransactionID: transaction.fact.originalTransactionID,
                                  start: start, end: duration.added(to: start), position: transaction.position))
        }
        return (periods, refunded)
    }

    private mutating func evaluateGrants(catalog: Catalog) {
        func entitlements(_ productID: String) -> [String] {
            catalog.product(id: productID)?.entitlements ?? []
        }
        for transaction in transactions where transaction.type == .nonConsumable || transaction.type == .free {
            let fact = transaction.fact
            for entitlement in entitlements(fact.productID) {
                if let refund = transaction.refund {
                    grants.append(Grant(entitlement: entitlement, productID: fact.productID, source: fact.transactionID,
                                        active: false, end: refund.date,
                                        reason: "\(transaction.type.rawValue) \(fact.productID) (transaction \(fact.transactionID)) was refunded at \(RFC3339.format(refund.date))"
                                            + Self.storeNote(fact, refund: refund.value),
                                        positions: [transaction.position, refund.position], store: fact.store))
                } else {
                    grants.append(Grant(entitlement: entitlement, productID: fact.productID, source: fact.transactionID,
                                        active: true, end: nil,
                                        reason: "\(transaction.type.rawValue) \(fact.productID) was purchased at \(RFC3339.format(fact.purchaseDate)) (transaction \(fact.transactionID)) and never expires"
                                            + Self.storeNote(fact, refund: nil),
                                        positions: [transaction.position], store: fact.store))
                }
            }
        }
        for subscription in autoRenewables {
            let fact = subscription.latest.fact
            let grant = Self.grant(of: subscription)
            let note = Self.storeNote(fact, refund: subscription.latest.refund?.value)
            for entitlement in entitlements(fact.productID) {
                grants.append(Grant(entitlement: entitlement, productID: fact.productID, source: fact.transactionID,
                                    active: grant.active, end: grant.end, reason: grant.reason + note, positions: subscription.positions,
                                    store: fact.store))
            }
        }
        for group in nonRenewingGroups {
            let positions = (group.periods.map(\.position) + group.refunded.flatMap { [$0.position, $0.refund!.position] }).sorted()
            let refundNote = group.refunded.isEmpty ? "" :
                "; refunded and without a period: " + group.refunded.map { "transaction \($0.fact.transactionID) at \(RFC3339.format($0.refund!.date))" }.joined(separator: ", ")
            if let covering = group.covering, let until = group.coveredUntil {
                let why = "non-renewing \(covering.productID) (transaction \(covering.transactionID)) covers \(RFC3339.format(covering.start)) to \(RFC3339.format(covering.end)); group '\(group.group)' is covered until \(RFC3339.format(until)) by \(group.periods.count) stacked period(s)" + refundNote
                for entitlement in entitlements(covering.productID) {
                    grants.append(Grant(entitlement: entitlement, productID: covering.productID, source: covering.transactionID,
                                        active: true, end: until, reason: why, positions: positions))
                }
            } else if let last = group.periods.last {
                let why = "non-renewing group '\(group.group)' coverage ended at \(RFC3339.format(last.end)) (last period: \(last.productID), transaction \(last.transactionID))" + refundNote
                for entitlement in entitlements(last.productID) {
                    grants.append(Grant(entitlement: entitlement, productID: last.productID, source: last.transactionID,
                                        active: false, end: last.end, reason: why, positions: positions))
                }
            } else if let refunded = group.refunded.last {
                let why = "non-renewing group '\(group.group)' has no period left" + refundNote
                for entitlement in entitlements(refunded.fact.productID) {
                    grants.append(Grant(entitlement: entitlement, productID: refunded.fact.productID, source: refunded.fact.transactionID,
                                        active: false, end: refunded.revokedAt, reason: why, positions: positions))
                }
            }
        }
    }

    /// Entitlements given by hand: active from the grant's start until its
    /// end, or until its revocation once that is in effect. They belong to
    /// Production: a Sandbox view shows only what the sandbox store gave.
    private mutating func evaluateSupportGrants(ledger: SubscriberLedger) {
        guard environment == .production, !ledger.supportGrants.isEmpty else { return }
        for dated in ledger.supportGrants.values where dated.value.startsAt <= at {
            let grant = dated.value
            var positions = [dated.position]
            var end = grant.endsAt
            let granted = "granted by \(grant.grantedBy.description) at \(RFC3339.format(grant.startsAt))"
                + " until \(RFC3339.format(grant.endsAt)) (grant \(grant.grantID)), reason: \(grant.reason)"
            let why: String
            if let revoked = ledger.grantRevocations[grant.grantID], revoked.date <= at {
                positions.append(revoked.position)
                end = min(end, revoked.date)
                why = granted + "; revoked at \(RFC3339.format(revoked.date)) by \(revoked.value.revokedBy.description)"
                    + (revoked.value.reason.map { ", reason: \($0)" } ?? "")
            } else if at < grant.endsAt {
                why = granted
            } else {
                why = granted + "; it ended at \(RFC3339.format(grant.endsAt))"
            }
            grants.append(Grant(entitlement: grant.entitlement, productID: "", source: grant.entitlementSource,
                                active: at < end, end: end, reason: "support grant " + why, positions: positions, store: nil))
        }
    }

    /// The grant that speaks for each entitlement: an active one that never
    /// ends, else the active one lasting longest, else the latest to end.
    var entitlementGrants: [(id: String, chosen: Grant, all: [Grant])] {
        let byEntitlement = Dictionary(grouping: grants, by: \.entitlement)
        return byEntitlement.keys.sorted().map { id in
            let all = byEntitlement[id]!.sorted { ($0.productID, $0.source) < ($1.productID, $1.source) }
            func rank(_ grant: Grant) -> (Int, Date) {
                (grant.active ? 1 : 0, grant.end ?? .distantFuture)
            }
            let chosen = all.max { rank($0) < rank($1) }!
            return (id, chosen, all)
        }
    }
}
