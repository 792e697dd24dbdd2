import EventStore
import Foundation
import Ledger
import Postgres

/// Answers questions about subscribers from their streams: state at an
/// instant, explanations, history, and who owns a transaction.
public struct SubscriberReader: Sendable {
    public let store: EventStore
    public let catalog: Catalog
    let ownership: OwnershipStore
    /// The clock; tests may pin it.
    public var now: @Sendable () -> Date = { Date() }
    /// The stream version from which a computed current state is cached.
    public var cacheFromVersion: Int64 = 16
    /// Long ledgers kept in memory between reads (and shared with the writer).
    public var ledgerCache: LedgerCache?
    /// Combines concurrent reads of current states (the HTTP API's); nil:
    /// each read runs its own statements.
    public var combiner: ReadCombiner?
    /// Whether a read may store what it derived (a snapshot of a long tail,
    /// a cached state). False on a standby, which refuses writes: the
    /// writer stores snapshots as it appends, and the primary's readers the
    /// cached states.
    public var storesDerivedData = true

    public init(store: EventStore, catalog: Catalog) {
        self.store = store
        self.catalog = catalog
        self.ownership = OwnershipStore(pool: store.pool)
    }

    public init(_ dependencies: AppDependencies) {
        self.init(store: dependencies.store, catalog: dependencies.catalog.catalog)
        ledgerCache = dependencies.ledgers
    }

    /// A subscriber's stream; `subscriber_not_found` when it has none.
    func history(of subscriberID: String) async throws -> SubscriberHistory {
        let subscriberID = try InputLimits.validateSubscriberID(subscriberID)
        let history = try await SubscriberHistory.read(subscriberID, from: store)
        guard !history.isErased else { throw LedgerError.erasedSubscriber }
        guard history.exists else { throw Self.notFound(subscriberID) }
        return history
    }

    /// `subscriber_not_found`: the id has no recorded facts.
    public static func notFound(_ subscriberID: String) -> LedgerError {
        LedgerError(kind: .notFound, code: .subscriberNotFound,
                    message: "Subscriber '\(subscriberID)' has no recorded facts.", field: "subscriberId")
    }

    /// A subscriber's ledger from their snapshot and the tail of their
    /// stream; `subscriber_not_found` when they have no events. A long tail
    /// is stored as a new snapshot, so the next read is short again.
    func ledger(of subscriberID: String, on connection: Connection) async throws -> LoadedLedger {
        try await checked(try await SubscriberSnapshots.load(subscriberID, cache: ledgerCache, on: connection), on: connection)
    }

    /// A loaded ledger that exists, stored as a snapshot when its tail is
    /// long, and kept in the ledger cache (the one place a read keeps one).
    private func checked(_ loaded: LoadedLedger, on connection: Connection) async throws -> LoadedLedger {
        if loaded.cachedState != nil { return loaded }
        guard !loaded.isErased else { throw LedgerError.erasedSubscriber }
        var loaded = loaded
        if loaded.isSnapshotDue && storesDerivedData {
            try await SubscriberSnapshots.save([loaded], on: connection)
            loaded.snapshotVersion = loaded.version
        }
        ledgerCache?.keep(loaded)
        guard loaded.exists else { throw Self.notFound(loaded.subscriberID) }
        return loaded
    }

    func ledger(of subscriberID: String) async throws -> SubscriberLedger {
        let subscriberID = try InputLimits.validateSubscriberID(subscriberID)
        return try await store.pool.withConnection { try await ledger(of: subscriberID, on: $0) }.ledger
    }

    /// The subscriber's state at `at` (default: now), with the reminders the
    /// reminder projection holds for them. Now: the cached state while
    /// nothing can have changed it, else computed from the snapshot and the
    /// tail of the stream (and cached). A past instant: from the snapshot,
    /// which holds every fact, so it is exact.
    /// Only `environment`'s facts count: a sandbox purchase never grants
    /// production (the cache holds the Production view only).
    /// With a `combiner`, a read of the current state shares its statements
    /// with the reads of other subscribers waiting at the same time.
    public func state(of subscriberID: String, at: Date? = nil, environment: Ledger.Environment = .production) async throws -> SubscriberState {
        let subscriberID = try InputLimits.validateSubscriberID(subscriberID)
        // A read that must see a given write runs alone: a group's statements
        // wait for the position of the read that started the group only.
        if at == nil, let combiner, ReadConsistency.minimumPosition == nil {
            return try await combiner.state(of: subscriberID, environment: environment) { subscriberIDs, environment in
                try await store.pool.withConnection { try await states(of: subscriberIDs, at: nil, environment: environment, on: $0) }
            }
        }
        return try await store.pool.withConnection { connection in
            try await states(of: [subscriberID], at: at, environment: environment, on: connection)[0].get()
        }
    }

