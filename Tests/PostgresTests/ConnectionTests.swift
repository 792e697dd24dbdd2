import Foundation
import Postgres
import Testing
import TestSupport

@Suite("Connection")
struct ConnectionTests {
    @Test func decodesEveryColumnTypeAndNull() async throws {
        let connection = try await Connection.connect(to: try await TestDatabase.make())
        defer { connection.close() }
        let id = UUID()
        let when = Date(timeIntervalSince1970: 1_795_000_000.123456)
        let bytes = Data([0, 1, 0xfe, 0xff])
        let row = try #require(try await connection.query("""
            SELECT \(42)::bigint, \("héllo 'quoted'")::text, \(true)::bool, \(when)::timestamptz,
                   \(id)::uuid, \(bytes)::bytea, \(PostgresJSON(text: #"{"a": [1, 2]}"#))::jsonb, NULL::text
            """).first)
        #expect(try row.decode(Int64.self, at: 0) == 42)
        #expect(try row.decode(String.self, at: 1) == "héllo 'quoted'")
        #expect(try row.decode(Bool.self, at: 2) == true)
        #expect(abs(try row.decode(Date.self, at: 3).timeIntervalSince(when)) < 0.000_001)
        #expect(try row.decode(UUID.self, at: 4) == id)
        #expect(try row.decode(Data.self, at: 5) == bytes)
        #expect(try row.decode(PostgresJSON.self, at: 6).text == #"{"a": [1, 2]}"#)
        #expect(try row.decode(String?.self, at: 7) == nil)
        #expect(throws: PostgresError.self) { try row.decode(String.self, at: 7) }
    }

    @Test func serverErrorsCarryTheirSQLStateButDoNotLeakData() async throws {
        let connection = try await Connection.connect(to: try await TestDatabase.make())
        defer { connection.close() }
        try await connection.execute(unsafeSQL: "CREATE TABLE t (id text PRIMARY KEY)")
        try await connection.query("INSERT INTO t VALUES (\("secret-value"))")
        let error = await #expect(throws: PostgresError.self) {
            try await connection.query("INSERT INTO t VALUES (\("secret-value"))")
        }
        #expect(error?.sqlState == .uniqueViolation)
        #expect(error?.code == .server)
        #expect(error?.description.contains("secret-value") == false)
        #expect(error?.debugDescription.contains("INSERT INTO t") == true)
        // The connection stays usable after a statement error.
        #expect(try await connection.query("SELECT count(*) FROM t").first?.decode(Int.self, at: 0) == 1)
    }

    @Test func transactionRollsBackOnErrorAndCommitsOnSuccess() async throws {
        let connection = try await Connection.connect(to: try await TestDatabase.make())
        defer { connection.close() }
        try await connection.execute(unsafeSQL: "CREATE TABLE t (n integer)")
        struct Boom: Error {}
        await #expect(throws: Boom.self) {
            try await connection.withTransaction { connection in
                try await connection.query("INSERT INTO t VALUES (\(1))")
                throw Boom()
            }
        }
        try await connection.withTransaction { connection in
            try await connection.query("INSERT INTO t VALUES (\(2))")
        }
        let values = try await connection.query("SELECT n FROM t").map { try $0.decode(Int.self, at: 0) }
        #expect(values == [2])
    }

    @Test func transactionRollsBackWhenTheTaskIsCancelled() async throws {
        let conninfo = try await TestDatabase.make()
        let connection = try await Connection.connect(to: conninfo)
        defer { connection.close() }
        try await connection.execute(unsafeSQL: "CREATE TABLE t (n integer)")
        let task = Task {
            try await connection.withTransaction { connection in
                try await connection.query("INSERT INTO t VALUES (\(1))")
                try await connection.query("SELECT pg_sleep(\(60))")
            }
        }
        try await Task.sleep(for: .milliseconds(300))
        let cancelled = ContinuousClock.now
        task.cancel()
        let result = await task.result
        #expect(throws: (any Error).self) { try result.get() }
        // The cancel reached the server: the 60 s sleep was cut short, not
        // waited out and then rolled back. The bound is loose because a
        // loaded machine can take seconds to schedule the cancel; a cancel
        // that never reaches the server takes the whole minute.
        #expect(ContinuousClock.now - cancelled < .seconds(30))
        let count = try await connection.query("SELECT count(*) FROM t").first?.decode(Int.self, at: 0)
        #expect(count == 0)
    }

    @Test func pipelineSendsEverythingThenReadsAndIsAtomic() async throws {
        let connection = try await Connection.connect(to: try await TestDatabase.make())
        defer { connection.close() }
        try await connection.execute(unsafeSQL: "CREATE TABLE t (n integer PRIMARY KEY)")
        let inserts = (1...2000).map { n -> PostgresQuery in "INSERT INTO t VALUES (\(n)) RETURNING n" }
        let results = try await connection.pipeline(inserts)
        #expect(results.count == 2000)
        #expect(try results[1999].first?.decode(Int.self, at: 0) == 2000)

        // A failing statement aborts the whole pipeline: nothing of it stays.
        let failing: [PostgresQuery] = ["INSERT INTO t VALUES (\(5000))", "INSERT INTO t VALUES (\(1))", "INSERT INTO t VALUES (\(5001))"]
        let error = await #expect(throws: PostgresError.self) { try await connection.pipeline(failing) }
        #expect(error?.sqlState == .uniqueViolation)
        let count = try await connection.query("SELECT count(*) FROM t").first?.decode(Int.self, at: 0)
        #expect(count == 2000)
    }

    /// Each connection runs libpq on a thread of its own; a connect that fails
    /// must end that thread too, or a pool retrying through an outage leaks
    /// one per attempt. 1000 refused connects against a margin of 500 leaves
    /// room for the threads of suites running alongside (a hundred and more
    /// at the start of a full run).
    @Test func aFailedConnectLeavesNoThreadBehind() async throws {
        func threads() throws -> Int { try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count }
        let before = try threads()
        for _ in 0..<1000 {
            await #expect(throws: PostgresError.self) {
                try await Connection.connect(to: "host=127.0.0.1 port=1 connect_timeout=2 dbname=nothing")
            }
        }
        try await Task.sleep(for: .milliseconds(200))
        #expect(try threads() - before < 500)
    }

    @Test func listenWaitsForANotificationWithoutPolling() async throws {
        let conninfo = try await TestDatabase.make()
        let listener = try await Connection.connect(to: conninfo)
        let sender = try await Connection.connect(to: conninfo)
        defer { listener.close(); sender.close() }
        try await listener.listen("wake up")
        #expect(try await listener.waitForNotification(timeout: .milliseconds(100)) == nil)

        // A long timeout: on a loaded machine the sender's statement can take
        // seconds; the wait must end with the notification, not the timeout.
        async let received = listener.waitForNotification(timeout: .seconds(120))
        try await Task.sleep(for: .milliseconds(100))
        let started = ContinuousClock.now
        try await sender.query("SELECT pg_notify(\("wake up"), \("payload"))")
        let notification = try await received
        #expect(notification?.channel == "wake up")
        #expect(notification?.payload == "payload")
        #expect(ContinuousClock.now - started < .seconds(60))
    }
}
