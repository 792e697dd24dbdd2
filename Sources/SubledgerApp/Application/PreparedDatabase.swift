import Foundation
import Logging
import Postgres
import ServiceLifecycle

/// The database `subledger` talks to, made ready: the embedded cluster started
/// when no URL was given, and every migration applied.
public struct PreparedDatabase: Sendable {
    public var conninfo: String
    /// The embedded cluster, when one is in use.
    public var cluster: EmbeddedCluster?
    /// Whether this process started the cluster (and so should stop it).
    public var startedCluster: Bool

    public static func prepare(_ configuration: SubledgerConfiguration, migrate: Bool = true, logger: Logger) async throws -> PreparedDatabase {
        var prepared: PreparedDatabase
        if let url = configuration.databaseURL {
            prepared = PreparedDatabase(conninfo: url, cluster: nil, startedCluster: false)
        } else {
            let directory = URL(fileURLWithPath: configuration.dataDirectory, isDirectory: true)
            let cluster = EmbeddedCluster(directory: directory, logger: logger)
            let started = try await cluster.start()
            prepared = PreparedDatabase(conninfo: cluster.conninfo(), cluster: cluster, startedCluster: started)
        }
        if migrate {
            let migrations = try Migrator.load(from: try SQLDirectory.locate())
            let applied = try await Migrator(migrations: migrations, logger: logger).migrate(conninfo: prepared.conninfo)
            if !applied.isEmpty { logger.info("migrations applied", metadata: ["migration.versions": "\(applied)"]) }
        }
        return prepared
    }

    /// Stops the embedded cluster if this process started it.
    public func stopIfStarted() {
        guard startedCluster, let cluster else { return }
        try? cluster.stop()
    }
}

/// Stops the embedded cluster at graceful shutdown. First in the service
/// group, so it is the last to shut down, after everything using it.
public struct EmbeddedClusterService: Service {
    let database: PreparedDatabase

    public init(database: PreparedDatabase) { self.database = database }

    public func run() async throws {
        try? await gracefulShutdown()
        database.stopIfStarted()
    }
}
