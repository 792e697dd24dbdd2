import Foundation
import Postgres
import Testing
import TestSupport
@testable import EventStore

/// sql/0039: a log written while events named their stream by id is
/// converted to stream numbers when the database is prepared, and reads,
/// appends and duplicates answer as before.
@Suite("Stream numbers conversion")
struct StreamNumberConversionTests {
    /// One event as the log holds it, with its stream by id.
    struct Stored: Equatable {
        var stream: String
        var position: Int64
        var version: Int64
        var id: String
        var data: String
        var transaction: String
    }

    static func stored(_ rows: PostgresRows) throws -> [Stored] {
        try rows.map {
            Stored(stream: try $0.decode(String.self, at: 0), position: try $0.decode(Int64.self, at: 1),
                   version: try $0.decode(Int64.self, at: 2), id: try $0.decode(String.self, at: 3),
                   data: try $0.decode(String.self, at: 4), transaction: try $0.decode(String.self, at: 5))
        }
    }

    @Test func aLogWrittenByStreamIDKeepsEveryEventAndAnswer() async throws {
        let conninfo = try await TestDatabase.make(migratedBefore: 39)
        let setup = try await Connection.connect(to: conninfo)
        defer { setup.close() }
        let all = try TestDatabase.migrations()

        // Thousands of events in 1,500 streams of 1 to 15 events, written by
        // the append function of the build before, in batches of 100 streams.
        let pool = ConnectionPool(configuration: PoolConfiguration(conninfo: conninfo, maximumConnections: 2))
        defer { Task { await pool.close() } }
        let store = EventStore(pool: pool)
        let streams = (0..<1_500).map { "stream-\($0)" }
        for chunk in stride(from: 0, to: streams.count, by: 100) {
            _ = try await store.append(streams[chunk..<chunk + 100].enumerated().map { offset, stream in
                StreamAppend(streamID: stream, events: (0..<(1 + (chunk + offset) % 15)).map { index in
                    event(value: index, key: "\(stream)/\(index)")
                })
            })
        }
        // An event whose stream has no row (written by hand): it gets one.
        try await setup.execute(unsafeSQL: """
            INSERT INTO events (stream_id, stream_version, event_id, type, data)
            VALUES ('by-hand', 1, gen_random_uuid(), 'happened', '{"value": 0}')
            """)
        let before = try Self.stored(try await setup.query("""
            SELECT stream_id, position, stream_version, coalesce(md5(idempotency_key)::uuid, event_id)::text, data::text,
                   transaction_id::text
            FROM events ORDER BY position
            """))
        let written = (0..<1_500).map { 1 + $0 % 15 }.reduce(0, +) + 1
        #expect(before.count == written)

        _ = try await Migrator(migrations: all).migrate(conninfo: conninfo)

        let after = try Self.stored(try await setup.query("""
            SELECT s.stream_id, e.position, e.stream_version, e.event_id::text, e.data::text, e.transaction_id::text
            FROM events e JOIN streams s ON s.number = e.stream_number ORDER BY e.position
            """))
        // One line for the first difference, not two lists of thousands.
        #expect(after.count == before.count)
        let changed = zip(before, after).first { $0 != $1 }
        #expect(changed == nil, "every event keeps its stream, position, version, data and transaction, and its key (as its id, sql/0044) or id: \(String(describing: changed))")
        let numbers = try await setup.query("SELECT count(DISTINCT number), count(*) FROM streams").first!
        let (distinctNumbers, rows) = (try numbers.decode(Int.self, at: 0), try numbers.decode(Int.self, at: 1))
        #expect(distinctNumbers == 1_501 && rows == 1_501)

        // Reads by id, as the service makes them.
        for stream in ["stream-0", "stream-14", "stream-1499", "by-hand"] {
            let read = try await store.readStream(stream)
            #expect(read.map(\.position) == before.filter { $0.stream == stream }.map(\.position))
            #expect(read.allSatisfy { $0.streamID == stream })
        }
        // The commit-order read stops below the oldest transaction running
        // anywhere in the cluster (other suites' too): wait for all of them.
        try await waitUntilVisible(store, before.count)
        let committed = try await store.readCommitted(after: .start, limit: before.count + 1)
        let named = committed.map(\.streamID) == before.map(\.stream)
        #expect(named, "the commit-order read names each event's stream: \(committed.count) of \(before.count) events read")

        // Appends go on from each stream's version; a stored key is a
        // duplicate answered with its stream, from any stream.
        let next = try await store.append(to: "stream-14", expected: .exact(15), events: [event(value: 99, key: "stream-14/new")])
        #expect(next.outcomes[0].streamVersion == 16 && !next.outcomes[0].isDuplicate)
        // (The functions of the build before stored the key's text as given:
        // here the digest this store sends, which sql/0044 digests once more,
        // as it does any key stored as text. A writer giving that text finds it.)
        let again = try await store.append(to: "stream-3", events: [event(key: EventStore.storedKey("stream-1499/0"))])
        let original = try #require(before.first { $0.stream == "stream-1499" && $0.version == 1 })
        #expect(again.outcomes == [AppendOutcome(position: original.position, streamVersion: 1, isDuplicate: true,
                                                 storedStreamID: "stream-1499")])
        // The version of a stream stays unique.
        await #expect(throws: PostgresError.self) {
            try await setup.execute(unsafeSQL: """
                INSERT INTO events (stream_number, stream_version, event_id, type, data)
                SELECT number, 1, gen_random_uuid(), 'happened', '{}' FROM streams WHERE stream_id = 'stream-0'
                """)
        }
    }
}
