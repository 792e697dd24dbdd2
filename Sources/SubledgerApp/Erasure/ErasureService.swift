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
/// 2. locks the subscriber's key row (`FOR UPDATE`): every derived write
///    naming the subscriber by id holds that row `FOR KEY SHARE` until it
///    commits, so those in flight finish first and later ones find no key
///    (the audit, a table lock: `AuditStore.insert`);
/// 3. appends `erased` to the stream, expecting its version, so a write
///    that read the stream before fails its expected version, reads again
///    and is refused (410);
/// 4. runs `ErasureSteps.standard` (derived tables move to the pseudonym
///    or go);
/// 5. deletes the key: what it sealed in the log is unreadable from then on.
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
                let free = try await connection.query(
                    "SELECT pg_try_advisory_xact_lock(hashtextextended(\("rebuild:" + consumer), 0))").first?.decode(Bool.self, at: 0)
                guard free == true else {
                    throw ServiceError(.upstreamUnavailable, code: .contention,
                                       message: "a rebuild of \(consumer) is running; erase after it ends", retryAfter: .seconds(30))
                }
            }
            let keyRows = try await connection.query("SELECT key FROM subscriber_keys WHERE pseudonym = \(pseudonym) FOR UPDATE")
            // Audit batches in flight commit first; later ones see the erasure (`AuditStore.insert`).
            try await connection.query("LOCK TABLE audit_entries IN SHARE ROW EXCLUSIVE MODE")
            // Locked: a write that read the stream before waits, then fails its expected version.
            let version = try await connection.query("SELECT version FROM streams WHERE stream_id = \(streamID) FOR UPDATE")
                .first?.decode(Int64.self, at: 0) ?? 0
            guard let keyRow = keyRows.first else {
                throw version > 0 ? LedgerError.erasedSubscriber : SubscriberReader.notFound(subscriberID)
            }
            guard version > 0 else { throw SubscriberReader.notFound(subscriberID) }
            let key = try SubscriberKey(rawValue: try keyRow.decode(Data.self, at: 0))
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
    static let erasures = Counter(label: "subledger_erasures_total")
}
