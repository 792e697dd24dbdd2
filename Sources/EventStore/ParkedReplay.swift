import Foundation
import Postgres

/// What replaying a parked event did.
public enum ParkedReplay: Sendable {
    /// The handler took it: the read model has it and it is no longer parked.
    case replayed(RecordedEvent)
    /// The handler refused it again: it stays parked, with this error as its reason.
    case failed(RecordedEvent, reason: String)
    /// Nothing of that consumer is parked at that position.
    case notParked
}

extension EventStore {
    /// Retries one event a consumer set aside (`park`), once its cause is
    /// fixed. In one transaction that holds the consumer's checkpoint row, so
    /// it takes turns with the live runner: the handler gets the event alone,
    /// and the parked row goes with its success. A refusal leaves it parked
    /// with the new reason; a database outage is thrown, not recorded.
    ///
    /// Handlers are idempotent per event (a rebuild replays everything), so an
    /// event whose effect later events already carried changes nothing.
    public func replayParked(_ consumer: some EventConsumer, position: Int64) async throws -> ParkedReplay {
        try await pool.withConnection { connection in
            let rows = try await connection.query("""
                SELECT \(unsafeRaw: Self.columns) FROM \(unsafeRaw: Self.eventsWithStreams)
                WHERE e.position = \(position)
                  AND EXISTS (SELECT 1 FROM consumer_parked_events p WHERE p.consumer = \(consumer.name) AND p.position = \(position))
                """)
            guard let event = try rows.first.map(Self.decode) else { return .notParked }
            do {
                let replayed = try await connection.withTransaction { connection in
                    _ = try await checkpoint(of: consumer.name, on: connection, lock: true)
                    let parked = try await connection.query("""
                        DELETE FROM consumer_parked_events WHERE consumer = \(consumer.name) AND position = \(position) RETURNING 1
                        """)
                    guard !parked.rows.isEmpty else { return false }
                    try await consumer.handle([event], on: connection)
                    return true
                }
                return replayed ? .replayed(event) : .notParked
            } catch where ConsumerRunner.isEventProblem(error, connection: connection) {
                let reason = "replay: \(String(reflecting: error))"
                try await connection.query("""
                    UPDATE consumer_parked_events SET reason = \(reason) WHERE consumer = \(consumer.name) AND position = \(position)
                    """)
                return .failed(event, reason: reason)
            }
        }
    }
}
