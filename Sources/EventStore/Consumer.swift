import Foundation
import Logging
import Postgres

/// A read model fed from the event store.
///
/// `handle` runs inside the transaction that advances the consumer's
/// checkpoint, on the connection given: write the read model there and it
/// commits with the checkpoint, or neither does.
public protocol EventConsumer: Sendable {
    /// Unique name; the checkpoint's key.
    var name: String { get }
    /// The live consumers whose tables a rebuild of this one replaces: their
    /// rebuild locks are taken, and their checkpoints handed over. By default
    /// the consumer itself; one that folds several read models in one pass
    /// over the log (a rebuild only, never run live) names each of them.
    var members: [String] { get }
    /// Applies a batch of events, in commit order.
    func handle(_ events: [RecordedEvent], on connection: Connection) async throws
    /// Empties the read model (for a rebuild), in the rebuild's transaction.
    func reset(on connection: Connection) async throws
    /// Called after a rebuild replayed every event, in the same transaction:
    /// restore state the read model keeps that the events do not carry.
    func finishRebuild(on connection: Connection) async throws
}

extension EventConsumer {
    public var members: [String] { [name] }
    public func finishRebuild(on connection: Connection) async throws {}
}

extension EventStore {
    /// The checkpoint a consumer has reached (`.start` when it has none).
    public func checkpoint(of consumer: String) async throws -> Checkpoint {
        try await pool.withConnection { try await checkpoint(of: consumer, on: $0, lock: false) }
    }

    func checkpoint(of consumer: String, on connection: Connection, lock: Bool) async throws -> Checkpoint {
        if lock {
            try await connection.query("INSERT INTO consumer_checkpoints (name) VALUES (\(consumer)) ON CONFLICT DO NOTHING")
        }
        let rows = try await connection.query("""
            SELECT transaction_id::text, position FROM consumer_checkpoints WHERE name = \(consumer)
            \(unsafeRaw: lock ? "FOR UPDATE" : "")
            """)
        guard let row = rows.first else { return .start }
        return Checkpoint(transactionID: UInt64(try row.decode(String.self, at: 0)) ?? 0, position: try row.decode(Int64.self, at: 1))
    }

    func saveCheckpoint(_ checkpoint: Checkpoint, of consumer: String, on connection: Connection) async throws {
        try await connection.query("""
            UPDATE consumer_checkpoints
            SET transaction_id = \(String(checkpoint.transactionID))::xid8, position = \(checkpoint.position), updated_at = now()
            WHERE name = \(consumer)
            """)
    }

    /// Applies at most one batch for `consumer`: locks its checkpoint row,
    /// reads what follows, lets it handle the events and moves the checkpoint,
    /// all in one transaction. The row lock makes two runners take turns, so
    /// no event is applied twice even if two instances race. Returns how many
    /// events were handled.
    public func processBatch(_ consumer: some EventConsumer, limit: Int, on connection: Connection) async throws -> Int {
        try await connection.withTransaction { connection in
            let from = try await checkpoint(of: consumer.name, on: connection, lock: true)
            let events = try await readCommitted(after: from, limit: limit, on: connection)
            guard let last = events.last else { return 0 }
            try await consumer.handle(events, on: connection)
            try await saveCheckpoint(last.checkpoint, of: consumer.name, on: connection)
            return events.count
        }
    }

    /// Sets aside the next event the consumer has not handled: records it in
    /// `consumer_parked_events` with `reason` and moves the checkpoint past it,
    /// in one transaction. For an event the handler keeps refusing, so one bad
    /// event does not stall the consumer for every stream. Returns the event.
    public func park(_ consumer: some EventConsumer, reason: String, on connection: Connection) async throws -> RecordedEvent? {
        try await connection.withTransaction { connection in
            let from = try await checkpoint(of: consumer.name, on: connection, lock: true)
            guard let event = try await readCommitted(after: from, limit: 1, on: connection).first else { return nil }
            try await connection.query("""
                INSERT INTO consumer_parked_events (consumer, position, stream_id, stream_version, type, reason)
                VALUES (\(consumer.name), \(event.position), \(event.streamID), \(event.streamVersion), \(event.type), \(reason))
                ON CONFLICT DO NOTHING
                """)
            try await saveCheckpoint(event.checkpoint, of: consumer.name, on: connection)
            return event
        }
    }

    /// How many committed events the consumer has yet to handle.
    public func lag(of consumer: String) async throws -> Int64 {
        try await pool.withConnection { connection in
            let from = try await checkpoint(of: consumer, on: connection, lock: false)
            let rows = try await connection.query("""
                SELECT count(*) FROM events
                WHERE (transaction_id, position) > (\(String(from.transactionID))::xid8, \(from.position))
                """)
            return try rows.first?.decode(Int64.self, at: 0) ?? 0
        }
    }

    /// Empties the consumer's read model and replays every event into it, in
    /// one transaction and in batches of `batchSize`, so memory stays bounded
    /// whatever the log's length. Readers keep seeing the old read model until
    /// the rebuild commits; the live runner waits on the checkpoint row
    /// meanwhile, then goes on from where the rebuild stopped.
    @discardableResult
    public func rebuild(_ consumer: some EventConsumer, batchSize: Int = 1000,
                        progress: @Sendable (Int) -> Void = { _ in }) async throws -> Int {
        try await pool.withConnection { connection in
            try await connection.withTransaction { connection in
                // A consumer that stands for several (`members`) moves each one's checkpoint.
                let members = consumer.members.sorted()
                for member in members { _ = try await checkpoint(of: member, on: connection, lock: true) }
                try await consumer.reset(on: connection)
                var position = Checkpoint.start
                var total = 0
                while true {
                    let events = try await readCommitted(after: position, limit: batchSize, on: connection)
                    guard let last = events.last else { break }
                    try await consumer.handle(events, on: connection)
                    position = last.checkpoint
                    total += events.count
                    progress(total)
                }
                try await consumer.finishRebuild(on: connection)
                for member in members { try await saveCheckpoint(position, of: member, on: connection) }
                return total
            }
        }
    }
}
