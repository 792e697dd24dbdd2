import ArgumentParser
import CommandSupport
import Foundation
import Logging
import Metrics
import Postgres
import Prometheus
import HTTPAPI
import SubledgerApp
import ServiceLifecycle

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the HTTP service (on an embedded PostgreSQL when no DATABASE_URL is given).")

    @OptionGroup var options: ConfigurationOptions

    func run() async throws {
        let configuration = try options.resolve()
        let logger = LoggingSetup.logger(configuration)
        if !configuration.secret.isConfigured {
            logger.warning("SUBLEDGER_SECRET is not set: the streams' pseudonyms, the audit's key fingerprints and the logs' subscriber references are unkeyed digests, which whoever holds them can match against guessed keys and ids; set at least 32 random characters (docs/operations.md)")
        }
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))

        let catalog = try CatalogSource.load(path: configuration.productsPath)
        let database = try await PreparedDatabase.prepare(configuration, logger: logger)
        let pool = ConnectionPool(
            configuration: PoolConfiguration(conninfo: database.conninfo, maximumConnections: configuration.poolSize,
                                             sessionTimeouts: configuration.sessionTimeouts),
            logger: logger)
        var dependencies = AppDependencies(
            configuration: configuration, pool: pool, catalog: catalog, metrics: registry,
            consumers: Projections.reportedByHealth, logger: logger)
        if let readURL = configuration.databaseReadURL {
            dependencies.standbyPool = ConnectionPool(
                configuration: PoolConfiguration(conninfo: readURL, maximumConnections: configuration.poolSize,
                                                 sessionTimeouts: configuration.sessionTimeouts),
                primary: pool, logger: logger)
        }
        // Half-configured or unreadable App Store settings stop the start,
        // rather than a server that refuses every notification later.
        if !configuration.appStoreRootCertificates.isEmpty || configuration.appStoreBundleID != nil {
            do {
                dependencies.appStoreVerifier = try AppStoreIntegration.makeVerifier(configuration)
            } catch {
                database.stopIfStarted()
                throw ValidationError("App Store notifications: \(error)")
            }
        }
        if dependencies.appStoreVerifier == nil {
            logger.notice("App Store notifications are off: set SUBLEDGER_APPSTORE_ROOT_CERTS and SUBLEDGER_APPSTORE_BUNDLE_ID to receive them (docs/appstore.md)")
        }
        if dependencies.appStoreVerifier != nil, configuration.appStoreEnvironments.contains(.production),
           configuration.appStoreAppAppleID == nil {
            logger.warning("Production App Store notifications are accepted without SUBLEDGER_APPSTORE_APP_APPLE_ID: set it so notifications for another app are refused, as Apple's library requires")
        }
        do {
            dependencies.appStoreAPIClient = try AppStoreAPISetup.client(configuration, verifier: dependencies.appStoreVerifier,
                                                                         logger: logger)
        } catch {
            database.stopIfStarted()
            throw error
        }
        let googlePlay: GooglePlayIntegration?
        do {
            googlePlay = try GooglePlayIntegration.check(dependencies)
        } catch {
            database.stopIfStarted()
            throw ValidationError("Google Play: \(error)")
        }
        // One client for the routes and the worker: one pacer, one cached JWT.
        // This is the composition root: the workers here, the request
        // components (`AppComponents`) in `buildApplication`.
        let services = makeReminderServices(dependencies, conninfo: database.conninfo, expirySweepInterval: configuration.expirySweepInterval)
            + makeReconcileServices(dependencies, conninfo: database.conninfo)
            + makeChangeFeedServices(dependencies, conninfo: database.conninfo)
            + makeGooglePlayServices(googlePlay)
        let app = buildApplication(dependencies, services: services)
        logger.info("subledger listening", metadata: [
            "http.host": "\(configuration.host)", "http.port": "\(configuration.port)",
            "db.embedded": "\(database.cluster != nil)",
        ])
        // The cluster service is first in the group: it stops after everything else,
        // and the snapshots saved in the background are stored before it does.
        let group = ServiceGroup(
            configuration: .init(
                services: [.init(service: EmbeddedClusterService(database: database)),
                           .init(service: SnapshotFlushService(ledgers: dependencies.ledgers)), .init(service: app)],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger))
        try await group.run()
    }
}

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Apply the SQL migrations in sql/ and exit.")

    @OptionGroup var options: ConfigurationOptions

    @Flag(help: "Rename subscribers' streams from another SUBLEDGER_SECRET's pseudonyms to this one's (rotating or removing the secret; stop every instance first).")
    var renameStreams = false

    func run() async throws {
        let configuration = try options.resolve()
        let logger = LoggingSetup.logger(configuration)
        let database = try await PreparedDatabase.prepare(configuration, renamingStreams: renameStreams, logger: logger)
        database.stopIfStarted()
        print("migrations are up to date")
    }
}
