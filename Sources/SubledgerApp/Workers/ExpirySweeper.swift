import EventStore
import Foundation
import Ledger
import Logging
import Postgres
import ServiceLifecycle

/// Appends Subledger's own `expired` events when a non-renewing coverage end
/// passes, as a `Service`.
///
/// The reminder projection keeps, per subscriber, the earliest coverage end
/// not yet recorded as expired; the sweeper reads the subscribers whose end
/// has passed, decides with `Coverage.dueExpiries` on their stream and appends
/// at the version it read. Any number of sweepers may run: the event's
/// idempotency key (`expiry:<group>@<end>`, scoped to the subscriber) lets only
/// the first copy in, and a concurrent write to the stream (a refund moving
/// the end) makes the append fail, to be decided again next round.
public struct ExpirySweeper: Service {
    public var interval: Duration
    /// Subscribers looked at per round.
    public var batchSize = 200
    let store: EventStore
    let catalog: Catalog
    let logger: Logger
    let now: @Sendable () -> Date

    public init(store: EventStore, catalog: Catalog, interval: Duration = .seconds(30),
                logger: Logger = Logger(label: "subledger.reminders.expiry-sweeper"),
                now: @escaping @Sendable () -> Date = { Date() }) {
        self.store = store
        self.catalog = catalog
        self.interval = interval
        self.logger = logger
        self.now = now
    }

    public func run() async throws {
        await repeatRounds(every: interval, logger: logger, failure: "expiry sweep failed; retrying next round") {
            try await sweepOnce()
        }
    }

    /// One round; returns how many expiry events it appended.
    @discardableResult
    public func sweepOnce() async throws -> Int {
        let now = self.now()
        let reminders = ReminderStore(pool: store.pool)
        let subscribers = try await reminders.subscribersWithExpiryDue(at: now, limit: batchSize)
        var appended = 0
        for subscriberID in subscribers {
            do {
                appended += try await sweep(subscriberID, now: now)
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                // One subscriber's unreadable history must not stop everyone's
                // expiries: set it aside for a while and go on with the others.
                ReminderMetrics.expirySweepFailures.increment()
                logger.error("expiry sweep of one subscriber failed; set aside", metadata: [
                    "subscriber.ref": "\(LogReference.subscriber(subscriberID))", "error": "\(String(reflecting: error))",
                    "expiry.retry_after": "\(Self.setAsideFor)",
                ])
                try await reminders.deferExpiry(of: subscriberID, until: now + Self.setAsideFor)
            }
        }
        return appended
    }

    /// How long a subscriber whose sweep failed waits before the next try.
    static let setAsideFor: TimeInterval = 3600

    /// Appends the subscriber's due expiry events; returns how many.
    private func sweep(_ subscriberID: String, now: Date) async throws -> Int {
        let streamID = SubscriberStreams.streamID(for: subscriberID)
        let history = try await SubscriberHistory.read(subscriberID, from: store)
        // An erased subscriber records nothing more (no key seals it).
        guard let key = history.key else { return 0 }
        let due = Coverage.dueExpiries(history: history.events, subscriberID: subscriberID, catalog: catalog, now: now)
        guard !due.isEmpty else { return 0 }
        do {
            let result = try await store.append(
                to: streamID, expected: .exact(history.version),
                events: try SubscriberStreams.newEvents(due, subscriberID: subscriberID, key: key, source: FactSource.subledger))
            let fresh = result.outcomes.filter { !$0.isDuplicate }.count
            ReminderMetrics.expiriesAppended.increment(by: fresh)
            if fresh > 0 {
                logger.info("coverage expired", metadata: ["subscriber.ref": "\(LogReference.subscriber(subscriberID))", "expiry.count": "\(fresh)"])
            }
            return fresh
        } catch is WrongExpectedVersion {
            logger.debug("stream moved while sweeping; next round decides again", metadata: ["subscriber.ref": "\(LogReference.subscriber(subscriberID))"])
            return 0
        }
    }
}
