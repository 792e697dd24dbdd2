import Foundation
import Postgres
import Testing
import TestSupport

@Suite("Session timeouts")
struct SessionTimeoutTests {
    @Test func statementTimeoutCancelsALongStatementAndThePoolStaysUsable() async throws {
        let pool = ConnectionPool(configuration: PoolConfiguration(
            conninfo: try await TestDatabase.make(), maximumConnections: 1,
            sessionTimeouts: SessionTimeouts(statementTimeout: .milliseconds(200))))
        let before = try await pool.withConnection { try await $0.backendProcessID() }
        let started = ContinuousClock.now
        let error = await #expect(throws: PostgresError.self) { try await pool.query("SELECT pg_sleep(2)") }
        #expect(error?.sqlState == .queryCanceled)
        #expect(ContinuousClock.now - started < .milliseconds(1500))
        // The same connection serves the next statement: a timeout is not a broken connection.
        #expect(try await pool.query("SELECT 1").first?.decode(Int.self, at: 0) == 1)
        #expect(try await pool.withConnection { try await $0.backendProcessID() } == before)
        #expect(await pool.openConnections == 1)
        await pool.close()
    }

    @Test func everyConnectionThePoolOpensCarriesTheTimeouts() async throws {
        let pool = ConnectionPool(configuration: PoolConfiguration(
            conninfo: try await TestDatabase.make(), maximumConnections: 2,
            sessionTimeouts: SessionTimeouts(
                statementTimeout: .milliseconds(1500), lockTimeout: .seconds(1),
                idleInTransactionSessionTimeout: .seconds(60))))
        let first = try await pool.lease()
        let second = try await pool.lease()
        for connection in [first, second] {
            let row = try #require(try await connection.query("""
                SELECT current_setting('statement_timeout'), current_setting('lock_timeout'),
                       current_setting('idle_in_transaction_session_timeout')
                """).first)
            #expect(try row.decode(String.self, at: 0) == "1500ms")
            #expect(try row.decode(String.self, at: 1) == "1s")
            #expect(try row.decode(String.self, at: 2) == "1min")
        }
        await pool.release(first)
        await pool.release(second)
        await pool.close()
    }

    @Test func unsetTimeoutsLeaveTheServerDefaults() async throws {
        let connection = try await Connection.connect(to: try await TestDatabase.make())
        defer { connection.close() }
        let row = try #require(try await connection.query("""
            SELECT current_setting('statement_timeout'), current_setting('lock_timeout'),
                   current_setting('idle_in_transaction_session_timeout')
            """).first)
        #expect(try row.decode(String.self, at: 0) == "0")
        #expect(try row.decode(String.self, at: 1) == "0")
        #expect(try row.decode(String.self, at: 2) == "0")
    }

    /// Zero turns a limit off in PostgreSQL, so a positive one must never round down to it.
    @Test func aSubMillisecondLimitRoundsUpAndANegativeOneIsRefused() async throws {
        let conninfo = try await TestDatabase.make()
        let connection = try await Connection.connect(
            to: conninfo, sessionTimeouts: SessionTimeouts(lockTimeout: .microseconds(300)))
        defer { connection.close() }
        // lock_timeout, not statement_timeout: a 1 ms statement limit would
        // also cut this very query on a loaded machine.
        let shown = try await connection.query("SELECT current_setting('lock_timeout')").first?.decode(String.self, at: 0)
        #expect(shown == "1ms")
        let error = await #expect(throws: PostgresError.self) {
            try await Connection.connect(to: conninfo, sessionTimeouts: SessionTimeouts(lockTimeout: .seconds(-1)))
        }
        #expect(error?.code == .connectionFailed)
    }

    @Test func lockTimeoutFailsAWaitForALockHeldElsewhere() async throws {
        let conninfo = try await TestDatabase.make()
        let holder = try await Connection.connect(to: conninfo)
        let waiter = try await Connection.connect(
            to: conninfo, sessionTimeouts: SessionTimeouts(lockTimeout: .milliseconds(200)))
        defer { holder.close(); waiter.close() }
        try await holder.execute(unsafeSQL: "CREATE TABLE t (n integer)")
        try await holder.withTransaction { holder in
            try await holder.execute(unsafeSQL: "LOCK TABLE t IN ACCESS EXCLUSIVE MODE")
            let started = ContinuousClock.now
            let error = await #expect(throws: PostgresError.self) { try await waiter.query("SELECT count(*) FROM t") }
            #expect(error?.sqlState == .lockNotAvailable)
            #expect(ContinuousClock.now - started < .milliseconds(1500))
        }
        #expect(try await waiter.query("SELECT count(*) FROM t").first?.decode(Int.self, at: 0) == 0)
    }

    @Test func aTransactionLeftIdleEndsItsSession() async throws {
        let connection = try await Connection.connect(
            to: try await TestDatabase.make(),
            sessionTimeouts: SessionTimeouts(idleInTransactionSessionTimeout: .milliseconds(200)))
        defer { connection.close() }
        try await connection.execute(unsafeSQL: "BEGIN")
        try await Task.sleep(for: .milliseconds(600))
        await #expect(throws: PostgresError.self) { try await connection.query("SELECT 1") }
        #expect(connection.isBroken)
    }
}
