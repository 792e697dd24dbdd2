import Foundation
import Logging
import Metrics
import Postgres

/// Sent deliveries are kept `deliveredRetention` (30 days by default), long
/// enough to answer "was it delivered?" in `GET /v1/webhooks/{id}/deliveries`,
/// then deleted by the dispatcher's loop, a bounded batch at a time, so the
/// table does not grow for ever. Pending and failed deliveries are kept
/// (a failed one may still be retried by hand); an endpoint's removal takes
/// its deliveries with it.
extension ChangeDispatcher {
    /// Deletes up to `pruneBatch` sent deliveries older than the retention,
    /// when `pruneInterval` has passed since the last look; returns how many.
    @discardableResult
    func prune() async -> Int {
        guard let retention = settings.deliveredRetention else { return 0 }
        do {
            let pruned = try await WebhookDeliveryStore.deleteSent(olderThan: retention, limit: settings.pruneBatch, pool: pool)
            if pruned > 0 {
                logger.info("sent webhook deliveries pruned", metadata: ["deliveries.pruned": "\(pruned)"])
            }
            return pruned
        } catch {
            logger.warning("cannot prune sent webhook deliveries", metadata: ["error": "\(String(reflecting: error))"])
            return 0
        }
    }
}

/// The dispatcher's own gauges.
enum WebhookDispatchMetrics {
    /// Endpoints whose circuit breaker is open in this instance.
    static var pausedEndpoints: Gauge { Gauge(label: "subledger_webhook_paused_endpoints") }
}
