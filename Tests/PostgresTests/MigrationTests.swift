import Foundation
import Postgres
import Testing
import TestSupport

@Suite("Migrations")
struct MigrationTests {
    /// A database with nothing in it, on the same server as the test databases.
    func emptyDatabase() async throws -> String {
        let conninfo = try await TestDatabase.make()
        let connection = try await Connection.connect(to: conninfo)
        defer { connection.close() }
        try await connection.execute(unsafeSQL: "DROP SCHEMA public CASCADE; CREATE SCHEMA public")
        return conninfo
    }

    @Test func migrationsAreIdempotent() async throws {
        let conninfo = try await emptyDatabase()
        let migrator = Migrator(migrations: try TestDatabase.migrations())
        let first = try await migrator.migrate(conninfo: conninfo)
        #expect(first == migrator.migrations.map(\.version))
        #expect(try await migrator.migrate(conninfo: conninfo).isEmpty)
    }

    @Test func instancesStartingTogetherApplyEachMigrationOnce() async throws {
        let conninfo = try await emptyDatabase()
        let migrations = try TestDatabase.migrations()
        // Slow the first migration down so the racers overlap.
        var slowed = migrations
        slowed[0].sql = "SELECT pg_sleep(0.3);\n" + slowed[0].sql
        let migrator = Migrator(migrations: slowed)
        let results = try await withThrowingTaskGroup(of: [Int].self) { group in
            for _ in 0..<4 { group.addTask { try await migrator.migrate(conninfo: conninfo) } }
            return try await group.reduce(into: [[Int]]()) { $0.append($1) }
        }
        #expect(results.flatMap { $0 }.sorted() == migrations.map(\.version))
        let connection = try await Connection.connect(to: conninfo)
        defer { connection.close() }
        let count = try await connection.query("SELECT count(*) FROM schema_migrations").first?.decode(Int.self, at: 0)
        #expect(count == migrations.count)
    }

    @Test func aFailingMigrationLeavesNothingBehind() async throws {
        let conninfo = try await emptyDatabase()
        let broken = Migrator(migrations: [
            Migration(version: 1, name: "ok", sql: "CREATE TABLE a (n integer)"),
            Migration(version: 2, name: "broken", sql: "CREATE TABLE b (n integer); SELECT 1/0;"),
        ])
        await #expect(throws: PostgresError.self) { try await broken.migrate(conninfo: conninfo) }
        let connection = try await Connection.connect(to: conninfo)
        defer { connection.close() }
        let versions = try await connection.query("SELECT version FROM schema_migrations").map { try $0.decode(Int.self, at: 0) }
        #expect(versions == [1])
        let tableB = try await connection.query("SELECT to_regclass('b') IS NULL").first?.decode(Bool.self, at: 0)
        #expect(tableB == true)
    }
}

/// Ownership rows written before ownership was kept per environment move to
/// their environment's keys: a Sandbox-only original to its Sandbox key, a
/// Production one stays bare.
@Suite("Ownership per environment migration")
struct OwnershipMigrationTests {
    @Test func sandboxRowsMoveToSandboxKeys() async throws {
        let conninfo = try await TestDatabase.make(migratedBefore: 19)
        let connection = try await Connection.connect(to: conninfo)
        defer { connection.close() }
        let all = try TestDatabase.migrations()
        try await connection.execute(unsafeSQL: """
            INSERT INTO events (stream_id, stream_version, event_id, type, data) VALUES
              ('subscriber-prod', 1, gen_random_uuid(), 'purchased',
               '{"transactionId": "p1", "originalTransactionId": "p1", "productId": "x", "environment": "Production"}'),
              ('subscriber-sand', 1, gen_random_uuid(), 'purchased',
               '{"transactionId": "s2", "originalTransactionId": "s1", "productId": "x", "environment": "Sandbox"}');
            INSERT INTO transaction_owners (original_transaction_id, subscriber_id) VALUES ('p1', 'prod'), ('s1', 'sand');
            INSERT INTO transaction_ids (transaction_id, original_transaction_id, subscriber_id)
              VALUES ('p1', 'p1', 'prod'), ('s2', 's1', 'sand');
            """)
        _ = try await Migrator(migrations: all).migrate(conninfo: conninfo)
        let owners = try await connection.query(
            "SELECT replace(original_transaction_id, chr(31), '/'), subscriber_id FROM transaction_owners ORDER BY 1")
        #expect(try owners.map { "\(try $0.decode(String.self, at: 0))=\(try $0.decode(String.self, at: 1))" }.sorted()
                == ["Sandbox/s1=sand", "p1=prod"])
        // The transaction lookup reads the keys from the events (sql/0044).
        let ids = try await connection.query("""
            SELECT replace(key, chr(31), '/'), replace(coalesce(subledger_original_key(type, data), key), chr(31), '/')
            FROM (SELECT subledger_transaction_key(type, data) AS key, type, data FROM events) e ORDER BY 1
            """)
        #expect(try ids.map { "\(try $0.decode(String.self, at: 0))>\(try $0.decode(String.self, at: 1))" }.sorted()
                == ["Sandbox/s2>Sandbox/s1", "p1>p1"])
        // The events stored before carry their keys (sql/0044).
        let hashed = try await connection.query("""
            SELECT count(*) FROM events WHERE lookup_key = subledger_transaction_key(type, data)
              AND lookup_group = coalesce(subledger_original_key(type, data), '')
            """)
        #expect(try hashed.first!.decode(Int64.self, at: 0) == 2)
    }
}
