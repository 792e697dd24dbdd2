import EventStore
import Foundation
import Ledger
import Logging
import Metrics
import Postgres

/// The one write path of the ledger. An API request is a batch of one; an
/// import, a receipt or an App Store notification a batch of many.
///
/// A batch reads the ledgers of its subscribers (a snapshot and the tail of
/// each stream, see `SubscriberSnapshots`) and the owners of the
/// transactions it names, decides each command in order against those
/// states in memory, and appends every stream's new events in one
/// transaction with the versions it read, the ownership rows beside them.
/// When another writer got there first (a newer stream version, an
/// ownership row that changed) the whole batch reads and decides again, so
/// concurrent writes on one subscriber apply one after the other and none
/// is lost.
public struct LedgerWriter: Sendable {
    public let pool: ConnectionPool
    public let store: EventStore
    public let catalog: Catalog
    public let decider: Decider
    let logger: Logger
    /// How many times a batch decides again before giving up (`WriteContention`).
    public var maximumAttempts = 50
    /// How long a batch keeps trying while no primary answers (a failover:
    /// the connection lost, the server read-only) before the error reaches
    /// the caller (503 with `Retry-After`). Safe because every fact has an
    /// idempotency key: a commit whose answer was lost is found on the new
    /// primary and answered as a duplicate, never written twice.
    public var failoverRetry: Duration = .seconds(5)
    /// The clock; tests may pin it.
    public var now: @Sendable () -> Date = { Date() }
    /// Told, after a batch commits, which original transactions it claimed
    /// for which subscriber (App Store notifications waiting for an owner).
    public var claimObserver: (@Sendable (_ originalTransactionIDs: [String], _ subscriberID: String) async -> Void)?
    /// When set, one-fact writes (without rows of their own) are combined
    /// with concurrent ones for other subscribers into one commit.
    public var combiner: WriteCombiner?
    /// Long ledgers kept in memory between writes (and shared with the
    /// readers): a write of a long history then reads only its new events.
    public var ledgerCache: LedgerCache?
    /// Runs after a batch has read its streams and before it commits (tests
    /// move a stream under a batch with it).
    var afterRead: (@Sendable (_ subscriberIDs: [String]) async throws -> Void)?

    public init(pool: ConnectionPool, store: EventStore, catalog: Catalog, restorePolicy: RestorePolicy, logger: Logger) {
        self.pool = pool
        self.store = store
        self.catalog = catalog
        self.decider = Decider(catalog: catalog, restorePolicy: restorePolicy)
        self.logger = logger
    }

    public init(_ dependencies: AppDependencies) {
        self.init(pool: dependencies.pool, store: dependencies.store, catalog: dependencies.catalog.catalog,
                  restorePolicy: dependencies.configuration.restorePolicy, logger: dependencies.logger)
        ledgerCache = dependencies.ledgers
    }

    // MARK: One fact

    /// Records one fact; a refusal is thrown as the `LedgerError`.
    public func record(_ request: FactRequest, subscriberID: String, source: String = FactSource.api,
                       alongside: WriteBatch.Alongside? = nil) async throws -> WriteResult {
        try await writeOne(.fact(request, subscriberID: subscriberID, source: source), alongside: alongside)
    }

    /// Records a restore.
    public func restore(_ request: RestoreRequest, subscriberID: String, source: String = FactSource.api) async throws -> WriteResult {
        try await writeOne(.restore(request, subscriberID: subscriberID, source: source), alongside: nil)
    }

    /// Records a support grant (`granted`); the new grant's id is `grantID`.
    public func grant(_ request: GrantRequest, grantID: String, by actor: ActorStamp, subscriberID: String) async throws -> WriteResult {
        try await writeOne(WriteCommand(subscriberID: subscriberID, request: .grant(request, grantID: grantID, by: actor)), alongside: nil)
    }

    /// Revokes a support grant (`grant_revoked`); a grant already revoked answers as a duplicate.
    public func revokeGrant(_ request: GrantRevocationRequest, by actor: ActorStamp, subscriberID: String) async throws -> WriteResult {
        try await writeOne(WriteCommand(subscriberID: subscriberID, request: .revokeGrant(request, by: actor)), alongside: nil)
    }

