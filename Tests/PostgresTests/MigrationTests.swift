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
