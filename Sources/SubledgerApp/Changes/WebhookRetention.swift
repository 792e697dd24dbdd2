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
            let rows = try await pool.query("""
                DELETE FROM webhook_deliveries WHERE id IN (
                    SELECT id FROM webhook_deliveries
                    WHERE status = 'sent' AND sent_at < now() - make_interval(secs => \(Self.seconds(retention)))
                    ORDER BY sent_at LIMIT \(settings.pruneBatch))
                RETURNING 1
                """)
            if !rows.isEmpty {
                logger.info("sent webhook deliveries pruned", metadata: ["deliveries.pruned": "\(rows.count)"])
            }
            return rows.count
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
