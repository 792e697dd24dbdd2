import Foundation

/// The facts of one subscriber, accumulated from their events in stream
/// order. Cheap to keep live (`apply` each appended event) and to evaluate
/// at any instant (`state(at:catalog:)`): folding everything at once and
/// applying events one by one give the same ledger.
///
/// Applying an event whose idempotency key was already applied changes
/// nothing, so a replayed fact can never count twice.
///
/// Stored as a snapshot beside the stream (`snapshotData()`), so a reader
/// decodes one row and applies the tail of the stream instead of the whole
/// history.
public struct SubscriberLedger: Sendable, Equatable {
    /// A recorded transaction. Immutable and held by reference: a long
    /// history has thousands, and evaluating it walks them all, so copying
    /// one (out of the dictionary, into a list) is one retain instead of one
    /// per string of the fact.
    struct TransactionRecord: Sendable, Equatable {
        private final class Storage: Sendable {
            let fact: TransactionFact
            let position: Int64
            let visibleFrom: Date

            init(fact: __owned TransactionFact, position: Int64, visibleFrom: Date) {
                self.fact = fact
                self.position = position
                self.visibleFrom = visibleFrom
            }
        }

        private let storage: Storage
        /// Lent, not copied: reading a field of the fact costs no retain of
        /// the others (a getter returned a copy of the whole fact).
        var fact: TransactionFact {
            _read { yield storage.fact }
        }
        var position: Int64 { storage.position }
        /// Purchase date, or the transfer date for a transferred-in transaction.
        var visibleFrom: Date { storage.visibleFrom }

        init(fact: __owned TransactionFact, position: Int64, visibleFrom: Date) {
            storage = Storage(fact: fact, position: position, visibleFrom: visibleFrom)
        }

        static func == (left: Self, right: Self) -> Bool {
            left.storage === right.storage
                || (left.position == right.position && left.visibleFrom == right.visibleFrom && left.fact == right.fact)
        }
    }

    struct Dated<Value: Sendable & Equatable>: Sendable, Equatable {
        var date: Date
        var position: Int64
        var value: Value
    }

    public let subscriberID: String
    /// The position of the last event applied (0 before any).
    public internal(set) var lastPosition: Int64 = 0
    /// The idempotency key of every event applied, with the position of the
    /// event that first carried it.
    var keyPositions: [String: Int64] = [:]
    var transactions: [String: TransactionRecord] = [:]
    /// Per refunded transaction id, every refund (a refund, its reversal
    /// and a second refund each count), in stream order.
    var refunds: [String: [Dated<RefundFact>]] = [:]
    var refundReversals: [String: [Dated<RefundReversal>]] = [:]
    /// Per transaction: later ends the store gave it (`renewal_extended`).
    var extensions: [String: [Dated<Date>]] = [:]
    /// Per original transaction's ownership key (`Environment.ownershipKey`):
    /// transfers in (`true`) and out (`false`).
    var ownership: [String: [Dated<Bool>]] = [:]
    var autoRenewChanges: [String: [Dated<Bool>]] = [:]
    var billingIssues: [String: [Dated<BillingIssue>]] = [:]
    var storeExpiries: [String: [Dated<ExpiryFact>]] = [:]
    var devices: [String: Dated<String>] = [:]
    var remindersSent: [String: Dated<ReminderDelivery>] = [:]
    /// Support grants by grant id (dated by their start), and their revocations.
    var supportGrants: [String: Dated<SupportGrant>] = [:]
    var grantRevocations: [String: Dated<GrantRevocation>] = [:]
    /// Per Play purchase token: every state fetched, dated by the instant
    /// it is of, in stream order.
    var playPurchases: [String: [Dated<GooglePlayPurchase>]] = [:]
    /// Per Play purchase token: its voiding, dated when it took effect.
    var playVoids: [String: Dated<GooglePlayVoid>] = [:]
    /// `transactions` grouped by original transaction, in the order they
    /// were recorded: a chain is walked without a lookup per transaction.
    var byOriginal = OriginalIndex()

    /// An index derived from `transactions` (rebuilt with them from a
    /// snapshot): it adds nothing to what a ledger holds, so it never makes
    /// two ledgers unequal.
    struct OriginalIndex: Sendable, Equatable {
        var records: [String: [TransactionRecord]] = [:]

        static func == (left: Self, right: Self) -> Bool { true }

        init() {}

        init(_ transactions: [String: TransactionRecord]) {
            for record in transactions.values.sorted(by: { $0.position < $1.position }) {
                records[record.fact.originalTransactionID, default: []].append(record)
            }
        }
    }

    public init(subscriberID: String) {
        self.subscriberID = subscriberID
    }

