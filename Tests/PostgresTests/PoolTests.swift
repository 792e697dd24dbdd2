import Foundation
import Postgres
import Testing
import TestSupport

@Suite("Connection pool")
struct PoolTests {
    @Test func exhaustedPoolFailsWithATimeoutAfterTheLeaseTimeout() async throws {
        let pool = ConnectionPool(configuration: PoolConfiguration(
            conninfo: try await TestDatabase.make(), maximumConnections: 2, leaseTimeout: .milliseconds(300)))
        let first = try await pool.lease()
        let second = try await pool.lease()
        let started = ContinuousClock.now
        let error = await #expect(throws: PostgresError.self) { try await pool.lease() }
        #expect(error?.code == .poolTimeout)
        #expect(ContinuousClock.now - started >= .milliseconds(250))
        // Returning one lets the next lease through.
        await pool.release(first)
        let third = try await pool.lease()
        await pool.release(second)
        await pool.release(third)
        #expect(await pool.openConnections == 2)
        await pool.close()
    }

    /// A connection that comes back inside a transaction (a statement
    /// timeout striking BEGIN left one open and aborted, and every later
    /// borrower's statement failed with 25P02, a 500) is not lent again.
    @Test func aConnectionLeftInATransactionIsNotLentAgain() async throws {
        let pool = ConnectionPool(configuration: PoolConfiguration(conninfo: try await TestDatabase.make(), maximumConnections: 1))
        let first = try await pool.withConnection { connection in
            try await connection.query("BEGIN")
            _ = try? await connection.query("SELECT 1 / 0")
            return try await connection.backendProcessID()
        }
        // Closed when it came back, not kept idle holding its transaction.
        #expect(await pool.openConnections == 0)
        let (second, value) = try await pool.withConnection { connection in
            (try await connection.backendProcessID(), try await connection.query("SELECT 1").first!.decode(Int.self, at: 0))
        }
        #expect(value == 1)
        #expect(second != first)
        await pool.close()
    }

    @Test func brokenConnectionsAreReplaced() async throws {
        let conninfo = try await TestDatabase.make()
        let pool = ConnectionPool(configuration: PoolConfiguration(conninfo: conninfo, maximumConnections: 1))
        let victim = try await pool.withConnection { try await $0.backendProcessID() }
        let killer = try await Connection.connect(to: conninfo)
        defer { killer.close() }
        try await killer.query("SELECT pg_terminate_backend(\(victim))")
        try await Task.sleep(for: .milliseconds(200))
        let replacement = try await pool.withConnection { try await $0.backendProcessID() }
        #expect(replacement != victim)
        await pool.close()
    }

    @Test func poolSurvivesADatabaseRestart() async throws {
        // A cluster of its own: restarting the shared one would disturb other tests.
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("subledger-restart-\(UUID().uuidString)")
        let cluster = EmbeddedCluster(directory: folder, databaseName: "restart", isEphemeral: true)
        try await cluster.start()
        defer {
            try? cluster.stop()
            try? FileManager.default.removeItem(at: folder)
        }
        let pool = ConnectionPool(configuration: PoolConfiguration(conninfo: cluster.conninfo(), maximumConnections: 4))
        let before = try await pool.query("SELECT pg_postmaster_start_time()").first?.decode(Date.self, at: 0)
        try cluster.restart()
        let after = try await pool.query("SELECT pg_postmaster_start_time()").first?.decode(Date.self, at: 0)
        #expect(before != nil && after != nil && before != after)
        await pool.close()
    }

    /// 64 sleeps of 0.2 s over 16 connections take about 4 × 0.2 s, and a ticker
    /// on the cooperative pool (two threads on this machine) keeps ticking: no
    /// libpq call holds a cooperative thread. If they did, the sleeps would run
    /// two at a time (6.4 s) and the ticker would stall.
    @Test func statementsDoNotBlockTheCooperativePool() async throws {
        let pool = ConnectionPool(configuration: PoolConfiguration(
            conninfo: try await TestDatabase.make(), maximumConnections: 16, leaseTimeout: .seconds(30)))
        // Open the connections first so only the statements are measured.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<16 { group.addTask { try await pool.query("SELECT pg_sleep(0.05)") } }
            try await group.waitForAll()
        }
        let ticks = TickCounter()
        let ticker = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(10))
                await ticks.tick()
            }
        }
        let started = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<64 { group.addTask { try await pool.query("SELECT pg_sleep(0.2)") } }
            try await group.waitForAll()
        }
        let elapsed = ContinuousClock.now - started
        ticker.cancel()
        let count = await ticks.count
        #expect(elapsed >= .milliseconds(790))
        #expect(elapsed < .milliseconds(3000), "64 × 0.2 s over 16 connections took \(elapsed)")
        // Lenient: other suites share the two cores. The elapsed time above is
        // what fails when libpq blocks the pool (6.4 s measured); a stalled
        // ticker is the second symptom.
        #expect(count >= 5, "the ticker ticked only \(count) times in \(elapsed)")
        await pool.close()
    }
}

actor TickCounter {
    var count = 0
    func tick() { count += 1 }
}
