import AppStore
import Foundation
import EventStore
import Hummingbird
import Ledger
import Logging
import Postgres
import Prometheus
import ServiceLifecycle

/// What the HTTP layer and workers share.
public struct AppDependencies: Sendable {
    public var configuration: ServerConfiguration
    public var pool: ConnectionPool
    public var store: EventStore
    public var catalog: CatalogSource
    public var logger: Logger
    /// Rendered by `/metrics`; `main` bootstraps swift-metrics with it.
    public var metrics: PrometheusCollectorRegistry
    /// Consumers whose lag `/health` reports.
    public var consumers: [String]
    /// Verifies App Store notifications; nil: built from the configuration
    /// (`AppStoreIntegration.makeVerifier`).
    public var appStoreVerifier: AppStoreVerifier?

    public init(configuration: ServerConfiguration, pool: ConnectionPool, catalog: CatalogSource,
                metrics: PrometheusCollectorRegistry = PrometheusCollectorRegistry(),
                consumers: [String] = [], logger: Logger) {
        self.configuration = configuration
        self.pool = pool
        self.store = EventStore(pool: pool, logger: logger)
        self.catalog = catalog
        self.metrics = metrics
        self.consumers = consumers
        self.logger = logger
    }
}

/// The catalog and what `/v1/products` serves for it (read once at start).
public struct CatalogSource: Sendable {
    public var catalog: Catalog
    /// The file's modification time, for `Last-Modified`.
    public var modified: Date
    public var raw: Data

    public init(catalog: Catalog, modified: Date, raw: Data) {
        self.catalog = catalog
        self.modified = modified
        self.raw = raw
    }

    /// Loads `SUBLEDGER_PRODUCTS`; without it, an empty catalog.
    public static func load(path: String?) throws -> CatalogSource {
        guard let path else {
            let empty = Data(#"{"version": 0, "products": []}"#.utf8)
            return CatalogSource(catalog: try Catalog.decode(from: empty), modified: Date(timeIntervalSince1970: 0), raw: empty)
        }
        let url = URL(fileURLWithPath: path)
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw ConfigurationError(variable: "SUBLEDGER_PRODUCTS", message: "cannot read \(path): \(error.localizedDescription)")
        }
        let catalog: Catalog
        do {
            catalog = try Catalog.decode(from: data)
        } catch {
            throw ConfigurationError(variable: "SUBLEDGER_PRODUCTS", message: "\(path): \(error)")
        }
        let attributes = try? FileManager.default.attributesOfItem(atPath: path)
        return CatalogSource(catalog: catalog, modified: attributes?[.modificationDate] as? Date ?? Date(), raw: data)
    }
}

/// The router with every route; tests drive it directly.
public func buildRouter(_ dependencies: AppDependencies) -> Router<AppRequestContext> {
    let router = Router(context: AppRequestContext.self)
    router.add(middleware: ErrorMiddleware(logger: dependencies.logger))
    router.add(middleware: MetricsMiddleware())
    router.add(middleware: BodyLimitMiddleware(maximumBodySize: dependencies.configuration.maximumBodySize))
    HealthController(dependencies: dependencies).addRoutes(to: router)
    RemindersController(repository: ReminderRepository(pool: dependencies.pool), keys: dependencies.configuration.apiKeys)
        .addRoutes(to: router)
    let keys = dependencies.configuration.apiKeys
    let appStore = AppStoreIntegration(dependencies)
    var ledger = LedgerService(dependencies)
    ledger.claimObserver = appStore.claimObserver
    SubscriberController(ledger: ledger, keys: keys).addRoutes(to: router)
    TransactionController(ledger: ledger, keys: keys).addRoutes(to: router)
    ProductsController(catalog: dependencies.catalog, pool: dependencies.pool, keys: keys, logger: dependencies.logger)
        .addRoutes(to: router)
    OpenAPIController().addRoutes(to: router)
    appStore.addRoutes(to: router, ledger: ledger, keys: keys)
    return router
}

/// The HTTP application with its services, in dependency order: the pool
/// first (shut down last), then `extraServices` (workers), then the server.
public func buildApplication(
    _ dependencies: AppDependencies, services extraServices: [any Service] = []
) -> some ApplicationProtocol {
    let configuration = dependencies.configuration
    return Application(
        router: buildRouter(dependencies),
        configuration: ApplicationConfiguration(
            address: .hostname(configuration.host, port: configuration.port), serverName: "subledger"),
        services: [dependencies.pool] + extraServices,
        logger: dependencies.logger)
}

/// Applies the configured body limit to the request context.
struct BodyLimitMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let maximumBodySize: Int

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        context.maximumBodySize = maximumBodySize
        return try await next(request, context)
    }
}
