import Foundation
import Postgres
import Testing
import TestSupport

/// How the pool behaves when its primary goes away or is demoted.
@Suite("Connection pool: failover")
struct PoolFailoverTests {
    /// A demoted primary keeps its sessions but refuses writes (25006): the
    /// first refusal makes the pool drop the idle connections to it too, so
    /// the next lease connects afresh (and finds the new primary).
    @Test func aReadOnlyRefusalDropsTheIdleConnections() async throws {
        let pool = ConnectionPool(configuration: PoolConfiguration(conninfo: try await TestDatabase.make(), maximumConnections: 4))
        let leased = [try await pool.lease(), try await pool.lease(), try await pool.lease(), try await pool.lease()]
        for connection in leased.dropFirst() { await pool.release(connection) }
        #expect(await pool.openConnections == 4)
        let demoted = leased[0]
        try await demoted.query("SET default_transaction_read_only = on")
        let error = await #expect(throws: PostgresError.self) { try await demoted.query("CREATE TABLE refused (a int)") }
        #expect(error?.sqlState == .readOnlySQLTransaction)
        #expect(error?.unavailability == .readOnly)
        await pool.release(demoted)
        #expect(await pool.openConnections == 0)
        // The next lease opens a fresh, writable session.
        try await pool.query("CREATE TEMP TABLE accepted (a int)")
        await pool.close()
    }

    /// Connecting to a server that is not there is retried after pauses
    /// growing to `reconnectBackoff`, not in a tight loop.
    @Test func connectAttemptsBackOff() async throws {
        let pool = ConnectionPool(configuration: PoolConfiguration(
            conninfo: "host=/tmp/subledger-nowhere-\(UUID().uuidString.prefix(8)) port=1 user=nobody dbname=none",
            maximumConnections: 4, reconnectBackoff: .milliseconds(200)))
        let started = ContinuousClock.now
        for _ in 0..<6 {
            let error = await #expect(throws: PostgresError.self) { try await pool.lease() }
            #expect(error?.code == .connectionFailed)
            #expect(error?.unavailability == .connectionLost)
        }
        // Pauses of 20, 40, 80, 160 and 200 ms between the six attempts.
        #expect(ContinuousClock.now - started >= .milliseconds(450))
        await pool.close()
    }

    /// After an outage the pool is back within its reconnect pause of the
    /// server accepting connections.
    @Test func thePoolFindsTheServerAgainSoonAfterItAccepts() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("subledger-outage-\(UUID().uuidString)")
        let cluster = EmbeddedCluster(directory: folder, databaseName: "outage", isEphemeral: true)
        try await cluster.start()
        defer {
            try? cluster.stop()
            try? FileManager.default.removeItem(at: folder)
        }
        let pool = ConnectionPool(configuration: PoolConfiguration(conninfo: cluster.conninfo(), maximumConnections: 4))
        try await pool.query("SELECT 1")
        try cluster.stop()
        // Clients keep asking through the outage, as requests would.
        let prober = Task {
            while true {
                if (try? await pool.query("SELECT 1")) != nil { return ContinuousClock.now }
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        try await Task.sleep(for: .seconds(2))
        try await cluster.start()
        let accepting = ContinuousClock.now
        let reconnected = try await prober.value
        #expect(reconnected - accepting < .milliseconds(600), "\(reconnected - accepting)")
        await pool.close()
    }
}
