import Foundation
import Postgres
import Testing
import TestSupport
@testable import EventStore

/// sql/0044 writes `events` once more as a new table: a log whose positions
/// have passed a power of ten keeps them, its keys become its events' ids,
/// and appends go on after the last position and version.
@Suite("The log rewritten by sql/0044")
struct LogRewriteTests {
    @Test func positionsKeysAndVersionsGoOnPastAPowerOfTen() async throws {
        let conninfo = try await TestDatabase.make(migratedBefore: 44)
        let setup = try await Connection.connect(to: conninfo)
        defer { setup.close() }
        let all = try TestDatabase.migrations()

        // As the build before stored them: keys as text, positions of a
        // long-lived log crossing 10^10, a stream's version in its row.
        try await setup.execute(unsafeSQL: """
            SELECT setval(pg_get_serial_sequence('events', 'position'), 9999999997);
            INSERT INTO streams (stream_id, version) VALUES ('a', 2), ('b', 1);
            INSERT INTO events (stream_number, stream_version, event_id, type, data, idempotency_key)
            SELECT s.number, v.version, gen_random_uuid(), 'happened', '{"value": 1}', v.key
            FROM (VALUES ('a', 1, 'fact-1', 1), ('a', 2, NULL, 2), ('b', 1, 'fact-2', 3)) AS v(stream, version, key, ord)
            JOIN streams s ON s.stream_id = v.stream ORDER BY v.ord;
            """)
        let before = try await setup.query("SELECT position, event_id::text, idempotency_key FROM events ORDER BY position")
            .map { (try $0.decode(Int64.self, at: 0), try $0.decode(String.self, at: 1), try $0.decode(String?.self, at: 2)) }
        #expect(before.map(\.0) == [9_999_999_998, 9_999_999_999, 10_000_000_000])

        _ = try await Migrator(migrations: all).migrate(conninfo: conninfo)

        let after = try await setup.query("SELECT position, event_id::text FROM events ORDER BY position")
            .map { (try $0.decode(Int64.self, at: 0), try $0.decode(String.self, at: 1)) }
        #expect(after.map(\.0) == before.map(\.0), "positions stay")
        #expect(after.map(\.1) == before.map { $0.2.map(EventStore.storedKey) ?? $0.1 },
                "a keyed event's id is its key's digest; another keeps its id")

        let pool = ConnectionPool(configuration: PoolConfiguration(conninfo: conninfo, maximumConnections: 2))
        defer { Task { await pool.close() } }
        for mode in BatchAppend.both {
            let store = EventStore(pool: pool, batchAppend: mode)
            #expect(try await store.event(withIdempotencyKey: "fact-1")?.position == 9_999_999_998)
            // A stored key is a duplicate from any stream.
            let again = try await store.append(to: "c", events: [event(value: 2, key: "fact-2")])
            #expect(again.outcomes == [AppendOutcome(position: 10_000_000_000, streamVersion: 1, isDuplicate: true, storedStreamID: "b")])
        }
        // Versions go on from each stream's last event; positions from the sequence.
        let store = EventStore(pool: pool, batchAppend: .setBased)
        #expect(try await store.streamVersion("a") == 2)
        #expect(try await store.streamVersion("b") == 1)
        #expect(try await store.streamVersion("c") == 0)
        await #expect(throws: WrongExpectedVersion.self) {
            try await store.append(to: "a", expected: .exact(1), events: [event(value: 3)])
        }
        let next = try await store.append([StreamAppend(streamID: "a", expected: .exact(2), events: [event(value: 3, key: "fact-3")]),
                                           StreamAppend(streamID: "b", expected: .exact(1), events: [event(value: 4)])])
        #expect(next.map { $0.outcomes[0].streamVersion } == [3, 2])
        #expect(next.map { $0.outcomes[0].position } == [10_000_000_001, 10_000_000_002])
        let byEventStore = EventStore(pool: pool, batchAppend: .eventByEvent)
        let last = try await byEventStore.append(to: "a", expected: .exact(3), events: [event(value: 5)])
        #expect(last.outcomes[0].streamVersion == 4 && last.outcomes[0].position == 10_000_000_003)
        #expect(try await store.readStream("a").map(\.streamVersion) == [1, 2, 3, 4])
    }
}
