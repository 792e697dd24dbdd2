import EventStore
import Foundation
import HTTPAPI
import Hummingbird
import HummingbirdTesting
import Ledger
@testable import SubledgerApp
import SubledgerAppTesting
import TestSupport
import Testing

@Suite("Ledger snapshots")
struct SnapshotServiceTests {
    /// Thousands of renewals: the writer stores snapshots as it goes, and
    /// every answer (now, past instants, explanations, the next write) is the
    /// same with the snapshot, without it, and with a damaged one.
    @Test func aLongHistoryAnswersTheSameWithAndWithoutItsSnapshot() async throws {
        try await withApp { client, dependencies in
            let writer = LedgerWriter(dependencies)
            let start = date("2024-01-01T00:00:00Z")
            func renewal(_ index: Int) -> WriteCommand {
                let at = start + Double(index) * 3600
                let request: FactRequest = index == 0
                    ? .purchase(.init(transactionID: "r0", productID: "com.example.pro.monthly", purchaseDate: at, expiresDate: at + 3600))
                    : .renewal(.init(transactionID: "r\(index)", originalTransactionID: "r0", productID: "com.example.pro.monthly",
                                     purchaseDate: at, expiresDate: at + 3600))
                return .fact(request, subscriberID: "long")
            }
            for chunk in stride(from: 0, to: 2000, by: 250) {
                _ = try await writer.write(WriteBatch((chunk..<(chunk + 250)).map(renewal)))
            }
            // Due once the tail is an eighth of the 2,000 events of the last snapshot.
            for index in 2000..<2260 { _ = try await writer.write(WriteBatch([renewal(index)])) }
            // Stored off the request path.
            await dependencies.ledgers.snapshotsSaved()
            let pool = dependencies.pool
            let stored = try await pool.query("SELECT stream_version FROM subscriber_snapshots WHERE subscriber_id = 'long'")
            let snapshotVersion = try #require(try stored.first?.decode(Int64.self, at: 0))
            // Saves run in the background and one under way for a subscriber
            // is not queued behind: which version was stored depends on their
            // timing, but one was stored during the single writes, and the
            // tail after it is shorter than what makes a snapshot due.
            #expect(snapshotVersion > 2000 && 2260 - snapshotVersion < max(SubscriberSnapshots.interval, snapshotVersion / 8),
                    "stored at \(snapshotVersion)")

            let queries = ["/v1/subscribers/long", "/v1/subscribers/long?at=2024-01-05T10:30:00Z",
                           "/v1/subscribers/long?at=2024-03-01T00:00:00Z", "/v1/subscribers/long/explain?at=2024-02-01T00:00:00Z",
                           "/v1/subscribers/long?at=2023-12-31T00:00:00Z"]
            func answers() async throws -> [String] {
                var texts: [String] = []
                for query in queries {
                    let response = try await client.get(query, key: Keys.support)
                    #expect(response.status == .ok, "\(query)")
                    // `at` defaults to the request time; drop it for the comparison.
                    texts.append(response.text.replacingOccurrences(of: #""at":"[^"]*""#, with: "", options: .regularExpression))
                }
                return texts
            }
            let withSnapshot = try await answers()
            #expect(withSnapshot[1].contains(#""status":"active""#))
            try await pool.query("DELETE FROM subscriber_snapshots")
            try await pool.query("DELETE FROM subscriber_state_cache")
            // As a process that starts now would: nothing in memory.
            dependencies.ledgers.removeAll()
            #expect(try await answers() == withSnapshot)
            // A read with a long tail stores a snapshot again.
            #expect(try await pool.query("SELECT 1 FROM subscriber_snapshots WHERE subscriber_id = 'long'").count == 1)
            try await pool.query("UPDATE subscriber_snapshots SET ledger = '\\x0102'::bytea")
            try await pool.query("DELETE FROM subscriber_state_cache")
            dependencies.ledgers.removeAll()
            #expect(try await answers() == withSnapshot)
            // ...and a damaged one is replaced by the first read that meets it.
            let repaired = try await pool.query("SELECT length(ledger) FROM subscriber_snapshots WHERE subscriber_id = 'long'")
            #expect(try repaired.first?.decode(Int.self, at: 0) ?? 0 > 1000)

            // Writes decide from the snapshot: a duplicate of an old fact is still one.
            let again = try await writer.record(.renewal(.init(
                transactionID: "r5", originalTransactionID: "r0", productID: "com.example.pro.monthly",
                purchaseDate: start + 5 * 3600, expiresDate: start + 6 * 3600)), subscriberID: "long")
            #expect(again.isDuplicate)
            let whole = try await dependencies.ledger(of: "long")
            let loaded = try await pool.withConnection { try await SubscriberSnapshots.load("long", on: $0) }
            let kept = try await pool.withConnection { try await SubscriberSnapshots.load("long", cache: dependencies.ledgers, on: $0) }
            #expect(dependencies.ledgers.count.ledgers == 1)
            #expect(kept.ledger == whole && kept.version == 2260)
            #expect(loaded.ledger == whole)
            #expect(loaded.version == 2260)
        }
    }

    /// The state computed for "now" is served again until the stream moves,
    /// the catalog changes or the clock reaches the next change.
    @Test func theCurrentStateIsCachedUntilSomethingCanChangeIt() async throws {
        let dependencies = try await makeDependencies()
        defer { Task { await dependencies.pool.close() } }
        let writer = LedgerWriter(dependencies)
        let bought = date("2025-05-01T00:00:00Z")
        _ = try await writer.record(.purchase(.init(transactionID: "c1", productID: "com.example.pass.30d", purchaseDate: bought)),
                                    subscriberID: "cached")
        var reader = SubscriberReader(dependencies)
        reader.now = { date("2025-05-10T00:00:00Z") }
        reader.cacheFromVersion = 1
        let first = try await reader.state(of: "cached")
        let stored = try await dependencies.pool.query("SELECT valid_until FROM subscriber_state_cache WHERE subscriber_id = 'cached'")
        #expect(try stored.first?.decode(Date?.self, at: 0) == bought + 30 * 86_400)
        // Marked, to tell a cached answer from a computed one.
        try await dependencies.pool.query("UPDATE subscriber_state_cache SET state = replace(state, '\"pass\"', '\"cached-pass\"')")

        reader.now = { date("2025-05-20T00:00:00Z") }
        let served = try await reader.state(of: "cached")
        #expect(served.subscriptions.first?.group == "cached-pass")
        #expect(served.at == date("2025-05-20T00:00:00Z"))
        #expect(try await reader.state(of: "cached", at: date("2025-05-20T00:00:00Z")).subscriptions.first?.group == "pass",
                "an explicit instant is never served from the cache")

        reader.now = { date("2025-05-31T00:00:01Z") }  // past the period's end
        let expired = try await reader.state(of: "cached")
        #expect(expired.subscriptions.first?.group == "pass" && expired.subscriptions.first?.status == .expired)
        #expect(expired.entitlements.first?.active == false)

        try await dependencies.pool.query("UPDATE subscriber_state_cache SET state = replace(state, '\"pass\"', '\"cached-pass\"')")
        _ = try await writer.record(.purchase(.init(transactionID: "c2", productID: "com.example.level2", purchaseDate: bought)),
                                    subscriberID: "cached")
        let afterWrite = try await reader.state(of: "cached")
        #expect(afterWrite.subscriptions.first?.group == "pass", "a new event makes the cached state stale")
        #expect(afterWrite.purchases.map(\.transactionID) == ["c2"])
        #expect(first.subscriptions.first?.status == .active)

        try await dependencies.pool.query("UPDATE subscriber_state_cache SET state = replace(state, '\"pass\"', '\"cached-pass\"')")
        let otherCatalog = try Catalog.decode(from: Data(exampleCatalogJSON.replacingOccurrences(of: "\"P30D\"", with: "\"P31D\"").utf8))
        var other = SubscriberReader(store: dependencies.store, catalog: otherCatalog)
        other.now = reader.now
        other.cacheFromVersion = 1
        #expect(try await other.state(of: "cached").subscriptions.first?.group == "pass", "another catalog computes again")
    }

