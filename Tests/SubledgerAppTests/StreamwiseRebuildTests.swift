import EventStore
import Foundation
import Ledger
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
import TestSupport
import Testing

@Suite("Streamwise rebuild")
struct StreamwiseRebuildTests {
    /// Chunks that cut streams in two, several workers: the rows the live
    /// projection wrote, and a checkpoint from which nothing is missed.
    @Test(arguments: [3, 7, 1000])
    func aStreamwiseRebuildEqualsTheLiveModels(chunkSize: Int) async throws {
        let dependencies = try await makeDependencies()
        defer { Task { await dependencies.pool.close() } }
        let writer = LedgerWriter(dependencies)
        let projection = SubscriptionProjection(store: dependencies.store, catalog: dependencies.catalog.catalog)
        var history = RandomHistory(seed: UInt64(chunkSize), subscribers: 9)
        try await writer.writeRandomBatches(30, of: 1...5, from: &history)
        try await dependencies.project(projection)
        let live = try await dependencies.readModelRows()
        let events = try await dependencies.pool.query("SELECT count(*) FROM events").first?.decode(Int.self, at: 0)
        let read = try await dependencies.store.rebuildStreamwise(projection, chunkSize: chunkSize, workers: 3)
        // Events that committed while it ran may be both folded and caught up.
        #expect(read >= events!)
        #expect(try await dependencies.readModelRows() == live)
        // What the checkpoint leaves to the runner (transactions still running
        // elsewhere in the cluster when it was taken) changes nothing.
        try await dependencies.project(projection)
        #expect(try await dependencies.readModelRows() == live)
    }

    /// Writes go on during the rebuild and the live runner waits on the
    /// checkpoint: once it has caught up, nothing written meanwhile is lost
    /// and every subscriber's rows are their ledger's read model.
    @Test func aRebuildDuringWritesLosesNothing() async throws {
        let dependencies = try await makeDependencies(poolSize: 12)
        defer { Task { await dependencies.pool.close() } }
        let writer = LedgerWriter(dependencies)
        let projection = SubscriptionProjection(store: dependencies.store, catalog: dependencies.catalog.catalog)
        var history = RandomHistory(seed: 99, subscribers: 12)
        try await writer.writeRandomBatches(40, of: 1...6, from: &history)
        try await dependencies.project(projection)
        var later: [[WriteCommand]] = []
        for _ in 0..<60 { later.append((0..<history.int(1...3)).map { _ in history.next() }) }
        let batches = later
        let writes = writer.writeInBackground(batches, pause: .milliseconds(2))
        let live = dependencies.runInBackground([projection], limit: 5, pause: .milliseconds(3))
        for chunkSize in [4, 50] {
            try await dependencies.store.rebuildStreamwise(projection, chunkSize: chunkSize)
        }
        try await writes.value
        live.cancel()
        _ = await live.value
        try await dependencies.project(projection)

        let subscribers = try await dependencies.pool.query("""
            SELECT subscriber_id FROM subscriber_keys ORDER BY 1
            """).map { try $0.decode(String.self, at: 0) }
        #expect(subscribers.count == 12)
        let scratch = try await makeDependencies()
        defer { Task { await scratch.pool.close() } }
        var models: [SubscriberReadModel] = []
        for subscriber in subscribers {
            models.append(try await dependencies.ledger(of: subscriber).readModel(catalog: dependencies.catalog.catalog))
        }
        try await scratch.pool.withTransaction { try await ReadModelRows.replace(models, on: $0) }
        #expect(try await dependencies.readModelRows() == (try await scratch.readModelRows()))
    }

    /// A stored payload the ledger cannot decode (written behind the service's
    /// back) stops the rebuild with the decoding error, whichever page and
    /// worker meets it; the live tables keep their rows and the rebuild's
    /// lock is released, so the next attempt meets the same error, not a
    /// rebuild said to be running.
    @Test(arguments: [3, 1000])
    func anUndecodableEventStopsTheRebuildAndLeavesTheLiveModels(chunkSize: Int) async throws {
        let dependencies = try await makeDependencies()
        defer { Task { await dependencies.pool.close() } }
        let writer = LedgerWriter(dependencies)
        let projection = SubscriptionProjection(store: dependencies.store, catalog: dependencies.catalog.catalog)
        var history = RandomHistory(seed: 41, subscribers: 6)
        try await writer.writeRandomBatches(20, of: 1...4, from: &history)
        try await dependencies.project(projection)
        let live = try await dependencies.readModelRows()
        #expect(!live.isEmpty)
        // The last purchase of the log (a record, schema version 2): its
        // fields stay, but its purchase instant is no number.
        let damaged = try await dependencies.pool.query("""
            UPDATE events SET data = to_jsonb(regexp_replace(data #>> '{}', 'b13:[0-9]{13}', 'b13:not-a-number!'))
            WHERE position = (SELECT max(position) FROM events WHERE type = 'purchased' AND schema_version = 2)
            RETURNING data #>> '{}'
            """)
        #expect(try damaged.first?.decode(String.self, at: 0).contains("b13:not-a-number!") == true)
        for _ in 0..<2 {
            await #expect(throws: LedgerEventDecodingError.self) {
                try await dependencies.store.rebuildStreamwise(projection, chunkSize: chunkSize)
            }
        }
        #expect(try await dependencies.readModelRows() == live)
    }
}