    /// An empty ledger with room for about `capacity` events' keys and
    /// transactions: a rebuild knows how many a stream holds, and growing
    /// the tables one doubling at a time rehashed every key each time.
    public init(subscriberID: String, capacity: Int) {
        self.subscriberID = subscriberID
        keyPositions.reserveCapacity(capacity)
        transactions.reserveCapacity(capacity)
    }

    /// Folds a whole history; events are applied in position order whatever
    /// order they come in.
    public init(subscriberID: String, events: [RecordedLedgerEvent]) {
        self.init(subscriberID: subscriberID, capacity: events.count)
        let inOrder = zip(events.indices, events).allSatisfy { $0 == 0 || events[$0 - 1].position < $1.position }
        for event in inOrder ? events : events.sorted(by: { $0.position < $1.position }) { apply(event) }
    }

    /// Adds one event; events must come in position order. Taken as
    /// owned: a caller handing over its last copy (a rebuild) moves
    /// the fact into the ledger instead of retaining each of its strings.
    public mutating func apply(_ recorded: __owned RecordedLedgerEvent) {
        let position = recorded.position
        lastPosition = max(lastPosition, position)
        let event = (consume recorded).event
        if let key = event.idempotencyKey {
            // One lookup that inserts when absent (a rebuild does this for every event).
            var isNew = false
            touch(&keyPositions[key, default: { isNew = true; return position }()])
            guard isNew else { return }
        }
        switch consume event {
        case .purchased(let fact), .renewed(let fact):
            let purchaseDate = fact.purchaseDate  // read before the fact moves into its record
            if let deviceID = fact.deviceID { seeDevice(deviceID, at: purchaseDate, position: position) }
            record(fact, position: position, visibleFrom: purchaseDate)
        case .restored(let fact):
            // The restoring device arrives as its own `device_seen`, dated when it was seen.
            let purchaseDate = fact.purchaseDate
            record(fact, position: position, visibleFrom: purchaseDate)
        case .transferredIn(let transfer):
            ownership[transfer.ownershipKey, default: []].append(Dated(date: transfer.date, position: position, value: true))
            if let fact = transfer.transaction {
                record(fact, position: position, visibleFrom: max(fact.purchaseDate, transfer.date))
            }
        case .transferredOut(let transfer):
            ownership[transfer.ownershipKey, default: []].append(Dated(date: transfer.date, position: position, value: false))
        case .refunded(let refund):
            refunds[refund.transactionID, default: []].append(Dated(date: refund.revocationDate, position: position, value: refund))
        case .refundReversed(let reversal):
            refundReversals[reversal.transactionID, default: []].append(Dated(date: reversal.date, position: position, value: reversal))
        case .renewalExtended(let renewalExtension):
            extensions[renewalExtension.transactionID, default: []]
                .append(Dated(date: renewalExtension.effectiveDate, position: position, value: renewalExtension.expiresDate))
        case .expired(let expiry):
            if let original = expiry.originalTransactionID {
                storeExpiries[original, default: []].append(Dated(date: expiry.expiresDate, position: position, value: expiry))
            }
        case .autoRenewChanged(let change):
            autoRenewChanges[change.originalTransactionID, default: []]
                .append(Dated(date: change.effectiveDate, position: position, value: change.autoRenew))
        case .billingIssue(let issue):
            billingIssues[issue.originalTransactionID, default: []]
                .append(Dated(date: issue.effectiveDate, position: position, value: issue))
        case .deviceSeen(let device):
            seeDevice(device.deviceID, at: device.date, position: position)
        case .reminderSent(let delivery):
            remindersSent[delivery.reminderID] = Dated(date: delivery.date, position: position, value: delivery)
        case .granted(let grant):
            supportGrants[grant.grantID] = Dated(date: grant.startsAt, position: position, value: grant)
        case .grantRevoked(let revocation):
            grantRevocations[revocation.grantID] = Dated(date: revocation.date, position: position, value: revocation)
        case .googlePlayPurchase(let purchase):
            playPurchases[purchase.purchaseToken, default: []].append(Dated(date: purchase.observedAt, position: position, value: purchase))
        case .googlePlayVoided(let void):
            if playVoids[void.purchaseToken].map({ void.voidedAt < $0.date }) ?? true {
                playVoids[void.purchaseToken] = Dated(date: void.voidedAt, position: position, value: void)
            }
        case .reminderFailed, .erased, .unknown:
            // An erasure changes no rule: the stream's key is what refuses new facts.
            break
        }
    }

    /// Owned: the fact moves into its record (from an event handed over to
    /// `apply`) instead of being copied, a retain per string.
    private mutating func record(_ fact: __owned TransactionFact, position: Int64, visibleFrom: Date) {
        let record = TransactionRecord(fact: fact, position: position, visibleFrom: visibleFrom)
        var added = false
        touch(&transactions[record.fact.transactionID, default: {
            added = true
            return record
        }()])
        if added { byOriginal.records[record.fact.originalTransactionID, default: []].append(record) }
    }