    /// A projection's replay starts from the stored snapshot and stops at
    /// the batch's last version (`through`); a snapshot it cannot read is
    /// replaced by the stream from its start, stopped at the same version:
    /// what was written after the batch was read is the next batch's.
    @Test func aReplayPastAnUnreadableSnapshotStopsAtTheBatchsLastVersion() async throws {
        let dependencies = try await makeDependencies()
        defer { Task { await dependencies.pool.close() } }
        let writer = LedgerWriter(dependencies)
        let start = date("2024-01-01T00:00:00Z")
        _ = try await writer.record(.purchase(.init(transactionID: "q0", productID: "com.example.pro.monthly", purchaseDate: start,
                                                    expiresDate: start + 3600)), subscriberID: "replayed")
        for index in 1..<6 {
            let at = start + Double(index) * 3600
            _ = try await writer.record(.renewal(.init(transactionID: "q\(index)", originalTransactionID: "q0",
                                                       productID: "com.example.pro.monthly", purchaseDate: at, expiresDate: at + 3600)),
                                        subscriberID: "replayed")
        }
        let pool = dependencies.pool
        let events = try await dependencies.store.readStream(SubscriberStreams.streamID(for: "replayed")).map(SubscriberStreams.ledgerEvent)
        #expect(events.count == 6)
        // The change feed has applied versions 1 and 2, and a snapshot of them is stored.
        let atTwo = SubscriberLedger(subscriberID: "replayed", events: Array(events.prefix(2)))
        try await pool.query("""
            INSERT INTO subscriber_snapshots (subscriber_id, stream_version, format, ledger)
            VALUES ('replayed', 2, \(SubscriberLedger.snapshotFormat), \(atTwo.snapshotData()))
            ON CONFLICT (subscriber_id) DO UPDATE SET stream_version = 2, format = excluded.format, ledger = excluded.ledger
            """)
        try await pool.query("INSERT INTO change_subscribers (subscriber_id, stream_version, clock) VALUES ('replayed', 2, now())")

        func replay() async throws -> LedgerReplay {
            try await pool.withConnection { connection in
                let rows = try await connection.query(try SubscriberSnapshots.replayQuery([("replayed", 4)], progressTable: "change_subscribers"))
                return try #require(try await SubscriberSnapshots.replays(rows, through: ["replayed": 4], on: connection)["replayed"])
            }
        }
        func folded(_ replay: LedgerReplay) -> SubscriberLedger {
            var ledger = replay.ledger
            for (_, event) in replay.events { ledger.apply(event) }
            return ledger
        }
        let throughFour = SubscriberLedger(subscriberID: "replayed", events: Array(events.prefix(4)))

        let readable = try await replay()
        #expect(readable.events.map(\.version) == [3, 4])
        #expect(readable.applied == 2)
        #expect(folded(readable) == throughFour)

        try await pool.query("UPDATE subscriber_snapshots SET ledger = '\\x0102'::bytea WHERE subscriber_id = 'replayed'")
        let unreadable = try await replay()
        #expect(unreadable.events.map(\.version) == [1, 2, 3, 4])
        #expect(unreadable.applied == 2)
        #expect(folded(unreadable) == throughFour)
    }
}
