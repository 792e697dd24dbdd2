import AppStore
import EventStore
import Foundation
import Hummingbird
import HummingbirdCore
import Ledger
import Logging
import NIOCore
import ServiceLifecycle
import SubledgerApp

/// The router with every route of the API, built from wired components;
/// tests drive it directly.
public func buildRouter(_ components: AppComponents) -> Router<AppRequestContext> {
    let dependencies = components.dependencies
    let router = Router(context: AppRequestContext.self)
    // Outermost, so it counts the status the client gets, after error mapping.
    router.add(middleware: RequestMetricsMiddleware())
    router.add(middleware: ErrorMiddleware(logger: dependencies.logger,
                                           maximumBodySize: dependencies.configuration.maximumBodySize))
    router.add(middleware: BodyLimitMiddleware(maximumBodySize: dependencies.configuration.maximumBodySize))
    router.add(middleware: AuditTrailMiddleware(trail: dependencies.auditTrail))
    router.add(middleware: ConsistencyMiddleware(positions: dependencies.commitPositions, logger: dependencies.logger))
    // The GET routes read through the components' read side (the standbys
    // when DATABASE_READ_URL is set); every store was built by AppComponents.
    let keys = dependencies.configuration.apiKeys
    let (writer, appStore, now) = (components.writer, components.appStore, components.reader.now)
    HealthController(health: components.health, metrics: dependencies.metrics, logger: dependencies.logger).addRoutes(to: router)
    RemindersController(store: components.reminders, keys: keys).addRoutes(to: router)
    SubscribersController(writer: writer, appStore: appStore, reader: components.stateReader, keys: keys).addRoutes(to: router)
    TransactionsController(reader: components.stateReader, keys: keys).addRoutes(to: router)
    ProductsController(catalog: dependencies.catalog, invalidProducts: components.invalidProducts, keys: keys, logger: dependencies.logger)
        .addRoutes(to: router)
    OpenAPIController().addRoutes(to: router)
    AppStoreController(appStore: appStore, keys: keys).addRoutes(to: router)
    GooglePlayController(googlePlay: components.googlePlay, keys: keys, logger: dependencies.logger).addRoutes(to: router)
    NotificationsController(store: components.notifications, keys: keys).addRoutes(to: router)
    ParkedController(store: components.parked, keys: keys).addRoutes(to: router)
    ConsoleController().addRoutes(to: router)
    AppStoreAPIController(appStore: appStore, keys: keys).addRoutes(to: router)
    SubscriptionsController(queries: components.readModels, keys: keys, now: now).addRoutes(to: router)
    StatsController(queries: components.readModels, keys: keys, now: now).addRoutes(to: router)
    AnalyticsController(store: components.analytics, keys: keys, now: now).addRoutes(to: router)
    ParkedReplayController(store: dependencies.store, consumers: components.replayConsumers, keys: keys).addRoutes(to: router)
    // The change feed: pulled, and pushed to registered webhooks.
    ChangesController(reader: components.changeFeed, keys: keys, maximumWait: dependencies.configuration.changesMaximumWait)
        .addRoutes(to: router)
    WebhooksController(store: components.webhooks, keys: keys, destinations: components.webhookDestinations).addRoutes(to: router)
    GrantsController(writer: writer, keys: keys, maximumDuration: dependencies.configuration.grantMaximumDuration).addRoutes(to: router)
    ErasureController(service: components.erasure, keys: keys).addRoutes(to: router)
    AuditController(trail: dependencies.auditTrail, store: components.audit, keys: keys).addRoutes(to: router)
    return router
}

/// The HTTP application: the API's components wired from `dependencies`,
/// their router, and the services in dependency order (the pool first, shut
/// down last, then `extraServices`, the workers, then the server).
/// `onServerRunning` learns the listening channel (its port, when 0 was asked).
public func buildApplication(
    _ dependencies: AppDependencies, services extraServices: [any Service] = [],
    onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in }
) -> some ApplicationProtocol {
    buildApplication(router: buildRouter(AppComponents(dependencies)), dependencies: dependencies, services: extraServices,
                     onServerRunning: onServerRunning)
}

/// The HTTP application serving `router` where the configuration says, with
/// the same services as above, behind the server's limits (read and idle
/// timeouts, a connection cap).
public func buildApplication(
    router: Router<AppRequestContext>, dependencies: AppDependencies, services extraServices: [any Service] = [],
    onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in }
) -> some ApplicationProtocol {
    let configuration = dependencies.configuration
    let limits = HTTPServerLimits(
        readTimeout: configuration.httpReadTimeout, idleTimeout: configuration.httpIdleTimeout,
        maximumConnections: configuration.httpMaximumConnections)
    return Application(
        router: router,
        server: .http1(limits: limits),
        configuration: ApplicationConfiguration(
            address: .hostname(configuration.host, port: configuration.port), serverName: "subledger",
            availableConnectionsDelegate: MaximumAvailableConnections(limits.maximumConnections, logger: dependencies.logger)),
        services: [dependencies.pool] + (dependencies.standbyPool.map { [$0] } ?? []) + [auditService(dependencies)] + extraServices,
        onServerRunning: onServerRunning,
        logger: dependencies.logger)
}

/// Writes the audit trail and prunes it; placed right after the pool, it
/// stops after the server and the workers, so their last entries are written.
func auditService(_ dependencies: AppDependencies) -> AuditService {
    AuditService(trail: dependencies.auditTrail, pool: dependencies.pool, retention: dependencies.configuration.auditRetention,
                 logger: dependencies.logger)
}
