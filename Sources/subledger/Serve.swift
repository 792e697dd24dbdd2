import ArgumentParser
import Foundation
import Logging
import Metrics
import Postgres
import Prometheus
import Server
import ServiceLifecycle

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the HTTP service (on an embedded PostgreSQL when no DATABASE_URL is given).")

    @OptionGroup var options: ConfigurationOptions

    func run() async throws {
        let configuration = try options.resolve()
        let logger = LoggingSetup.logger(configuration)
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))

        let catalog = try CatalogSource.load(path: configuration.productsPath)
        let database = try await PreparedDatabase.prepare(configuration, logger: logger)
        let pool = ConnectionPool(
            configuration: PoolConfiguration(conninfo: database.conninfo, maximumConnections: configuration.poolSize),
            logger: logger)
        let dependencies = AppDependencies(
            configuration: configuration, pool: pool, catalog: catalog, metrics: registry, logger: logger)
        let app = buildApplication(dependencies)
        logger.info("subledger listening", metadata: [
            "http.host": "\(configuration.host)", "http.port": "\(configuration.port)",
            "db.embedded": "\(database.cluster != nil)",
        ])
        // The cluster service is first in the group: it stops after everything else.
        let group = ServiceGroup(
            configuration: .init(
                services: [.init(service: EmbeddedClusterService(database: database)), .init(service: app)],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger))
        try await group.run()
    }
}

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Apply the SQL migrations in sql/ and exit.")

    @OptionGroup var options: ConfigurationOptions

    func run() async throws {
        let configuration = try options.resolve()
        let logger = LoggingSetup.logger(configuration)
        let database = try await PreparedDatabase.prepare(configuration, logger: logger)
        database.stopIfStarted()
        print("migrations are up to date")
    }
}
