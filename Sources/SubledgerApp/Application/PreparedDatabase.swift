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

    /// `renamingStreams`: streams named under another secret's scheme are
    /// renamed under this one's (otherwise such a start is refused; only a
    /// database named without a secret is renamed on its own).
    public static func prepare(_ configuration: SubledgerConfiguration, migrate: Bool = true, renamingStreams: Bool = false,
                               logger: Logger) async throws -> PreparedDatabase {
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
            let migrations = try Migrator.load(from: try SQLDirectory.locate(configured: configuration.sqlDirectory))
            let applied = try await Migrator(migrations: migrations, logger: logger).migrate(conninfo: prepared.conninfo)
            if !applied.isEmpty { logger.info("migrations applied", metadata: ["migration.versions": "\(applied)"]) }
            // Streams written before erasure existed get their pseudonyms and keys (once).
            let converted = try await PlainStreamConversion.run(conninfo: prepared.conninfo, logger: logger)
            if converted > 0 { logger.notice("subscriber streams converted for erasure", metadata: ["streams.converted": "\(converted)"]) }
            // Streams named without a secret are renamed under the secret's pseudonyms (once).
            try await StreamNamingConversion.run(conninfo: prepared.conninfo, fromAnotherSecret: renamingStreams, logger: logger)
            // Subscriber keys of version 1 are stored as their two keys (once).
            try await SubscriberKeyConversion.run(conninfo: prepared.conninfo, logger: logger)
            // Webhook secrets stored plain by an earlier version are sealed (once).
            try await WebhookSecretSealing.sealStoredSecrets(
                secret: configuration.secret.derivedKeyBytes(for: .webhookSecretSealing), conninfo: prepared.conninfo, logger: logger)
        }
        if prepared.cluster == nil, let collation = await linguisticCollation(conninfo: prepared.conninfo) {
            logger.notice("the database sorts text linguistically; one created with the C collation writes faster", metadata: [
                "db.collation": "\(collation)",
                "db.advice": "CREATE DATABASE … LOCALE_PROVIDER libc LOCALE 'C' TEMPLATE template0 (or initdb --no-locale): imports measured 10-13% faster",
            ])
        }
        return prepared
    }

    /// The database's default collation when it is a linguistic one (ICU's,
    /// or a libc locale other than C/POSIX), nil for a byte-order one or
    /// when the server does not say (before PostgreSQL 15).
    ///
    /// Every key this service stores (stream ids, idempotency keys,
    /// subscriber and transaction ids) is compared byte for byte either way,
    /// but each index probe and insertion of a text key then compares by
    /// the locale's rules: on the same machine and settings an import of the
    /// bench's 200,000 facts ran at 15,292 and 16,103 events/s on a database
    /// collating with ICU's en-US against 17,667 and 17,852 with C (the
    /// embedded cluster's).
    public static func linguisticCollation(conninfo: String) async -> String? {
        guard let connection = try? await Connection.connect(to: conninfo) else { return nil }
        defer { connection.close() }
        guard let row = try? await connection.query("""
            SELECT datlocprovider::text, datcollate FROM pg_database WHERE datname = current_database()
            """).first,
            let provider = try? row.decode(String.self, at: 0), let collate = try? row.decode(String.self, at: 1) else { return nil }
        switch provider {
        case "i": return "icu"
        case "c" where !["C", "POSIX"].contains(collate): return collate
        default: return nil
        }
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
