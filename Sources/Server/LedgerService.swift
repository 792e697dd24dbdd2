import EventStore
import Foundation
import Ledger
import Logging
import Metrics
import Postgres

/// Records facts and answers questions about subscribers, on the event store.
///
/// A write reads the subscriber's stream, decides, and appends with the
/// version it read, the ownership rows in the same transaction. When another
/// writer got there first (a newer stream version, or an ownership row that
/// changed) it reads and decides again, so concurrent requests on one
/// subscriber are applied one after the other and none is lost.
public struct LedgerService: Sendable {
    public let pool: ConnectionPool
    public let store: EventStore
    public let catalog: Catalog
    public let decider: Decider
    let logger: Logger
    /// How many times a write decides again before giving up (503).
    public var maximumAttempts = 50
    /// The clock; tests may pin it.
    public var now: @Sendable () -> Date = { Date() }
    /// Told, after a write commits, which original transactions it claimed
    /// for the subscriber (App Store notifications waiting for an owner).
    public var claimObserver: (@Sendable (_ originalTransactionIDs: [String], _ subscriberID: String) async -> Void)?

    /// Work that must commit or roll back with a write's events; runs in its
    /// transaction after them (an App Store notification's row).
    public typealias Alongside = @Sendable (Connection) async throws -> Void

    public init(pool: ConnectionPool, store: EventStore, catalog: Catalog, restorePolicy: RestorePolicy, logger: Logger) {
        self.pool = pool
        self.store = store
        self.catalog = catalog
        self.decider = Decider(catalog: catalog, restorePolicy: restorePolicy)
        self.logger = logger
    }

    /// The service the HTTP API uses, from the application's dependencies.
    public init(_ dependencies: AppDependencies) {
        self.init(pool: dependencies.pool, store: dependencies.store, catalog: dependencies.catalog.catalog,
                  restorePolicy: dependencies.configuration.restorePolicy, logger: dependencies.logger)
    }

    /// What a write did.
    public struct WriteResult: Sendable {
        /// The position of the fact's event (the stored one for a duplicate).
        public var position: Int64
        public var isDuplicate: Bool
        /// The subscriber's state right after the write.
        public var state: SubscriberState
    }

    // MARK: Writes

    /// Records one fact (`POST /v1/subscribers/{id}/events`).
    public func record(_ request: FactRequest, subscriberID: String, source: String = FactSource.api,
                       alongside: Alongside? = nil) async throws -> WriteResult {
        try LedgerStreams.validate(subscriberID: subscriberID)
        return try await write(subscriberID: subscriberID, ids: RequestIDs.of(request), source: source, alongside: alongside) { history, ledger, owner, now throws(LedgerError) in
            let decision = try decider.decide(request, ledger: ledger, owner: owner, now: now, source: source)
            return (decision, DuplicatePosition.of(request, in: history))
        }
    }

    /// Records a restore (`POST /v1/subscribers/{id}/restore`).
    public func restore(_ request: RestoreRequest, subscriberID: String, source: String = FactSource.api) async throws -> WriteResult {
        try LedgerStreams.validate(subscriberID: subscriberID)
        return try await write(subscriberID: subscriberID, ids: RequestIDs.of(request), source: source) { history, ledger, owner, now throws(LedgerError) in
            (try decider.decide(request, ledger: ledger, owner: owner, now: now, source: source), history.last?.position ?? 0)
        }
    }

