import EventStore
import Foundation
import Ledger
import Logging
import Metrics
import Postgres
import ServiceLifecycle

/// Publishes the entitlement transitions that happen by time alone (an
/// expiry at `expiresDate`, a grace end, a period end) when their instant
/// passes, as a `Service`; any number of instances may run.
///
/// Each round locks the subscribers whose `next_transition_at` has passed
/// `FOR UPDATE SKIP LOCKED` (so two sweepers, or a sweeper and the feed's
/// consumer, never work on one subscriber at once), folds their ledger as of
/// the stream version the feed reached, and publishes the transitions at each
/// passed instant with ids from subscriber, entitlement, kind and instant;
/// `changes.id` is unique, so a transition is stored once whoever computes it.
public struct ChangeTimeSweeper: Service {
    public var interval: Duration
    public var batchSize = 200
    let pool: ConnectionPool
    let catalog: Catalog
    let logger: Logger
    let now: @Sendable () -> Date

    public init(pool: ConnectionPool, catalog: Catalog, interval: Duration = .seconds(15),
                logger: Logger = Logger(label: "subledger.changes.sweeper"), now: @escaping @Sendable () -> Date = { Date() }) {
        self.pool = pool
        self.catalog = catalog
        self.interval = interval
        self.logger = logger
        self.now = now
    }

    public func run() async throws {
        await repeatRounds(every: interval, logger: logger, failure: "change sweep failed; retrying next round") {
            while try await sweepOnce() >= batchSize {}
        }
    }

    /// One round; returns how many subscribers it moved on.
    @discardableResult
    public func sweepOnce() async throws -> Int {
        let now = self.now()
        return try await pool.withConnection { connection in
            try await connection.withTransaction { connection in
                let due = try await ChangeRows.lockDue(at: now, limit: batchSize, on: connection)
                guard !due.isEmpty else { return 0 }
                // The ledger as of the version the feed reached: the snapshot
                // below it and the events up to it (progress - 1 keeps the
                // replay query from skipping them).
                let through = due.mapValues(\.streamVersion)
                let read = try await connection.query(try SubscriberSnapshots.replayQuery(
                    due.keys.sorted().map { ($0, through[$0]!) },
                    progressTable: "(SELECT subscriber_id, stream_version - 1 AS stream_version, clock FROM change_subscribers)"))
                let replays = try await SubscriberSnapshots.replays(read, through: through, on: connection)
                var folds: [ChangeFold] = []
                for (subscriberID, progress) in due {
                    guard let replay = replays[subscriberID] else { continue }
                    var ledger = replay.ledger
                    for (_, event) in replay.events { ledger.apply(event) }
                    var fold = ChangeFold(ledger: ledger, progress: progress, catalog: catalog)
                    fold.advanceTime(until: now, recordedAt: now)
                    folds.append(fold)
                }
                try await ChangeRows.write(folds, on: connection)
                return folds.count
            }
        }
    }
}
