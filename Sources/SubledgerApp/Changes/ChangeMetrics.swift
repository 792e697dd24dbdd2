import Foundation
import Logging
import Metrics
import Postgres

/// The change feed's metrics `/metrics` shows, created once.
public enum ChangeMetrics {
    enum Outcome: String {
        /// The receiver answered 2xx.
        case success
        /// Any other answer, a timeout or a connection error.
        case failure
        /// Retried for the whole retry period: the delivery is `failed`.
        case gaveUp = "gave_up"
    }

    /// Looked up in the metrics backend at each use (the backend keeps one
    /// per label and dimensions), so a first use before the backend is set
    /// up cannot leave a counter that counts nowhere.
    static func deliveries(_ outcome: Outcome) -> Counter {
        Counter(label: "subledger_webhook_deliveries_total", dimensions: [("outcome", outcome.rawValue)])
    }

    /// Seconds since the oldest event the feed has not yet turned into
    /// changes was recorded (0 when caught up).
    static var feedLag: Gauge { Gauge(label: "subledger_change_feed_lag_seconds") }

    /// Per endpoint: age of its oldest pending delivery (0 when none).
    static func oldestPending(endpoint: String) -> Gauge {
        Gauge(label: "subledger_webhook_oldest_pending_seconds", dimensions: [("webhook", endpoint)])
    }

    /// Refreshed by the dispatcher's loop: the feed's lag and each endpoint's
    /// oldest pending delivery.
    static func refresh(pool: ConnectionPool, logger: Logger) async {
        do {
            let rows = try await pool.withConnection {
                try await $0.pipeline([WebhookDeliveryStore.oldestPendingStatement, lagQuery])
            }
            for row in rows[0] {
                oldestPending(endpoint: try row.decode(String.self, at: 0)).record(try row.decode(Double.self, at: 1))
            }
            feedLag.record(try rows[1].first?.decode(Double?.self, at: 0) ?? 0)
        } catch {
            logger.debug("cannot refresh the change feed metrics", metadata: ["error": "\(error)"])
        }
    }

    /// now − recorded_at of the first event after the feed consumer's
    /// checkpoint (`ChangeFeedQueries.lagStatement`).
    public static var lagQuery: PostgresQuery { ChangeFeedQueries.lagStatement }
}