    /// Reaches a dictionary entry through `subscript(_:default:)`'s one
    /// lookup, which inserts the default when the key is absent.
    private func touch<Value>(_ value: inout Value) {}

    private mutating func seeDevice(_ deviceID: String, at date: Date, position: Int64) {
        if let seen = devices[deviceID], seen.date <= date { return }
        devices[deviceID] = Dated(date: date, position: position, value: deviceID)
    }

    /// Whether the subscriber holds `originalTransactionID` of `environment`
    /// at `at` (not transferred out since it last came in).
    func owns(_ originalTransactionID: String, environment: Environment, at: Date) -> Bool {
        owns(key: environment.ownershipKey(originalTransactionID), at: at)
    }

    /// Whether the subscriber holds the purchase owned under `key` at `at`
    /// (not transferred out since it last came in).
    func owns(key: String, at: Date) -> Bool {
        guard !ownership.isEmpty, let moves = ownership[key] else { return true }
        return latest(moves, at: at)?.value ?? true
    }

    /// Whether any fact of this original transaction of `environment` was
    /// ever recorded here.
    public func knows(originalTransactionID: String, environment: Environment) -> Bool {
        ownership[environment.ownershipKey(originalTransactionID)] != nil
            || byOriginal.records[originalTransactionID]?.contains { $0.fact.environment == environment } == true
    }

    /// Whether the subscriber currently holds the original transaction of
    /// `environment`: known here and its last transfer, if any, was into
    /// this subscriber.
    public func holds(originalTransactionID: String, environment: Environment) -> Bool {
        guard knows(originalTransactionID: originalTransactionID, environment: environment) else { return false }
        return holdsAfterLastMove(key: environment.ownershipKey(originalTransactionID))
    }

    /// Whether the last transfer under `key`, if any, was into this subscriber.
    func holdsAfterLastMove(key: String) -> Bool {
        (ownership[key]?.max { $0.position < $1.position }?.value) ?? true
    }

    /// Whether `transactionID` was recorded here (purchase, renewal, restore, transfer).
    public func knows(transactionID: String) -> Bool {
        transactions[transactionID] != nil
    }

    /// The position of the event that first recorded `transactionID`
    /// (purchase, renewal, restore, transfer in).
    public func position(ofTransaction transactionID: String) -> Int64? {
        transactions[transactionID]?.position
    }

    /// The position of the event that first carried the idempotency key `key`,
    /// nil when no event did.
    public func position(ofKey key: String) -> Int64? {
        keyPositions[key]
    }

    /// The latest transaction (by purchase date, then position) of an
    /// original transaction of `environment`.
    func latestTransaction(ofOriginal originalTransactionID: String, environment: Environment) -> TransactionRecord? {
        byOriginal.records[originalTransactionID]?.filter { $0.fact.environment == environment }
            .max { ($0.fact.purchaseDate, $0.position) < ($1.fact.purchaseDate, $1.position) }
    }

    /// The end the store gave `transactionID` as known at `at` (extensions
    /// included); nil for a transaction without one.
    public func expiresDate(ofTransaction transactionID: String, at: Date = .distantFuture) -> Date? {
        guard let base = transactions[transactionID]?.fact.expiresDate else { return nil }
        return (extensions[transactionID] ?? []).filter { $0.date <= at }.map(\.value).reduce(base, max)
    }

    /// Whether a refund of `transactionID` in effect at `at` was reversed by then.
    func isRefundReversed(_ transactionID: String, refund: Dated<RefundFact>, at: Date) -> Bool {
        // A reversal dated before the refund cannot undo it.
        refundReversals[transactionID]?.contains { $0.date <= at && $0.date >= refund.date } == true
    }

    /// The refund of `transactionID` itself in effect at `at`: its latest
    /// refund dated by then, unless a reversal dated between the two undid it.
    func refundInEffect(ofTransaction transactionID: String, at: Date) -> Dated<RefundFact>? {
        guard let refund = latest(refunds[transactionID] ?? [], at: at),
              !isRefundReversed(transactionID, refund: refund, at: at) else { return nil }
        return refund
    }