    private func write(
        subscriberID: String, ids: Set<String>, source: String, alongside: Alongside? = nil,
        decide: ([RecordedLedgerEvent], SubscriberLedger, (String) -> String?, Date) throws(LedgerError) -> (Decision, Int64)
    ) async throws -> WriteResult {
        let streamID = LedgerStreams.streamID(for: subscriberID)
        for attempt in 1...maximumAttempts {
            let (history, owners) = try await pool.withConnection { connection in
                let history = try SubscriberHistory(subscriberID: subscriberID, stored: try await store.readStream(streamID, on: connection))
                return (history, try await OwnershipLookup.owners(of: ids, on: connection))
            }
            let now = self.now()
            var ledger = SubscriberLedger(subscriberID: subscriberID, events: history.events)
            let decision: Decision
            let duplicatePosition: Int64
            do {
                (decision, duplicatePosition) = try decide(history.events, ledger, { owners[$0] }, now)
            } catch {
                Self.factsRejected.increment()
                throw error
            }
            if decision.isDuplicate {
                Self.factsDuplicate.increment()
                return WriteResult(position: duplicatePosition, isDuplicate: true, state: ledger.state(at: now, catalog: catalog))
            }
            var appends = [StreamAppend(streamID: streamID, expected: .exact(history.version),
                                        events: try LedgerStreams.newEvents(decision.events, subscriberID: subscriberID, source: source))]
            var rows = OwnershipLookup.transactionRows(for: decision.events, subscriberID: subscriberID)
            for transfer in decision.transfers {
                // The other stream takes any version: the ownership row, updated only
                // if that subscriber still holds it, is what guards the transfer.
                appends.append(StreamAppend(streamID: LedgerStreams.streamID(for: transfer.fromSubscriberID), expected: .any,
                                            events: try LedgerStreams.newEvents(transfer.events, subscriberID: transfer.fromSubscriberID,
                                                                                source: source)))
                rows += OwnershipLookup.transactionRows(for: transfer.events, subscriberID: transfer.fromSubscriberID)
            }
            let claims = decision.claims.map {
                OwnershipClaim(originalTransactionID: $0, previousOwner: owners[$0], newOwner: subscriberID)
            }
            do {
                let results = try await store.transaction { connection in
                    let results = try await store.append(appends, on: connection)
                    try await OwnershipLookup.write(claims: claims, transactions: rows, on: connection)
                    try await alongside?(connection)
                    return results
                }
                let outcomes = results[0].outcomes
                if outcomes.contains(where: \.isDuplicate) {
                    // A concurrent copy of this fact was stored first: read it and answer as it did.
                    continue
                }
                for (event, outcome) in zip(decision.events, outcomes) {
                    ledger.apply(RecordedLedgerEvent(position: outcome.position, recordedAt: now, event: event))
                }
                Self.factsRecorded.increment()
                if !claims.isEmpty, let claimObserver {
                    await claimObserver(claims.map(\.originalTransactionID), subscriberID)
                }
                return WriteResult(position: outcomes.last?.position ?? 0, isDuplicate: false, state: ledger.state(at: now, catalog: catalog))
            } catch where OwnershipLookup.isContention(error) {
                Self.retries.increment()
                logger.debug("write lost a race; deciding again", metadata: [
                    "subscriber.id": "\(subscriberID)", "write.attempt": "\(attempt)", "error": "\(error)",
                ])
                try await Task.sleep(for: .microseconds(Int.random(in: 200...(1000 * min(attempt, 20)))))
            }
        }
        Self.exhausted.increment()
        throw APIError(.serviceUnavailable, code: "contention",
                       message: "too many concurrent writes to subscriber '\(subscriberID)'; retry the request")
    }

    static let factsRecorded = Counter(label: "subledger_facts_total", dimensions: [("outcome", "recorded")])
    static let factsDuplicate = Counter(label: "subledger_facts_total", dimensions: [("outcome", "duplicate")])
    static let factsRejected = Counter(label: "subledger_facts_total", dimensions: [("outcome", "rejected")])
    static let retries = Counter(label: "subledger_fact_retries_total")
    static let exhausted = Counter(label: "subledger_fact_retries_exhausted_total")

    // MARK: Reads

    /// A subscriber's stream; 404 when it has none.
    func history(of subscriberID: String) async throws -> SubscriberHistory {
        try LedgerStreams.validate(subscriberID: subscriberID)
        let history = try SubscriberHistory(subscriberID: subscriberID,
                                            stored: try await store.readStream(LedgerStreams.streamID(for: subscriberID)))
        guard history.exists else {
            throw LedgerError(kind: .notFound, code: "subscriber_not_found",
                              message: "Subscriber '\(subscriberID)' has no recorded facts.", field: "subscriberId")
        }
        return history
    }

    /// The subscriber's state at `at` (default: now), with the reminders the
    /// reminder projection holds for them.
    public func state(of subscriberID: String, at: Date? = nil) async throws -> SubscriberState {
        let history = try await history(of: subscriberID)
        var state = SubscriberState.fold(history.events, subscriberID: subscriberID, catalog: catalog, at: at ?? now())
        state.reminders = try await ReminderRepository(pool: pool).reminders(of: subscriberID).map(\.stateReminder)
        return state
    }

    /// Why each entitlement is or is not active at `at`.
    public func explanation(of subscriberID: String, at: Date? = nil) async throws -> Explanation {
        let history = try await history(of: subscriberID)
        return explain(subscriberID: subscriberID, history: history.events, catalog: catalog, at: at ?? now())
    }

    /// The subscriber's events in order, each with a readable summary.
    public func timeline(of subscriberID: String) async throws -> [TimelineEntry] {
        let history = try await history(of: subscriberID)
        return zip(history.stored, history.events).map { TimelineEntry(subscriberID: subscriberID, stored: $0, event: $1) }
    }

