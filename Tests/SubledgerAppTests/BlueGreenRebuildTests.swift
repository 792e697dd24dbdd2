import EventStore
import Foundation
import Ledger
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
import TestSupport
import Testing

@Suite("Blue-green rebuild")
struct BlueGreenRebuildTests {
    /// Generated histories; writes and both live runners go on while both
    /// projections are rebuilt (twice each, with chunks that cut streams):
    /// once the runners have caught up, the subscription tables are the pure
    /// fold of every subscriber's ledger and the reminders are what a replay
    /// in commit order gives — nothing written meanwhile is lost or doubled.
    @Test(arguments: [UInt64(11), 12, 13])
    func aRebuildDuringWritesAndLiveRunnersLosesNothing(seed: UInt64) async throws {
        let dependencies = try await makeDependencies(poolSize: 12)
        defer { Task { await dependencies.pool.close() } }
        let writer = LedgerWriter(dependencies)
        let catalog = dependencies.catalog.catalog
        let subscriptions = SubscriptionProjection(store: dependencies.store, catalog: catalog)
        let reminders = ReminderProjection(store: dependencies.store, catalog: catalog)
        var history = RandomHistory(seed: seed, subscribers: 10)
        try await writer.writeRandomBatches(30, of: 1...6, from: &history)
        try await dependencies.project(subscriptions)
        try await dependencies.project(reminders)
        let batches = (0..<80).map { _ in (0..<history.int(1...3)).map { _ in history.next() } }
        let writes = writer.writeInBackground(batches, pause: .milliseconds(1))
        let store = dependencies.store
        let live = dependencies.runInBackground([subscriptions, reminders], limit: 4, pause: .milliseconds(2))
        for chunkSize in [3, 40] {
            try await store.rebuildStreamwise(subscriptions, chunkSize: chunkSize, catchUpBatch: 3)
            try await store.rebuildStreamwise(reminders, chunkSize: chunkSize, catchUpBatch: 3)
        }
        try await writes.value
        live.cancel()
        _ = await live.value
        try await dependencies.project(subscriptions)
        try await dependencies.project(reminders)

        let subscribers = try await dependencies.pool.query("""
            SELECT subscriber_id FROM subscriber_keys ORDER BY 1
            """).map { try $0.decode(String.self, at: 0) }
        #expect(subscribers.count == 10)
        let rebuiltRows = try await dependencies.readModelRows()
        #expect(rebuiltRows == (try await dependencies.foldedReadModelRows()), "seed \(seed): subscription tables differ from the fold")

        let rebuiltReminders = try await dependencies.reminderRows()
        #expect(rebuiltReminders.count > 10)
        try await store.rebuild(reminders, batchSize: 5)
        #expect(rebuiltReminders == (try await dependencies.reminderRows()), "seed \(seed): reminders differ from a replay")
        // No shadow is left behind.
        let shadows = try await dependencies.pool.query("SELECT count(*) FROM pg_class WHERE relname LIKE '%\\_\\_rebuild%'")
        #expect(try shadows.first?.decode(Int.self, at: 0) == 0)
    }

