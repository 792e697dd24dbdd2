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
///
/// Reminders are published here too: a pending reminder of the reminder
/// projection whose time has come becomes a change of its subscriber (id:
/// the reminder's), in the same round and under the same lock, so it takes
/// its place in the subscriber's `sequence` among the transitions.
public struct ChangeTimeSweeper: Service {
    /// The longest wait between rounds; a round also starts when the next
    /// known instant (a transition, a reminder) comes.
    public var interval: Duration
    public var batchSize = 200
    /// `SUBLEDGER_WEBHOOK_URL`, stored as an endpoint before the first round
    /// (nil: removed), so no reminder is published before it exists.
    public var reminderWebhook: ReminderWebhook?
    /// Where to listen for newly scheduled reminders (the reminder
    /// projection's NOTIFY), so that the next round starts at their due
    /// time; nil: rounds at `interval` and the known instants only.
    let conninfo: String?
    let pool: ConnectionPool
    let catalog: Catalog
    let logger: Logger
    let now: @Sendable () -> Date
    /// Tests: runs in each round between its reads and its writes.
    var afterRead: (@Sendable () async -> Void)?

    public init(pool: ConnectionPool, catalog: Catalog, interval: Duration = .seconds(15), reminderWebhook: ReminderWebhook? = nil,
                conninfo: String? = nil, logger: Logger = Logger(label: "subledger.changes.sweeper"),
                now: @escaping @Sendable () -> Date = { Date() }) {
        self.pool = pool
        self.conninfo = conninfo
        self.catalog = catalog
        self.interval = interval
        self.reminderWebhook = reminderWebhook
        self.logger = logger
        self.now = now
    }

    public func run() async throws {
        if reminderWebhook == nil {
            logger.notice("no webhook URL: reminders are published to the change feed, not sent to a reminder webhook")
        } else if reminderWebhook?.secret == nil {
            logger.warning("no webhook secret: reminders are sent without a Subledger-Signature header")
        }
        await cancelWhenGracefulShutdown {
            await runUntilCancelled()
        }
    }

    /// The loop, usable without a service group (tests): stores the reminder
    /// webhook, then rounds; between two, it waits until the next known
    /// instant (at most `interval`), or until a reminder is scheduled.
    public func runUntilCancelled() async {
        await repeatRounds(logger: logger, failure: "cannot store the reminder webhook; retrying", retryAfter: .seconds(1)) {
            try await ReminderWebhook.register(reminderWebhook, pool: pool)
            return nil
        }
        // A session on the listening connection; one that fails starts again a second later.
        await repeatRounds(logger: logger, failure: "change sweeper failed; retrying", retryAfter: .seconds(1)) {
            let listener = try await listen()
            defer { listener?.close() }
            try await repeatRounds(pause: { wait in
                guard let listener else { return try await Task.sleep(for: wait) }
                // A reminder scheduled meanwhile starts a round at once:
                // by the time this wakes it may be due already.
                _ = try await listener.waitForNotification(timeout: wait)
            }) {
                do {
                    while try await sweepOnce() >= batchSize {}
                } catch is CancellationError {
                    throw CancellationError()
                } catch {
                    logger.error("change sweep failed; retrying next round", metadata: ["error": "\(String(reflecting: error))"])
                }
                return try await untilNextInstant()
            }
            return .zero
        }
    }

    /// A connection listening for newly scheduled reminders; nil without `conninfo`.
    private func listen() async throws -> Connection? {
        guard let conninfo else { return nil }
        let connection = try await Connection.connect(to: conninfo, logger: logger)
        try await connection.listen(ReminderProjection.notificationChannel)
        return connection
    }