    private func writeOne(_ command: WriteCommand, alongside: WriteBatch.Alongside?) async throws -> WriteResult {
        var command = command
        command.subscriberID = try InputLimits.validateSubscriberID(command.subscriberID)
        var result = if let combiner, alongside == nil {
            try await combiner.write(command, WriteCombiner.Work(attempt: { try await attemptWrite($0) },
                                                                 alone: { try await write(WriteBatch([$0])) }))
        } else {
            try await write(WriteBatch([command], alongside: alongside))
        }
        if !result.knowsLedger(of: command.subscriberID) {
            // A concurrent copy of this fact was stored first: decide again, and answer as it did.
            result = try await write(WriteBatch([command], alongside: alongside))
        }
        let now = self.now()
        let ledger = result.ledgers[command.subscriberID] ?? SubscriberLedger(subscriberID: command.subscriberID)
        // The state of the environment the fact is about, so the answer shows its effect.
        let environment = command.environment
        switch result.outcomes[0] {
        case .recorded(let position):
            return WriteResult(position: position, isDuplicate: false, state: ledger.state(at: now, catalog: catalog, environment: environment),
                               ledger: command.isSupportAction ? ledger : nil)
        case .duplicate(let position):
            return WriteResult(position: position, isDuplicate: true, state: ledger.state(at: now, catalog: catalog, environment: environment),
                               ledger: command.isSupportAction ? ledger : nil)
        case .rejected(let error):
            throw error
        }
    }

    // MARK: Batches

