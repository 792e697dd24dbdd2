import EventStore
import Foundation
import Ledger
import Logging
import ServiceLifecycle

/// The projections fed from the event log: what `serve` runs, `/health`
/// reports the lag of, and `subledger rebuild` replays.
public enum Projections {
    public static let names = [ReminderProjection.consumerName, SubscriptionProjection.consumerName, AnalyticsProjection.consumerName]

    /// The analytics count days: a second's delay costs nothing, and
    /// batching a second of writes keeps the projection's work off the
    /// write path's cores.
    public static func gathering(of consumer: String) -> Duration? {
        consumer == AnalyticsProjection.consumerName ? .seconds(1) : nil
    }

    public static func all(store: EventStore, catalog: Catalog) -> [any EventConsumer] {
        [ReminderProjection(store: store, catalog: catalog), SubscriptionProjection(store: store, catalog: catalog),
         AnalyticsProjection(catalog: catalog)]
    }

    /// What `subledger rebuild` rebuilds: the projection named, or (nil)
    /// all of them in one pass over the log (`ProjectionsTogether`).
    public static func rebuilt(_ name: String?, store: EventStore, catalog: Catalog) -> [any EventConsumer] {
        guard let name else { return [ProjectionsTogether(store: store, catalog: catalog)] }
        return all(store: store, catalog: catalog).filter { $0.name == name }
    }
}

/// The reminder workers `serve` runs, in dependency order: the projection's
/// runner, the expiry sweeper (reads what the projection wrote). Due
/// reminders are published and delivered by the change feed's workers
/// (`makeChangeFeedServices`).
public func makeReminderServices(
    _ dependencies: AppDependencies, conninfo: String, expirySweepInterval: Duration = .seconds(30)
) -> [any Service] {
    let logger = dependencies.logger
    var services: [any Service] = Projections.all(store: dependencies.store, catalog: dependencies.catalog.catalog).map {
        var runner = ConsumerRunner(store: dependencies.store, consumer: $0, conninfo: conninfo, logger: logger)
        runner.gathering = Projections.gathering(of: $0.name)
        return runner
    }
    services.append(ExpirySweeper(store: dependencies.store, catalog: dependencies.catalog.catalog,
                                  interval: expirySweepInterval, logger: logger))
    return services
}