    /// Until the earliest known instant still to come (a transition by
    /// time, a reminder's due time), at most `interval`. One already passed
    /// that the round left (its subscriber held elsewhere, not yet reached
    /// by the feed) waits for the interval rather than spinning.
    func untilNextInstant() async throws -> Duration {
        let now = self.now()
        guard let seconds = try await ChangeRows.secondsUntilNextInstant(after: now, pool: pool), seconds.isFinite else { return interval }
        return min(interval, .milliseconds(Int64(max(0, seconds) * 1000) + 5))
    }

    /// Of the subscribers whose progress rows a round locked, those it may
    /// publish for: their key rows are locked `FOR KEY SHARE` until the
    /// round commits; one without a key (erased) or whose key an erasure
    /// holds is left out.
    ///
    /// Why no change naming an erased subscriber's id is written after its
    /// erasure rewrote the feed: a round publishes for a subscriber only
    /// while it holds that key row, and an erasure locks the row `FOR
    /// UPDATE` before it touches the feed (`ErasureService`). If the round
    /// took the row first, the erasure waits for the round's commit, and
    /// its statements rewriting `changes` and `webhook_deliveries` (each
    /// with a snapshot taken after the lock, in READ COMMITTED) see what
    /// the round wrote. If the erasure took it first, the round skips the
    /// subscriber (`SKIP LOCKED`) and writes nothing for it; a round after
    /// the commit finds no key row. The round does not wait for the key:
    /// it already holds the subscriber's progress row, which the erasure
    /// also rewrites, so waiting would be a deadlock (the change feed's
    /// consumer locks the key first, then the progress row, as the erasure
    /// does). The order of the statements in between does not matter.
    static func keyed(_ subscriberIDs: [String], on connection: Connection) async throws -> Set<String> {
        try await SubscriberKeys.holdKeysSkippingLocked(subscriberIDs, on: connection)
    }

    /// How late a reminder may still be published: one due longer ago (the
    /// service was down, or it is a first start on an old database) is
    /// `skipped`, as one already due when it was scheduled is.
    public static let reminderLateness: TimeInterval = 86_400

    /// One round; returns how many subscribers it moved on.
    @discardableResult
    public func sweepOnce() async throws -> Int {
        let now = self.now()
        return try await pool.withConnection { connection in
            try await connection.withTransaction { connection in
                try await connection.query(ChangeRows.skipStaleRemindersStatement(at: now, lateness: Self.reminderLateness))
                let locked = try await ChangeRows.lockDue(at: now, limit: batchSize, on: connection)
                guard !locked.isEmpty else { return 0 }
                let keyed = try await Self.keyed(locked.keys.sorted(), on: connection)
                let due = locked.filter { keyed.contains($0.key) }
                guard !due.isEmpty else { return 0 }
                // The ledger as of the version the feed reached: the snapshot
                // below it and the events up to it (progress - 1 keeps the
                // replay query from skipping them).
                let through = due.mapValues(\.streamVersion)
                let read = try await connection.query(try SubscriberSnapshots.replayQuery(
                    due.keys.sorted().map { ($0, through[$0]!) },
                    progressTable: ChangeRows.replayProgressTable))
                let replays = try await SubscriberSnapshots.replays(read, through: through, on: connection)
                let reminders = try await ChangeRows.dueReminders(of: due.keys.sorted(), at: now, on: connection)
                var folds: [ChangeFold] = []
                var published: [String] = []
                for (subscriberID, progress) in due {
                    guard let replay = replays[subscriberID] else { continue }
                    var ledger = replay.ledger
                    for (_, event) in replay.events { ledger.apply(event) }
                    var fold = ChangeFold(ledger: ledger, progress: progress, catalog: catalog)
                    for reminder in reminders[subscriberID] ?? [] {
                        fold.publish(reminder, at: min(reminder.dueAt, now), recordedAt: now)
                        published.append(reminder.id)
                    }
                    fold.advanceTime(until: now, recordedAt: now)
                    folds.append(fold)
                }
                await afterRead?()
                try await ChangeRows.write(folds, publishedReminders: published, on: connection)
                return folds.count
            }
        }
    }
}