    /// Writes a batch, deciding again while concurrent writers interfere.
    ///
    /// A batch that skips refusals and fails on something the database
    /// refuses (text it cannot store, an oversized key) is written again one
    /// command at a time, so only the culprit is rejected.
    public func write(_ batch: WriteBatch) async throws -> WriteBatchResult {
        let deadline = ContinuousClock.now + failoverRetry
        while true {
            do {
                return try await writeDecidingAgain(batch)
            } catch let error as PostgresError where Self.isFailover(error) && ContinuousClock.now < deadline {
                Self.failoverRetries.increment()
                logger.warning("no primary answered the write; trying again", metadata: [
                    "write.commands": "\(batch.commands.count)", "error": "\(error)",
                ])
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    /// The primary is away or was demoted: another attempt may reach the new one.
    static func isFailover(_ error: PostgresError) -> Bool {
        error.isConnectionBroken || error.sqlState == .readOnlySQLTransaction
    }

    private func writeDecidingAgain(_ batch: WriteBatch) async throws -> WriteBatchResult {
        for attempt in 1...maximumAttempts {
            do {
                return try await attemptWrite(batch)
            } catch where OwnershipStore.isContention(error) {
                Self.retries.increment()
                logger.debug("write lost a race; deciding again", metadata: [
                    "subscriber.ref": "\(LogReference.subscriber(batch.commands.first?.subscriberID ?? ""))", "write.commands": "\(batch.commands.count)",
                    "write.attempt": "\(attempt)", "error": "\(error)",
                ])
                try await Task.sleep(for: .microseconds(Int.random(in: 200...(1000 * min(attempt, 20)))))
            } catch let error as PostgresError where error.isDataError && batch.refusals == .skip {
                return try await isolate(batch, error: error)
            }
        }
        Self.exhausted.increment()
        throw WriteContention(subscriberIDs: batch.commands.map(\.subscriberID))
    }

    /// Writes each command of a failed batch alone.
    private func isolate(_ batch: WriteBatch, error: PostgresError) async throws -> WriteBatchResult {
        guard batch.commands.count > 1 else {
            Self.factsRejected.increment()
            return WriteBatchResult(outcomes: [.rejected(LedgerError.databaseRefused(error))], ledgers: [:])
        }
        var result = WriteBatchResult(outcomes: [], ledgers: [:])
        for command in batch.commands {
            let single = try await write(WriteBatch([command], refusals: .skip, alongside: batch.alongside))
            result.outcomes += single.outcomes
            result.ledgers.merge(single.ledgers) { _, new in new }
        }
        return result
    }

    /// One attempt at a batch: a lost race is thrown, not retried.
    func attemptWrite(_ batch: WriteBatch) async throws -> WriteBatchResult {
        let (result, claims) = try await pool.withConnection { connection in
            try await attemptWrite(batch, on: connection)
        }
        for outcome in result.outcomes {
            if case .recorded = outcome { Self.factsRecorded.increment() }
        }
        if let claimObserver {
            let changed = claims.filter { $0.previousOwner != $0.newOwner }
            for (subscriberID, claimed) in Dictionary(grouping: changed, by: \.newOwner) {
                await claimObserver(claimed.map(\.originalTransactionID), subscriberID)
            }
        }
        return result
    }

    /// Reads, decides and commits a batch on one connection: one statement
    /// to read, one round trip to commit (the append and the ownership rows
    /// pipelined as one implicit transaction), and a snapshot save after it
    /// when one is due.
    private func attemptWrite(_ batch: WriteBatch, on connection: Connection) async throws -> (WriteBatchResult, [OwnershipClaim]) {
        let clock = ContinuousClock()
        var phases = WritePhases()
        var started = clock.now
        var work = try await DecidingBatch.load(batch, writer: self, on: connection)
        phases.read = clock.now - started
        if let afterRead { try await afterRead(batch.commands.map(\.subscriberID)) }
        started = clock.now
        let now = self.now()
        for (index, command) in batch.commands.enumerated() {
            let decision: Decision
            do {
                decision = try work.decide(command, decider: decider, now: now)
            } catch {
                Self.factsRejected.increment()
                if batch.refusals == .abortAll { throw error }
                work.outcomes[index] = .rejected(error)
                continue
            }
            if decision.isDuplicate {
                Self.factsDuplicate.increment()
                work.outcomes[index] = .duplicate(position: decision.duplicatePosition ?? 0)
                continue
            }
            for transfer in decision.transfers where !work.hasStream(transfer.fromSubscriberID) {
                work.add(try await SubscriberSnapshots.load(transfer.fromSubscriberID, cache: ledgerCache, use: .take, on: connection))
            }
            work.apply(decision, of: index, for: command.subscriberID, now: now)
        }
        let appends = try work.appends(sources: batch.commands.map(\.source))
        phases.decide = clock.now - started
        guard !appends.isEmpty || batch.alongside != nil else {
            var result = await resultKeepingLedgers(&work, appends: [], results: [], now: now, on: connection)
            result.phases = phases
            return (result, [])
        }
        started = clock.now
        let claims = work.claims
        // New subscribers' keys commit with their first events.
        let ownership = [SubscriberKeys.insertQuery(work.newKeys)].compactMap { $0 }
            + OwnershipStore.statements(claims: claims)
        let results: [StreamAppendResult]
        do {
            if let alongside = batch.alongside {
                // Rows written by a closure: an explicit transaction around it.
                results = try await connection.withTransaction { connection in
                    let results = try await store.append(appends, on: connection)
                    for statement in ownership { try await connection.query(statement) }
                    try await alongside(connection)
                    return results
                }
                store.wakeConsumers()
            } else {
                results = try await store.append(appends, beside: ownership, on: connection)
            }
        } catch let error as PostgresError where error.sqlState == OwnershipStore.ownershipChanged {
            throw OwnershipChanged()
        }
        phases.commit = clock.now - started
        var result = await resultKeepingLedgers(&work, appends: appends, results: results, now: now, on: connection)
        result.phases = phases
        return (result, claims)
    }

    /// The result of a batch after its commit (or of one that wrote nothing):
    /// snapshots stored for streams whose tail reached the interval, after
    /// the commit, so a snapshot never runs ahead of what committed (a lost
    /// one is only a longer tail to read next time); with a ledger cache,
    /// the ledgers kept in it and the snapshots stored in the background.
    private func resultKeepingLedgers(_ work: inout DecidingBatch, appends: [StreamAppend], results: [StreamAppendResult], now: Date,
                        on connection: Connection) async -> WriteBatchResult {
        var (result, ledgers) = work.result(appendResults: results, appends: appends,
                                               exactFrom: ledgerCache?.minimumVersion ?? .max, now: now)
        if let ledgerCache {
            // Served from memory: the snapshot only matters to a reader
            // without this cache, so it is stored off the request path.
            for ledger in ledgers { ledgerCache.keep(ledger) }
            let due = ledgers.filter(\.isSnapshotDue)
            if !due.isEmpty { ledgerCache.saveSnapshots(due, pool: pool, logger: logger) }
            return result
        }
        let due = ledgers.indices.filter { ledgers[$0].isSnapshotDue }
        if !due.isEmpty {
            do {
                try await SubscriberSnapshots.save(due.map { ledgers[$0] }, on: connection)
                for index in due { ledgers[index].snapshotVersion = ledgers[index].version }
            } catch {
                logger.warning("storing snapshots failed", metadata: ["error": "\(error)"])
            }
        }
        return result
    }

    static let factsRecorded = Counter(label: "subledger_facts_total", dimensions: [("outcome", "recorded")])
    static let factsDuplicate = Counter(label: "subledger_facts_total", dimensions: [("outcome", "duplicate")])
    static let factsRejected = Counter(label: "subledger_facts_total", dimensions: [("outcome", "rejected")])
    static let retries = Counter(label: "subledger_fact_retries_total")
    static let exhausted = Counter(label: "subledger_fact_retries_exhausted_total")
    static let failoverRetries = Counter(label: "subledger_write_failover_retries_total")
}

extension LedgerError {
    /// A fact whose values the database cannot store.
    static func databaseRefused(_ error: PostgresError) -> LedgerError {
        LedgerError(kind: .badRequest, code: .invalidField,
                    message: "The database cannot store a value of this fact (SQLSTATE \(error.sqlState?.rawValue ?? "?")): \(error.message)")
    }
}
