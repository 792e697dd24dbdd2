import AppStore
import EventStore
import Foundation
import Hummingbird
import HummingbirdCore
import Ledger
import Logging
import NIOCore
import Postgres
import ServiceLifecycle
import SubledgerApp

/// The router with every route; tests drive it directly.
public func buildRouter(_ dependencies: AppDependencies) -> Router<AppRequestContext> {
    let router = Router(context: AppRequestContext.self)
    // Outermost, so it counts the status the client gets, after error mapping.
    router.add(middleware: RequestMetricsMiddleware())
    router.add(middleware: ErrorMiddleware(logger: dependencies.logger))
    router.add(middleware: BodyLimitMiddleware(maximumBodySize: dependencies.configuration.maximumBodySize))
    let keys = dependencies.configuration.apiKeys
    let appStore = AppStoreIntegration(dependencies)
    var writer = LedgerWriter(dependencies)
    writer.claimObserver = appStore.claimObserver
    // Concurrent requests for different subscribers share a commit.
    writer.combiner = dependencies.writeCombiner
    // Concurrent reads of current states share a round trip.
    var reader = SubscriberReader(dependencies)
    reader.combiner = ReadCombiner()
    HealthController(health: HealthStore(dependencies), metrics: dependencies.metrics, logger: dependencies.logger)
        .addRoutes(to: router)
    RemindersController(store: ReminderStore(pool: dependencies.pool, listings: dependencies.supportReads), keys: keys).addRoutes(to: router)
    SubscribersController(writer: writer, appStore: appStore, reader: reader, keys: keys).addRoutes(to: router)
    TransactionsController(reader: reader, keys: keys).addRoutes(to: router)
    ProductsController(catalog: dependencies.catalog, invalidProducts: InvalidProductStore(pool: dependencies.pool, listings: dependencies.supportReads),
                       keys: keys, logger: dependencies.logger)
        .addRoutes(to: router)
    OpenAPIController().addRoutes(to: router)
    AppStoreController(appStore: appStore, keys: keys).addRoutes(to: router)
    NotificationsController(store: NotificationStore(pool: dependencies.pool, listings: dependencies.supportReads), keys: keys).addRoutes(to: router)
    ParkedController(store: ParkedEventStore(pool: dependencies.pool), keys: keys).addRoutes(to: router)
    ConsoleController().addRoutes(to: router)
    AppStoreAPIController(appStore: appStore, keys: keys).addRoutes(to: router)
    let readModels = ReadModelQueries(pool: dependencies.pool, share: dependencies.supportReads)
    SubscriptionsController(queries: readModels, keys: keys, now: reader.now).addRoutes(to: router)
    StatsController(queries: readModels, keys: keys, now: reader.now).addRoutes(to: router)
    ParkedReplayController(store: dependencies.store, consumers: Projections.all(store: dependencies.store, catalog: dependencies.catalog.catalog),
                           keys: keys)
        .addRoutes(to: router)
    return router
}

/// The HTTP application with its services, in dependency order: the pool
/// first (shut down last), then `extraServices` (workers), then the server.
/// `extraRoutes` adds to the API's routes (the bench's floor routes);
/// `onServerRunning` learns the listening channel (its port, when 0 was asked).
public func buildApplication(
    _ dependencies: AppDependencies, services extraServices: [any Service] = [],
    extraRoutes: (Router<AppRequestContext>) -> Void = { _ in },
    onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in }
) -> some ApplicationProtocol {
    let configuration = dependencies.configuration
    let router = buildRouter(dependencies)
    extraRoutes(router)
    let limits = HTTPServerLimits(
        readTimeout: configuration.httpReadTimeout, idleTimeout: configuration.httpIdleTimeout,
        maximumConnections: configuration.httpMaximumConnections)
    return Application(
        router: router,
        server: .http1(limits: limits),
        configuration: ApplicationConfiguration(
            address: .hostname(configuration.host, port: configuration.port), serverName: "subledger",
            availableConnectionsDelegate: MaximumAvailableConnections(limits.maximumConnections, logger: dependencies.logger)),
        services: [dependencies.pool] + extraServices,
        onServerRunning: onServerRunning,
        logger: dependencies.logger)
}
