import Foundation
import Logging

/// One numbered SQL file from `sql/`, e.g. `0002_events.sql`.
public struct Migration: Sendable, Equatable {
    public var version: Int
    public var name: String
    public var sql: String

    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }
}

/// Applies numbered migrations in order, each in its own transaction, recorded
/// in `schema_migrations`. A session advisory lock makes instances that start
/// together take turns: the second finds the work done.
public struct Migrator: Sendable {
    public var migrations: [Migration]
    let logger: Logger

    /// Arbitrary constant naming the migration lock in `pg_locks`.
    static let lockKey: Int64 = 0x5375_626C_6467_0001

    public init(migrations: [Migration], logger: Logger = Logger(label: "subledger.migrations")) {
        self.migrations = migrations.sorted { $0.version < $1.version }
        self.logger = logger
    }

    /// Reads `NNNN_name.sql` files from a directory.
    public static func load(from directory: URL) throws -> [Migration] {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        var migrations = [Migration]()
        for name in names where name.hasSuffix(".sql") {
            let stem = name.dropLast(4)
            guard let underscore = stem.firstIndex(of: "_"), let version = Int(stem[..<underscore]) else {
                throw MigrationError(message: "migration file \(name) is not named NNNN_description.sql")
            }
            let sql = try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
            migrations.append(Migration(version: version, name: String(stem[stem.index(after: underscore)...]), sql: sql))
        }
        let versions = migrations.map(\.version)
        if Set(versions).count != versions.count {
            throw MigrationError(message: "two migration files in \(directory.path) share a number")
        }
        return migrations.sorted { $0.version < $1.version }
    }

    /// Applies what is missing; returns the versions it applied.
    @discardableResult
    public func migrate(conninfo: String) async throws -> [Int] {
        // A connection of its own, so the session lock cannot outlive this call in a pool.
        let connection = try await Connection.connect(to: conninfo, logger: logger)
        defer { connection.close() }
        try await connection.query("SELECT pg_advisory_lock(\(Self.lockKey))")
        do {
            let applied = try await applyMissing(on: connection)
            try await connection.query("SELECT pg_advisory_unlock(\(Self.lockKey))")
            return applied
        } catch {
            _ = try? await connection.query("SELECT pg_advisory_unlock(\(Self.lockKey))")
            throw error
        }
    }

    private func applyMissing(on connection: Connection) async throws -> [Int] {
        try await connection.execute(unsafeSQL: """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version integer PRIMARY KEY,
                name text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """)
        let rows = try await connection.query("SELECT version FROM schema_migrations")
        let done = Set(try rows.map { try $0.decode(Int.self, at: 0) })
        var applied = [Int]()
        for migration in migrations where !done.contains(migration.version) {
            logger.info("applying migration", metadata: ["migration.version": "\(migration.version)", "migration.name": "\(migration.name)"])
            try await connection.withTransaction { connection in
                try await connection.execute(unsafeSQL: migration.sql)
                try await connection.query(
                    "INSERT INTO schema_migrations (version, name) VALUES (\(migration.version), \(migration.name))")
            }
            applied.append(migration.version)
        }
        return applied
    }
}

public struct MigrationError: Error, CustomStringConvertible, Sendable {
    public var message: String
    public var description: String { message }
}

/// Finds the `sql/` folder: the one configured (`SUBLEDGER_SQL_DIR`), else a
/// `sql` folder beside or above the executable or the working directory (a
/// checkout or an install that copied it), else `/usr/share/subledger/sql`.
public enum SQLDirectory {
    public static func locate(configured explicit: String? = nil) throws -> URL {
        if let explicit, !explicit.isEmpty {
            return URL(fileURLWithPath: explicit, isDirectory: true)
        }
        var starts = [URL(fileURLWithPath: FileManager.default.currentDirectoryPath, isDirectory: true)]
        if let executable = Bundle.main.executableURL?.resolvingSymlinksInPath() {
            starts.append(executable.deletingLastPathComponent())
        }
        for start in starts {
            var directory = start
            for _ in 0..<8 {
                let candidate = directory.appendingPathComponent("sql", isDirectory: true)
                if containsMigrations(candidate) { return candidate }
                let parent = directory.deletingLastPathComponent()
                if parent.path == directory.path { break }
                directory = parent
            }
        }
        let installed = URL(fileURLWithPath: "/usr/share/subledger/sql", isDirectory: true)
        if containsMigrations(installed) { return installed }
        throw MigrationError(message: "cannot find the sql/ migrations folder; set SUBLEDGER_SQL_DIR to it")
    }

    static func containsMigrations(_ directory: URL) -> Bool {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.contains { $0.hasPrefix("0001_") && $0.hasSuffix(".sql") }
    }
}
