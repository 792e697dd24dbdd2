import Foundation
import JSON
import Ledger
import Postgres

/// Events a consumer set aside after its handler kept refusing them
/// (`consumer_parked_events`, written by `EventStore.park`).
public struct ParkedEventStore: Sendable {
    let pool: ConnectionPool

    public init(pool: ConnectionPool) { self.pool = pool }

    /// One parked event: which consumer, which event, why and when.
    public struct Entry: Sendable, Encodable {
        public var consumer: String
        public var position: Int64
        public var streamId: String
        public var streamVersion: Int64
        public var type: String
        public var reason: String
        public var parkedAt: Date
        /// The subscriber whose stream holds the event, if it is a
        /// subscriber's (resolved from the stream's pseudonym while its key exists).
        public var subscriberId: String?

        public func encode(to encoder: any Encoder) throws {
            enum Keys: String, CodingKey { case consumer, position, streamId, streamVersion, subscriberId, type, reason, parkedAt }
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(consumer, forKey: .consumer)
            try container.encode(position, forKey: .position)
            try container.encode(streamId, forKey: .streamId)
            try container.encode(streamVersion, forKey: .streamVersion)
            try container.encode(subscriberId, forKey: .subscriberId)
            try container.encode(type, forKey: .type)
            try container.encode(reason, forKey: .reason)
            try container.encode(RFC3339.format(parkedAt), forKey: .parkedAt)
        }
    }

    /// Parked events, most recently parked first, of one consumer or all.
    public func list(consumer: String? = nil, limit: Int = 100) async throws -> [Entry] {
        try await pool.query("""
            SELECT p.consumer, p.position, p.stream_id, p.stream_version, p.type, p.reason, p.parked_at, k.subscriber_id
            FROM consumer_parked_events p
            LEFT JOIN subscriber_keys k ON starts_with(p.stream_id, \(SubscriberStreams.prefix))
                                       AND k.pseudonym = substr(p.stream_id, \(SubscriberStreams.prefix.count + 1))
            WHERE (\(consumer)::text IS NULL OR consumer = \(consumer))
            ORDER BY parked_at DESC, consumer, position DESC
            LIMIT \(limit)
            """).map { row in
            Entry(consumer: try row.decode(String.self, at: 0), position: try row.decode(Int64.self, at: 1),
                  streamId: try row.decode(String.self, at: 2), streamVersion: try row.decode(Int64.self, at: 3),
                  type: try row.decode(String.self, at: 4), reason: try row.decode(String.self, at: 5),
                  parkedAt: try row.decode(Date.self, at: 6), subscriberId: try row.decode(String?.self, at: 7))
        }
    }
}

extension ParkedEventStore {
    /// Erasure: events of an erased stream are not replayed; their parked
    /// entries, which name the stream, go.
    static let erasureStep = ErasureStep(name: "parked events") { subscriberID, pseudonym, connection in
        try await connection.query("""
            DELETE FROM consumer_parked_events
            WHERE stream_id = \(SubscriberStreams.streamID(for: subscriberID))
            """)
    }
}