    /// Facts written after the shadow tables were loaded, and applied by the
    /// live runner to the live tables before the swap (so the live checkpoint
    /// is past them), are in the swapped-in tables with nothing more to do:
    /// the catch-up applied them and the checkpoint handed over says so.
    @Test(arguments: [UInt64(21), 22])
    func factsWrittenDuringTheLoadAreInTheSwappedTables(seed: UInt64) async throws {
        let dependencies = try await makeDependencies()
        defer { Task { await dependencies.pool.close() } }
        let writer = LedgerWriter(dependencies)
        let catalog = dependencies.catalog.catalog
        let store = dependencies.store
        let subscriptions = SubscriptionProjection(store: store, catalog: catalog)
        let reminders = ReminderProjection(store: store, catalog: catalog)
        let history = HistoryBox(RandomHistory(seed: seed, subscribers: 6))
        _ = try await writer.write(WriteBatch(await history.next(40), refusals: .skip))
        try await dependencies.project(subscriptions)
        try await dependencies.project(reminders)
        let during: @Sendable () async throws -> Void = {
            for _ in 0..<10 {
                _ = try await writer.write(WriteBatch(await history.next(3), refusals: .skip))
            }
            try await dependencies.project(subscriptions)
            try await dependencies.project(reminders)
        }
        try await store.rebuildStreamwise(subscriptions, chunkSize: 7, afterLoad: during)
        #expect(try await store.lag(of: subscriptions.name) == 0)
        #expect(try await dependencies.readModelRows() == (try await dependencies.foldedReadModelRows()),
                "seed \(seed): subscription rows lost in the swap")
        try await store.rebuildStreamwise(reminders, chunkSize: 7, afterLoad: during)
        #expect(try await store.lag(of: reminders.name) == 0)
        let rebuiltReminders = try await dependencies.reminderRows()
        _ = try await store.rebuild(reminders, batchSize: 50)
        #expect(rebuiltReminders == (try await dependencies.reminderRows()), "seed \(seed): reminders lost in the swap")
    }

    /// A transaction left open before a rebuild holds the commit horizon
    /// back; when it ends during the rebuild, the catch-up must not apply
    /// again what the load folded: every event is handled once, and the
    /// tables are the fold.
    @Test func aTransactionLeftOpenDoesNotMakeTheCatchUpRedoTheLoad() async throws {
        let dependencies = try await makeDependencies()
        defer { Task { await dependencies.pool.close() } }
        let writer = LedgerWriter(dependencies)
        let store = dependencies.store
        let subscriptions = SubscriptionProjection(store: store, catalog: dependencies.catalog.catalog)
        let history = HistoryBox(RandomHistory(seed: 31, subscribers: 8))
        _ = try await writer.write(WriteBatch(await history.next(40), refusals: .skip))
        try await dependencies.project(subscriptions)
        let handled = try await dependencies.pool.withConnection { holder in
            try await holder.query("BEGIN")
            try await holder.query("SELECT pg_current_xact_id()")  // takes a transaction id: the horizon stops here
            _ = try await writer.write(WriteBatch(await history.next(40), refusals: .skip))
            return try await store.rebuildStreamwise(subscriptions, chunkSize: 7, afterLoad: {
                try await holder.query("COMMIT")
            })
        }
        let rows = try await dependencies.pool.query("SELECT count(*) FROM events e JOIN streams s ON s.number = e.stream_number WHERE starts_with(s.stream_id, 'subscriber-')")
        let events = try rows.first?.decode(Int.self, at: 0)
        #expect(handled == events, "each event folded or caught up once")
        #expect(try await dependencies.readModelRows() == (try await dependencies.foldedReadModelRows()))
    }

    /// While a rebuild's swap has not happened, the live tables still answer
    /// and the live runner still advances; a second rebuild of the same
    /// projection at the same time is refused.
    @Test func theLiveRunnerKeepsGoingUntilTheSwap() async throws {
        let dependencies = try await makeDependencies()
        defer { Task { await dependencies.pool.close() } }
        let writer = LedgerWriter(dependencies)
        let projection = SubscriptionProjection(store: dependencies.store, catalog: dependencies.catalog.catalog)
        var history = RandomHistory(seed: 5, subscribers: 4)
        _ = try await writer.write(WriteBatch((0..<20).map { _ in history.next() }, refusals: .skip))
        try await dependencies.project(projection)
        let store = dependencies.store
        // A second rebuild while the first holds its lock is refused.
        try await dependencies.pool.withConnection { connection in
            try await connection.query("SELECT pg_advisory_lock(hashtextextended('rebuild:subscriptions', 0))")
            await #expect(throws: RebuildAlreadyRunning.self) { try await store.rebuildStreamwise(projection) }
            try await connection.query("SELECT pg_advisory_unlock(hashtextextended('rebuild:subscriptions', 0))")
        }
        // Shadow tables being filled do not stop the live runner.
        try await dependencies.pool.query("SELECT subledger_shadow_create('subscriptions')")
        _ = try await writer.write(WriteBatch((0..<5).map { _ in history.next() }, refusals: .skip))
        try await dependencies.project(projection)
        #expect(try await store.lag(of: projection.name) == 0)
        let live = try await dependencies.readModelRows()
        try await store.rebuildStreamwise(projection)
        #expect(try await dependencies.readModelRows() == live)
    }
}

/// A history shared by the test and the rebuild's hook.
actor HistoryBox {
    var history: RandomHistory
    init(_ history: RandomHistory) { self.history = history }
    func next(_ count: Int) -> [WriteCommand] { (0..<count).map { _ in history.next() } }
}

extension AppDependencies {
    /// The subscription read models of every subscriber's ledger folded from
    /// their whole stream, as `readModelRows` shows them (written to a scratch database).
    func foldedReadModelRows() async throws -> [String] {
        let subscribers = try await pool.query("""
            SELECT subscriber_id FROM subscriber_keys ORDER BY 1
            """).map { try $0.decode(String.self, at: 0) }
        var models: [SubscriberReadModel] = []
        for subscriber in subscribers {
            models.append(try await ledger(of: subscriber).readModel(catalog: catalog.catalog))
        }
        let scratch = try await makeDependencies()
        do {
            try await scratch.pool.withTransaction { try await ReadModelRows.replace(models, on: $0) }
            let rows = try await scratch.readModelRows()
            await scratch.pool.close()
            return rows
        } catch {
            await scratch.pool.close()
            throw error
        }
    }

    /// The reminder projection's columns (not the dispatcher's), comparable.
    func reminderRows() async throws -> [String] {
        let reminders = try await pool.query("""
            SELECT concat_ws('|', id, subscriber_id, "group", product_id, type, lead, expires_at, due_at, status, environment)
            FROM reminders ORDER BY id
            """).map { try $0.decode(String.self, at: 0) }
        let progress = try await pool.query("""
            SELECT concat_ws('|', subscriber_id, stream_version, clock, coalesce(next_expiry_at::text, '-'))
            FROM reminder_subscribers ORDER BY subscriber_id
            """).map { try $0.decode(String.self, at: 0) }
        return reminders + progress
    }
}