    /// The states of `subscriberIDs` (distinct) at `at` (default: now), in
    /// their order: their ledgers (or cached states) and reminders in one
    /// round trip whatever their number. Each has its own result: a
    /// subscriber without facts is `subscriber_not_found` and the others are
    /// answered. What fails the statement (a lost connection) throws.
    func states(of subscriberIDs: [String], at: Date?, environment: Ledger.Environment,
                on connection: Connection) async throws -> [Result<SubscriberState, LedgerError>] {
        let now = self.now()
        // The cache holds the current Production view only.
        let probe = at == nil && environment == .production ? SubscriberSnapshots.CacheProbe(now: now, catalog: catalog) : nil
        var held = ledgerCache?.ledgers(subscriberIDs, use: .share) ?? [:]
        let outputs = try await connection.pipeline([SubscriberSnapshots.loadStatement(subscriberIDs, unlessCached: probe, held: held),
                                                     ReminderStore.remindersStatement(of: subscriberIDs)])
        let read = try await SubscriberSnapshots.ledgers(from: outputs[0], unlessCached: probe, held: &held, on: connection)
        var reminders = [String: [SubscriberState.Reminder]]()
        for row in outputs[1] {
            let view = try ReminderStore.view(row)
            if view.environment == environment { reminders[view.subscriberID, default: []].append(view.stateReminder) }
        }
        var results = [Result<SubscriberState, LedgerError>]()
        results.reserveCapacity(subscriberIDs.count)
        for subscriberID in subscriberIDs {
            let loaded: LoadedLedger
            do {
                loaded = try await checked(read[subscriberID] ?? .empty(subscriberID), on: connection)
            } catch let error as LedgerError {
                results.append(.failure(error))
                continue
            }
            var state: SubscriberState
            if let cached = loaded.cachedState {
                state = cached
            } else if let at {
                state = loaded.ledger.state(at: at, catalog: catalog, environment: environment)
            } else if probe == nil {
                state = loaded.ledger.state(at: now, catalog: catalog, environment: environment)
            } else {
                let (computed, nextChange) = loaded.ledger.stateAndNextChange(at: now, catalog: catalog)
                state = computed
                // A short history is folded as fast as a cached state is read: not worth a write.
                if loaded.version >= cacheFromVersion && storesDerivedData {
                    try await SubscriberStateCache.save(computed, version: loaded.version, validUntil: nextChange, catalog: catalog, on: connection)
                }
            }
            state.reminders = reminders[subscriberID] ?? []
            results.append(.success(state))
        }
        return results
    }

    /// The state of a subscriber who may have no facts yet (an empty state then).
    public func stateOrEmpty(of subscriberID: String, environment: Ledger.Environment = .production) async throws -> SubscriberState {
        do {
            return try await state(of: subscriberID, environment: environment)
        } catch let error as LedgerError where error.kind == .notFound {
            return SubscriberState.fold([], subscriberID: subscriberID, catalog: catalog, at: now(), environment: environment)
        }
    }

    /// Why each entitlement is or is not active at `at`.
    public func explanation(of subscriberID: String, at: Date? = nil, environment: Ledger.Environment = .production) async throws -> Explanation {
        try await ledger(of: subscriberID).explanation(catalog: catalog, at: at ?? now(), environment: environment)
    }

    /// The subscriber's events in order, each with a readable summary.
    public func timeline(of subscriberID: String) async throws -> [TimelineEntry] {
        let history = try await history(of: subscriberID)
        return zip(history.stored, history.events).map { TimelineEntry(subscriberID: subscriberID, stored: $0, event: $1) }
    }

    /// The owner of a transaction (by transaction id or original transaction
    /// id) and its facts; nil when the ledger has never seen it.
    public func transaction(_ id: String) async throws -> TransactionReport? {
        guard let located = try await ownership.locate(transactionOrOriginalID: id) else { return nil }
        // Facts live where they were recorded: the owner's stream, and a
        // previous owner's for what happened before a transfer.
        var subscribers = [located.owner]
        for subscriber in located.recordedBy where !subscribers.contains(subscriber) { subscribers.append(subscriber) }
        var entries = [TimelineEntry]()
        for subscriber in subscribers {
            let history = try await SubscriberHistory.read(subscriber, from: store)
            let wanted = Set(history.events.facts(ofTransaction: id).map(\.position))
            for (stored, event) in zip(history.stored, history.events) where wanted.contains(stored.position) {
                entries.append(TimelineEntry(subscriberID: subscriber, stored: stored, event: event))
            }
        }
        entries.sort { $0.position < $1.position }
        return TransactionReport(transactionID: located.isOriginal ? located.originalTransactionID : id,
                                 originalTransactionID: located.originalTransactionID, subscriberID: located.owner, facts: entries)
    }
}