    /// The owner of a transaction (by transaction id or original transaction
    /// id) and its facts; nil when the ledger has never seen it.
    public func transaction(_ id: String) async throws -> TransactionReport? {
        let rows = try await pool.query("""
            SELECT t.transaction_id, t.original_transaction_id, t.subscriber_id, o.subscriber_id
            FROM transaction_ids t LEFT JOIN transaction_owners o ON o.original_transaction_id = t.original_transaction_id
            WHERE t.transaction_id = \(id) OR t.original_transaction_id = \(id)
            ORDER BY (t.transaction_id = \(id)) DESC, coalesce(t.subscriber_id = o.subscriber_id, false) DESC, t.recorded_at DESC
            LIMIT 1
            """)
        guard let row = rows.first else { return nil }
        let original = try row.decode(String.self, at: 1)
        let recordedBy = try row.decode(String.self, at: 2)
        let owner = try row.decode(String?.self, at: 3) ?? recordedBy
        let byOriginal = id == original
        // Facts live where they were recorded: the owner's stream, and a
        // previous owner's for what happened before a transfer.
        let others = try await pool.query("""
            SELECT DISTINCT subscriber_id FROM transaction_ids WHERE \(unsafeRaw: byOriginal ? "original_transaction_id" : "transaction_id") = \(id)
            """)
        var subscribers = [owner]
        for other in others {
            let subscriber = try other.decode(String.self, at: 0)
            if !subscribers.contains(subscriber) { subscribers.append(subscriber) }
        }
        var entries = [TimelineEntry]()
        for subscriber in subscribers {
            let stored = try await store.readStream(LedgerStreams.streamID(for: subscriber))
            let history = try SubscriberHistory(subscriberID: subscriber, stored: stored)
            let wanted = Set(facts(ofTransaction: id, in: history.events).map(\.position))
            for (stored, event) in zip(history.stored, history.events) where wanted.contains(stored.position) {
                entries.append(TimelineEntry(subscriberID: subscriber, stored: stored, event: event))
            }
        }
        entries.sort { $0.position < $1.position }
        return TransactionReport(transactionId: byOriginal ? original : id, originalTransactionId: original,
                                 subscriberId: owner, facts: entries)
    }
}

/// One event of a subscriber's history as served.
public struct TimelineEntry: Sendable, Encodable {
    public var subscriberId: String
    public var position: Int64
    public var type: String
    public var recordedAt: Date
    public var data: JSONDocument
    public var source: String?
    public var summary: String

    init(subscriberID: String, stored: RecordedEvent, event: RecordedLedgerEvent) {
        subscriberId = subscriberID
        position = stored.position
        type = stored.type
        recordedAt = stored.recordedAt
        data = (try? JSONDecoder().decode(JSONDocument.self, from: stored.data)) ?? .null
        source = stored.metadata.source ?? event.event.source
        summary = event.event.summary
    }
}

/// The owner of a transaction and its facts (`GET /v1/transactions/{id}`).
public struct TransactionReport: Sendable, Encodable {
    public var transactionId: String
    public var originalTransactionId: String
    /// The subscriber holding the original transaction now.
    public var subscriberId: String
    public var facts: [TimelineEntry]
}

/// Where the first copy of a duplicate fact is, so a repeat answers with its position.
enum DuplicatePosition {
    static func of(_ request: FactRequest, in history: [RecordedLedgerEvent]) -> Int64 {
        let match: (LedgerEvent) -> Bool
        switch request.type {
        case .purchase, .renewal, .restore:
            match = { event in
                switch event {
                case .purchased, .renewed, .restored, .transferredIn: event.transactionID == request.transactionId
                default: false
                }
            }
            return history.first { match($0.event) }?.position ?? history.last?.position ?? 0
        case .refund:
            match = { $0.idempotencyKey == "refund:" + (request.transactionId ?? "") }
        case .refundReversal:
            match = { $0.idempotencyKey == "refund-reversed:" + (request.transactionId ?? "") }
        case .expiry:
            match = { event in
                guard case .expired(let expiry) = event else { return false }
                if let original = request.originalTransactionId { return expiry.originalTransactionId == original }
                return expiry.productId == request.productId
            }
        case .autoRenewChange:
            match = { if case .autoRenewChanged(let change) = $0 { change.originalTransactionId == request.originalTransactionId } else { false } }
        case .billingIssue:
            match = { if case .billingIssue(let issue) = $0 { issue.originalTransactionId == request.originalTransactionId } else { false } }
        default:
            match = { $0.transactionID != nil && $0.transactionID == request.transactionId }
        }
        return history.last { match($0.event) }?.position ?? history.last?.position ?? 0
    }
}
