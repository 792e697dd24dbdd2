import EventStore
import Foundation
import Ledger
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
import TestSupport
import Testing

@Suite("Projections rebuilt together")
struct ProjectionsTogetherTests {
    /// Generated histories with an erased subscriber; writes and the three
    /// live runners go on while the three projections are rebuilt in one
    /// pass (twice, with chunks that cut streams). Once the runners have
    /// caught up, the subscription tables are the pure fold of every
    /// ledger, the reminders what a replay in commit order gives, and the
    /// analytics what a rebuild of analytics alone gives: nothing written
    /// meanwhile is lost or doubled in any of the three.
    @Test(arguments: [UInt64(41), 42])
    func rebuildingTogetherDuringWritesLosesNothing(seed: UInt64) async throws {
        let dependencies = try await makeDependencies(poolSize: 12)
        defer { Task { await dependencies.pool.close() } }
        let writer = LedgerWriter(dependencies)
        let store = dependencies.store
        let catalog = dependencies.catalog.catalog
        let reminders = ReminderProjection(store: store, catalog: catalog)
        let subscriptions = SubscriptionProjection(store: store, catalog: catalog)
        let analytics = AnalyticsProjection(catalog: catalog)
        let live: [any EventConsumer] = [reminders, subscriptions, analytics]
        var history = RandomHistory(seed: seed, subscribers: 10)
        try await writer.writeRandomBatches(30, of: 1...6, from: &history)
        _ = try await ErasureService(dependencies).erase("rm0", request: ErasureRequest(reason: "test"),
                                                         by: ActorStamp(role: "admin", keyFingerprint: "t"))
        for projection in live { try await dependencies.project(projection) }
        let batches = (0..<60).map { _ in (0..<history.int(1...3)).map { _ in history.next() } }
        let writes = writer.writeInBackground(batches, pause: .milliseconds(1))
        let runners = dependencies.runInBackground(live, limit: 4, pause: .milliseconds(2))
        let together = ProjectionsTogether(store: store, catalog: catalog)
        for chunkSize in [3, 40] {
            try await store.rebuildStreamwise(together, chunkSize: chunkSize, catchUpBatch: 3)
        }
        try await writes.value
        runners.cancel()
        _ = await runners.value
        for projection in live { try await dependencies.project(projection) }

        let rebuiltModels = try await dependencies.readModelRows()
        let rebuiltReminders = try await dependencies.reminderRows()
        let rebuiltAnalytics = try await dependencies.tableRows(AnalyticsRows.tables)
        #expect(rebuiltReminders.count > 10 && rebuiltAnalytics.count > 10)
        #expect(try await dependencies.pool.query("SELECT 1 FROM reminders WHERE subscriber_id = 'rm0'").isEmpty,
                "the erased subscriber has no reminders")
        // The erased subscriber's rows are named by its pseudonym, which the fold of every key leaves out.
        let erased = SubscriberPseudonyms.pseudonym(for: "rm0")
        #expect(rebuiltModels.filter { !$0.contains(erased) } == (try await dependencies.foldedReadModelRows()),
                "seed \(seed): subscription tables differ from the fold")
        #expect(rebuiltModels.contains { $0.contains(erased) }, "the erased subscriber's rows stay, under its pseudonym")
        try await store.rebuildStreamwise(subscriptions, chunkSize: 7)
        #expect(rebuiltModels == (try await dependencies.readModelRows()), "seed \(seed): subscriptions differ from a rebuild of them alone")
        try await store.rebuild(reminders, batchSize: 5)
        #expect(rebuiltReminders == (try await dependencies.reminderRows()), "seed \(seed): reminders differ from a replay")
        try await store.rebuildStreamwise(analytics, chunkSize: 7)
        #expect(rebuiltAnalytics == (try await dependencies.tableRows(AnalyticsRows.tables)),
                "seed \(seed): analytics differ from a rebuild of analytics alone")
        let shadows = try await dependencies.pool.query("SELECT count(*) FROM pg_class WHERE relname LIKE '%\\_\\_rebuild%'")
        #expect(try shadows.first?.decode(Int.self, at: 0) == 0)
    }

    /// Facts written after the load, which no live runner has applied, are
    /// in the swapped-in tables, and every member's checkpoint is handed
    /// over past them: none of the three has anything left to apply.
    @Test func everyMembersCheckpointIsHandedOver() async throws {
        let dependencies = try await makeDependencies()
        defer { Task { await dependencies.pool.close() } }
        let writer = LedgerWriter(dependencies)
        let store = dependencies.store
        let together = ProjectionsTogether(store: store, catalog: dependencies.catalog.catalog)
        let live = Projections.all(store: store, catalog: dependencies.catalog.catalog)
        #expect(Set(together.members) == Set(live.map(\.name)) && Set(together.tables).count == together.tables.count)
        let history = HistoryBox(RandomHistory(seed: 43, subscribers: 6))
        _ = try await writer.write(WriteBatch(await history.next(40), refusals: .skip))
        for projection in live { try await dependencies.project(projection) }
        try await store.rebuildStreamwise(together, chunkSize: 7, afterLoad: {
            _ = try await writer.write(WriteBatch(await history.next(30), refusals: .skip))
            // The catch-up reads below the cluster's oldest running transaction,
            // which another suite's may hold: the late facts must be below it first.
            try await dependencies.waitUntilTheLogIsBelowTheCommitHorizon()
        })
        for projection in live { #expect(try await store.lag(of: projection.name) == 0, "\(projection.name) has events left") }
        // Nothing applied since: the swapped-in tables alone hold the late facts.
        #expect(try await dependencies.readModelRows() == (try await dependencies.foldedReadModelRows()))
        let reminderRows = try await dependencies.reminderRows()
        let analyticsRows = try await dependencies.tableRows(AnalyticsRows.tables)
        try await store.rebuild(ReminderProjection(store: store, catalog: dependencies.catalog.catalog), batchSize: 7)
        #expect(reminderRows == (try await dependencies.reminderRows()), "reminders differ from a replay")
        try await store.rebuildStreamwise(AnalyticsProjection(catalog: dependencies.catalog.catalog), chunkSize: 7)
        #expect(analyticsRows == (try await dependencies.tableRows(AnalyticsRows.tables)), "analytics differ from a rebuild alone")
    }

    /// A rebuild of one of the three alone holds that one's lock: rebuilding
    /// all of them together meanwhile is refused, naming it, and takes no
    /// other lock with it.
    @Test func aRebuildOfOneMemberHoldsTheOthersOff() async throws {
        let dependencies = try await makeDependencies()
        defer { Task { await dependencies.pool.close() } }
        let store = dependencies.store
        let together = ProjectionsTogether(store: store, catalog: dependencies.catalog.catalog)
        try await dependencies.pool.withConnection { connection in
            try await connection.query("SELECT pg_advisory_lock(hashtextextended('rebuild:subscriptions', 0))")
            await #expect { try await store.rebuildStreamwise(together) } throws: { error in
                (error as? RebuildAlreadyRunning)?.consumer == "subscriptions"
            }
            try await connection.query("SELECT pg_advisory_unlock(hashtextextended('rebuild:subscriptions', 0))")
        }
        let held = try await dependencies.pool.query("""
            SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
            """)
        #expect(try held.first?.decode(Int.self, at: 0) == 0, "a lock taken before the refusal was let go")
        try await store.rebuildStreamwise(together)
    }
}

extension AppDependencies {
    /// Waits (at most 90 s) until every event stored now is below the
    /// cluster's oldest running transaction, where consumers read.
    func waitUntilTheLogIsBelowTheCommitHorizon() async throws {
        let last = try await pool.query("SELECT coalesce(max(position), 0) FROM events").first?.decode(Int64.self, at: 0) ?? 0
        let deadline = ContinuousClock.now + .seconds(90)
        while ContinuousClock.now < deadline {
            let visible = try await pool.query("""
                SELECT coalesce(max(position), 0) FROM events WHERE transaction_id < pg_snapshot_xmin(pg_current_snapshot())
                """).first?.decode(Int64.self, at: 0) ?? 0
            if visible >= last { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw ProjectionTimeout(holders: try await oldestRunningTransactions())
    }

    /// Every row of `tables`, as comparable text.
    func tableRows(_ tables: [String]) async throws -> [String] {
        var rows: [String] = []
        for table in tables {
            rows += try await pool.query("SELECT \(table)::text || ': ' || t::text FROM \(unsafeRaw: table) t ORDER BY 1")
                .map { try $0.decode(String.self, at: 0) }
        }
        return rows
    }
}