    /// The refund in effect at `at` that takes away what `fact` gives. One
    /// purchase is one original transaction, and a restore's new
    /// transaction id is a copy of it: a refund of any copy revokes the
    /// purchase and every copy. A subscription's original spans many paid
    /// periods, so there a refund revokes the copies of the same period
    /// (the same `webOrderLineItemId`, or without one, the same end).
    /// https://developer.apple.com/documentation/storekit/transaction/originalid
    /// https://developer.apple.com/documentation/appstoreserverapi/weborderlineitemid
    func refundInEffect(for fact: TransactionFact, isSubscription: Bool, at: Date) -> Dated<RefundFact>? {
        guard !refunds.isEmpty else { return nil }
        var found = refundInEffect(ofTransaction: fact.transactionID, at: at)
        for (transactionID, list) in refunds where transactionID != fact.transactionID {
            guard let refunded = list.first?.value, refunded.originalTransactionID == fact.originalTransactionID,
                  refunded.environment == fact.environment else { continue }
            if isSubscription {
                guard let copy = transactions[transactionID]?.fact, Self.samePeriod(copy, fact) else { continue }
            }
            if let refund = refundInEffect(ofTransaction: transactionID, at: at), found.map({ refund.date < $0.date }) ?? true {
                found = refund
            }
        }
        return found
    }

    /// Whether two transactions of one subscription pay for the same period.
    static func samePeriod(_ left: TransactionFact, _ right: TransactionFact) -> Bool {
        if let leftLine = left.details.webOrderLineItemID, let rightLine = right.details.webOrderLineItemID {
            return leftLine == rightLine
        }
        return left.expiresDate != nil && left.expiresDate == right.expiresDate
    }

    /// The dates at which refunds and reversals of `originalTransactionID`'s
    /// transactions take effect.
    func refundDates(ofOriginal originalTransactionID: String) -> [Date] {
        guard !refunds.isEmpty else { return [] }
        var dates: [Date] = []
        for (transactionID, list) in refunds where list.first?.value.originalTransactionID == originalTransactionID {
            dates += list.map(\.date)
            dates += (refundReversals[transactionID] ?? []).map(\.date)
        }
        return dates
    }

    /// About how many facts the ledger holds (idempotency keys and
    /// transactions): a measure of its size in memory.
    public var factCount: Int { keyPositions.count + transactions.count }

    /// Whether the device was ever seen for this subscriber.
    public func knows(deviceID: String) -> Bool {
        devices[deviceID] != nil
    }

    func latest<Value>(_ items: [Dated<Value>], at: Date) -> Dated<Value>? {
        items.filter { $0.date <= at }.max { ($0.date, $0.position) < ($1.date, $1.position) }
    }
}

extension SubscriberLedger {
    /// Whether an undated or reported auto-renew state adds nothing to what
    /// the ledger knows: the same value, or a report older than its signal.
    func knowsAlready(_ change: FactRequest.AutoRenewChange) -> Bool {
        guard let current = currentAutoRenew(of: change.originalTransactionID, environment: change.environment) else {
            return change.autoRenew
        }
        if current.value == change.autoRenew { return true }
        guard change.isReportedState, let date = change.effectiveDate else { return false }
        return current.date >= date
    }

    /// Whether auto-renew is on as the ledger knows it now: the latest
    /// change reported, or the flag the latest transaction carrying one
    /// was bought with, whichever is later; nil when neither says.
    func currentAutoRenew(of originalTransactionID: String, environment: Environment) -> Dated<Bool>? {
        let records = (byOriginal.records[originalTransactionID] ?? []).lazy.filter { $0.fact.environment == environment }
        return autoRenewSignal(of: originalTransactionID, at: .distantFuture,
                               flags: records.map { (date: $0.fact.purchaseDate, position: $0.position, value: $0.fact.autoRenew) })
    }

    /// The latest auto-renew signal by `at`: a change the store reported, or
    /// the flag a transaction (`flags`: purchase date, position, flag) carried
    /// when it was bought, whichever is later; nil when none says.
    func autoRenewSignal<Flags: Sequence>(of originalTransactionID: String, at: Date, flags: Flags) -> Dated<Bool>?
    where Flags.Element == (date: Date, position: Int64, value: Bool?) {
        var signal = (autoRenewChanges[originalTransactionID] ?? []).filter { $0.date <= at }
            .max { ($0.date, $0.position) < ($1.date, $1.position) }
        for flag in flags {
            guard let value = flag.value else { continue }
            if let current = signal, (flag.date, flag.position) <= (current.date, current.position) { continue }
            signal = Dated(date: flag.date, position: flag.position, value: value)
        }
        return signal
    }

    /// The latest billing issue of an original transaction, if no transaction
    /// of it was recorded after it (a renewal settles it).
    func openBillingIssue(of originalTransactionID: String) -> Dated<BillingIssue>? {
        guard let issue = billingIssues[originalTransactionID]?.max(by: { $0.position < $1.position }) else { return nil }
        // Recorded in position order: the last is the latest.
        let renewed = (byOriginal.records[originalTransactionID]?.last?.position ?? 0) > issue.position
        return renewed ? nil : issue
    }
}
