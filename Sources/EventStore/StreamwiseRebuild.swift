import Foundation
import Postgres

/// One stream's events, in version order.
public struct StreamEvents: Sendable {
    public var streamID: String
    public var events: [RecordedEvent]
}

/// A consumer whose read model is a function of each stream alone, not of
/// how streams interleave in commit order: it can be rebuilt stream by
/// stream (`EventStore.rebuildStreamwise`) — one index scan of the log in
/// (stream, version) order, each stream folded once in memory, rows written
/// in bulk — instead of replaying batch after batch in commit order.
public protocol StreamwiseConsumer: EventConsumer {
    associatedtype Rows: Sendable
    /// The streams it reads: those whose id starts with this.
    var streamPrefix: String { get }
    /// The rows of complete streams. Pure (no I/O): runs on any thread,
    /// several at once.
    func rows(for streams: [StreamEvents]) throws -> Rows
    /// Adds rows (of several parts of a chunk, folded apart) to the emptied
    /// read model, in the rebuild's transaction.
    func insert(_ parts: [Rows], on connection: Connection) async throws
}

extension EventStore {
    /// Rebuilds a streamwise consumer in one transaction, so readers keep
    /// the old rows until it commits and `serve` keeps answering meanwhile:
    ///
    /// 1. the consumer's checkpoint row is locked (the live runner waits),
    ///    the checkpoint it will get is taken (the last event of every
    ///    transaction already finished), and the read model is emptied;
    /// 2. a cursor reads the log in (stream, version) order in chunks of
    ///    `chunkSize` events, so memory stays flat whatever the log's length;
    /// 3. each chunk's complete streams are folded on `workers` tasks while
    ///    the previous chunk's rows are written and the next chunk is fetched
    ///    (the database and the fold each keep a core busy);
    /// 4. the checkpoint is saved. Events committed while it ran come after
    ///    that checkpoint and the runner applies them; any it also saw are
    ///    applied again, which a function of the stream tolerates.
    ///
    /// `progress` gets the number of events read so far.
    @discardableResult
    public func rebuildStreamwise<Consumer: StreamwiseConsumer>(
        _ consumer: Consumer, chunkSize: Int = 20_000, workers: Int = 2, progress: @Sendable (Int) -> Void = { _ in }
    ) async throws -> Int {
        try await pool.withConnection { connection in
            try await connection.withTransaction { connection in
                _ = try await checkpoint(of: consumer.name, on: connection, lock: true)
                let horizon = try await connection.query("""
                    SELECT transaction_id::text, position FROM events
                    WHERE transaction_id < pg_snapshot_xmin(pg_current_snapshot())
                    ORDER BY transaction_id DESC, position DESC LIMIT 1
                    """).first
                let checkpoint = try horizon.map {
                    Checkpoint(transactionID: UInt64(try $0.decode(String.self, at: 0)) ?? 0, position: try $0.decode(Int64.self, at: 1))
                } ?? .start
                try await consumer.reset(on: connection)
                let prefix = consumer.streamPrefix.replacingOccurrences(of: "'", with: "''")
                try await connection.query("""
                    DECLARE streamwise_rebuild NO SCROLL CURSOR FOR
                    SELECT position, stream_id, stream_version, type, schema_version, data::text, transaction_id::text, recorded_at
                    FROM events WHERE starts_with(stream_id, '\(unsafeRaw: prefix)')
                    ORDER BY stream_id, stream_version
                    """)
                let fetch: PostgresQuery = "FETCH FORWARD \(unsafeRaw: String(chunkSize)) FROM streamwise_rebuild"
                var chunker = StreamChunker()
                let first = try await connection.query(fetch)
                var chunk = try chunker.add(first, isLast: first.count < chunkSize)
                var pending: [Consumer.Rows] = []
                var total = 0
                while true {
                    total += chunk.events
                    progress(total)
                    // Fold this chunk while the last one's rows go in and the next one comes out.
                    let streams = chunk.streams
                    async let folded = Self.fold(streams, consumer: consumer, workers: workers)
                    if !pending.isEmpty { try await consumer.insert(pending, on: connection) }
                    let next = chunk.isLast ? nil : try await connection.query(fetch)
                    pending = try await folded
                    guard let next else { break }
                    chunk = try chunker.add(next, isLast: next.count < chunkSize)
                }
                if !pending.isEmpty { try await consumer.insert(pending, on: connection) }
                try await connection.query("CLOSE streamwise_rebuild")
                try await consumer.finishRebuild(on: connection)
                try await saveCheckpoint(checkpoint, of: consumer.name, on: connection)
                return total
            }
        }
    }

    /// The rows of `streams`, folded in `workers` parts at once.
    private static func fold<Consumer: StreamwiseConsumer>(_ streams: [StreamEvents], consumer: Consumer,
                                                           workers: Int) async throws -> [Consumer.Rows] {
        guard !streams.isEmpty else { return [] }
        let size = (streams.count + max(1, workers) - 1) / max(1, workers)
        let slices = stride(from: 0, to: streams.count, by: size).map { Array(streams[$0..<min($0 + size, streams.count)]) }
        if slices.count == 1 { return [try consumer.rows(for: slices[0])] }
        return try await withThrowingTaskGroup(of: (Int, Consumer.Rows).self) { group in
            for (index, slice) in slices.enumerated() {
                group.addTask { (index, try consumer.rows(for: slice)) }
            }
            var results = [(Int, Consumer.Rows)]()
            for try await result in group { results.append(result) }
            return results.sorted { $0.0 < $1.0 }.map(\.1)
        }
    }
}

/// Cuts fetched rows into complete streams, carrying a stream that may go
/// on into the next fetch.
struct StreamChunker {
    struct Chunk: Sendable {
        var streams: [StreamEvents]
        var events: Int
        var isLast: Bool
    }

    private var carried: StreamEvents?

    mutating func add(_ rows: PostgresRows, isLast: Bool) throws -> Chunk {
        var streams: [StreamEvents] = []
        var current = carried
        carried = nil
        for row in rows {
            let event = try Self.decode(row)
            if current?.streamID != event.streamID {
                if let current { streams.append(current) }
                current = StreamEvents(streamID: event.streamID, events: [])
            }
            current!.events.append(event)
        }
        if let current {
            if isLast { streams.append(current) } else { carried = current }
        }
        return Chunk(streams: streams, events: rows.count, isLast: isLast)
    }

    /// The rebuild does not read event ids, metadata or keys.
    static let noEventID = UUID(uuidString: "00000000-0000-0000-0000-000000000000")!

    static func decode(_ row: PostgresRow) throws -> RecordedEvent {
        RecordedEvent(
            position: try row.decode(Int64.self, at: 0), streamID: try row.decode(String.self, at: 1),
            streamVersion: try row.decode(Int64.self, at: 2), eventID: Self.noEventID,
            type: try row.decode(String.self, at: 3), schemaVersion: try row.decode(Int.self, at: 4),
            data: Data(try row.decode(String.self, at: 5).utf8), metadata: EventMetadata(), idempotencyKey: nil,
            transactionID: UInt64(try row.decode(String.self, at: 6)) ?? 0, recordedAt: try row.decode(Date.self, at: 7))
    }
}
