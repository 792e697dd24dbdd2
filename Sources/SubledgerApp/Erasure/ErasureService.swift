import EventStore
import Foundation
import JSON
import Ledger
import Logging
import Metrics
import Postgres

/// Erases a subscriber (`DELETE /v1/subscribers/{id}`) by crypto-shredding
/// (docs/decisions/0004-erasure-by-crypto-shredding.md), in one transaction:
///
/// 1. waits for no rebuild to be loading (a rebuild folds streams with the
///    keys it read when it started; 503 while one runs);
/// 2. stops the subscriber's webhook deliveries and waits for those a
///    dispatcher is posting (`ChangeRows.settleDeliveries`: no POST naming
///    the subscriber may start after the commit);
/// 3. locks the subscriber's key row (`FOR UPDATE`): every derived write
///    naming the subscriber by id holds that row `FOR KEY SHARE` until it
///    commits, so those in flight finish first and later ones find no key
///    (the time sweeper skips a subscriber whose row is locked:
///    `ChangeTimeSweeper`); settles the deliveries again, none can be made
///    from here on;
/// 4. appends `erased` to the stream, expecting its version, so a write
///    that read the stream before fails its expected version, reads again
///    and is refused (410);
/// 5. runs `ErasureSteps.standard` (derived tables move to the pseudonym
///    or go); the audit's step is last and locks its table against audit
///    batches (`AuditStore.insert`) only from there to the commit;
/// 6. deletes the key: what it sealed in the log is unreadable from then on.
///
/// Then drops the subscriber from this instance's ledger cache; another
/// instance's cached ledger is read again when the stream's version moves,
/// and a stream without a key is refused there too.
public struct ErasureService: Sendable {
    let pool: ConnectionPool
    let store: EventStore
    let ledgers: LedgerCache?
    let logger: Logger
    var steps = ErasureSteps.standard
    /// How long the erasure waits for webhook deliveries of the subscriber
    /// that a dispatcher is posting (at most its request timeout, or its
    /// lease if it died) before it answers 503.
    var deliveryWait: Duration = .seconds(30)
    /// The clock; tests may pin it.
    public var now: @Sendable () -> Date = { Date() }

    public init(_ dependencies: AppDependencies) {
        pool = dependencies.pool
        store = dependencies.store
        ledgers = dependencies.ledgers
        logger = dependencies.logger
    }

    /// What an erasure answers.
    public struct Result: Sendable, Encodable {
        public var subscriberId: String
        public var erasedAt: Date
        public var position: Int64
    }

    /// The consumers a streamwise rebuild of which excludes an erasure.
    static let rebuilt = [SubscriptionProjection.consumerName, ReminderProjection.consumerName]

    public func erase(_ subscriberID: String, request: ErasureRequest, by actor: ActorStamp) async throws -> Result {
        let subscriberID = try InputLimits.validateSubscriberID(subscriberID)
        let pseudonym = SubscriberPseudonyms.pseudonym(for: subscriberID)
        let streamID = SubscriberStreams.streamID(for: subscriberID)
        let date = RFC3339.date(milliseconds: RFC3339.milliseconds(of: now()))
        let position: Int64 = try await pool.withTransaction { connection in
            for consumer in Self.rebuilt {
                guard try await connection.tryLockForTransaction(.rebuild(consumer)) else {
                    throw ServiceError(.upstreamUnavailable, code: .contention,
                                       message: "a rebuild of \(consumer) is running; erase after it ends", retryAfter: .seconds(30))
                }
            }
            // Before the key row is locked: the wait does not hold the writers that lock it.
            try await settleDeliveries(subscriberID, pseudonym: pseudonym, on: connection)
            let storedKey = try await SubscriberKeys.lockKeyForErasure(pseudonym: pseudonym, on: connection)
            // Before the stream is locked: recording a reminder's outcome appends to it.
            try await settleDeliveries(subscriberID, pseudonym: pseudonym, on: connection)
            // Locked: a write that read the stream before waits, then fails its expected version.
            let version = try await SubscriberKeys.lockStreamVersion(streamID: streamID, on: connection)
            guard let storedKey else {
                let erased = try await version > 0 ? true : StreamNaming.isErasedUnderEarlierName(subscriberID, on: connection)
                throw erased ? LedgerError.erasedSubscriber : SubscriberReader.notFound(subscriberID)
            }
            guard version > 0 else { throw SubscriberReader.notFound(subscriberID) }
            let key = try SubscriberKey(rawValue: storedKey)
            let event = LedgerEvent.erased(SubscriberErasure(date: date, reason: request.reason, erasedBy: actor, source: FactSource.api))
            let appended = try await store.append(
                [StreamAppend(streamID: streamID, expected: .exact(version),
                              events: try SubscriberStreams.newEvents([event], subscriberID: subscriberID, key: key, source: FactSource.api))],
                on: connection)
            try await steps.run(subscriberID: subscriberID, pseudonym: pseudonym, on: connection)
            _ = try await SubscriberKeys.destroyKey(pseudonym: pseudonym, on: connection)
            return appended[0].outcomes[0].position
        }
        ledgers?.forget([subscriberID])
        store.wakeConsumers()
        Self.erasures.increment()
        logger.notice("subscriber erased", metadata: ["subscriber.ref": "\(LogReference.subscriber(subscriberID))"])
        return Result(subscriberId: subscriberID, erasedAt: date, position: position)
    }
}

extension ErasureService {
    private func settleDeliveries(_ subscriberID: String, pseudonym: String, on connection: Connection) async throws {
        guard try await ChangeRows.settleDeliveries(of: subscriberID, pseudonym: pseudonym, timeout: deliveryWait, on: connection) else {
            throw ServiceError(.upstreamUnavailable, code: .contention,
                               message: "a webhook delivery of the subscriber is being sent; erase after it ends", retryAfter: .seconds(60))
        }
    }

    static let erasures = Counter(label: "subledger_erasures_total")
}
