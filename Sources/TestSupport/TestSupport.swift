import Foundation
import Logging
import Postgres

/// Databases for tests: each call gives a fresh, migrated database.
///
/// With `TEST_DATABASE_URL` set, databases are created on that server;
/// otherwise the first call starts a private throwaway cluster under the
/// temporary folder, stopped when the test process exits.
public enum TestDatabase {
    /// The conninfo of a new database with every migration applied.
    public static func make() async throws -> String {
        try await registry.makeDatabase()
    }

    /// A new database with only the migrations before `version` applied,
    /// as an earlier build left it: for tests of the migrations after it.
    public static func make(migratedBefore version: Int) async throws -> String {
        let conninfo = try await make()
        let connection = try await Connection.connect(to: conninfo)
        defer { connection.close() }
        try await connection.execute(unsafeSQL: "DROP SCHEMA public CASCADE; CREATE SCHEMA public")
        _ = try await Migrator(migrations: try migrations().filter { $0.version < version }).migrate(conninfo: conninfo)
        return conninfo
    }

    /// The repository's `sql/` folder.
    public static var sqlDirectory: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("sql", isDirectory: true)
    }

    public static func migrations() throws -> [Migration] {
        try Migrator.load(from: sqlDirectory)
    }

    static let registry = Registry()

    actor Registry {
        private var server: Task<Server, Error>?

        struct Server: Sendable {
            var adminConninfo: String
            var conninfo: @Sendable (String) -> String
        }

        func makeDatabase() async throws -> String {
            let server = try await ensureServer()
            let name = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
            let admin = try await Connection.connect(to: server.adminConninfo)
            defer { admin.close() }
            try await admin.execute(unsafeSQL: "CREATE DATABASE \(name) TEMPLATE subledger_test_template")
            return server.conninfo(name)
        }

        /// One start for the whole process, however many tests ask at once.
        private func ensureServer() async throws -> Server {
            if let server { return try await server.value }
            let task = Task { try await Self.startServer() }
            server = task
            return try await task.value
        }

        private static func startServer() async throws -> Server {
            let made: Server
            if let url = ProcessInfo.processInfo.environment["TEST_DATABASE_URL"], !url.isEmpty {
                made = Server(adminConninfo: url, conninfo: { Conninfo.replacingDatabase(in: url, with: $0) })
            } else {
                let folder = FileManager.default.temporaryDirectory
                    .appendingPathComponent("subledger-test-\(getpid())", isDirectory: true)
                let cluster = EmbeddedCluster(directory: folder, databaseName: "postgres", isEphemeral: true)
                try await cluster.start()
                ClusterAtExit.register(cluster)
                made = Server(adminConninfo: cluster.conninfo(database: "postgres"), conninfo: { cluster.conninfo(database: $0) })
            }
            // One migrated template; each test database is a cheap copy of it.
            let admin = try await Connection.connect(to: made.adminConninfo)
            defer { admin.close() }
            try await admin.execute(unsafeSQL: "DROP DATABASE IF EXISTS subledger_test_template")
            try await admin.execute(unsafeSQL: "CREATE DATABASE subledger_test_template")
            try await Migrator(migrations: try TestDatabase.migrations()).migrate(conninfo: made.conninfo("subledger_test_template"))
            return made
        }
    }
}

/// Stops the throwaway cluster when the test process exits.
enum ClusterAtExit {
    nonisolated(unsafe) static var cluster: EmbeddedCluster?

    static func register(_ cluster: EmbeddedCluster) {
        Self.cluster = cluster
        atexit {
            guard let cluster = ClusterAtExit.cluster else { return }
            try? cluster.stop()
            try? FileManager.default.removeItem(at: cluster.directory)
        }
    }
}
