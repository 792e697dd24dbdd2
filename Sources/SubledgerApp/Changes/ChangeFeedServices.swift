import EventStore
import Foundation
import Logging
import ServiceLifecycle

/// The change feed's workers `serve` runs, in dependency order: the feed's
/// consumer (one leader across instances), the time sweeper, the webhook
/// dispatcher.
public func makeChangeFeedServices(
    _ dependencies: AppDependencies, conninfo: String, sweepInterval: Duration = .seconds(15),
    dispatcher settings: ChangeDispatcher.Settings = ChangeDispatcher.Settings()
) -> [any Service] {
    let logger = dependencies.logger
    return [
        ConsumerRunner(store: dependencies.store, consumer: ChangeFeedConsumer(catalog: dependencies.catalog.catalog),
                       conninfo: conninfo, logger: logger),
        ChangeTimeSweeper(pool: dependencies.pool, catalog: dependencies.catalog.catalog, interval: sweepInterval, logger: logger),
        ChangeDispatcher(pool: dependencies.pool, conninfo: conninfo, settings: settings, logger: logger),
    ]
}
