import EventStore
import Foundation
import Logging
import ServiceLifecycle

/// The change feed's workers `serve` runs, in dependency order: the feed's
/// consumer (one leader across instances), the time sweeper (which also
/// publishes due reminders and stores the `SUBLEDGER_WEBHOOK_URL` endpoint),
/// the webhook dispatcher (every endpoint's, reminders' included).
public func makeChangeFeedServices(
    _ dependencies: AppDependencies, conninfo: String, sweepInterval: Duration? = nil,
    dispatcher settings: ChangeDispatcher.Settings = ChangeDispatcher.Settings()
) -> [any Service] {
    let logger = dependencies.logger
    var settings = settings
    settings.destinations = WebhookDestinations(allowPrivate: dependencies.configuration.webhookAllowPrivate)
    settings.sealing = WebhookSealingSource(dependencies.configuration.secret)
    return [
        ConsumerRunner(store: dependencies.store, consumer: ChangeFeedConsumer(catalog: dependencies.catalog.catalog),
                       conninfo: conninfo, logger: logger),
        ChangeTimeSweeper(pool: dependencies.pool, catalog: dependencies.catalog.catalog,
                          interval: sweepInterval ?? dependencies.configuration.changesSweepInterval,
                          reminderWebhook: ReminderWebhook(dependencies.configuration), conninfo: conninfo, logger: logger),
        ChangeDispatcher(pool: dependencies.pool, conninfo: conninfo, settings: settings, logger: logger),
    ]
}

extension Projections {
    /// The consumers `/health` reports the lag of: the projections and the
    /// change feed's consumer.
    public static let reportedByHealth = names + [ChangeFeedConsumer.consumerName]
}
