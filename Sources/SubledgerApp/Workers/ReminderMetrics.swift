import Foundation
import Ledger
import Logging
import Metrics

/// The reminder metrics `/metrics` shows, created once.
enum ReminderMetrics {
    enum Outcome: String {
        /// The receiver answered 2xx.
        case success
        /// Any other answer, a timeout or a connection error.
        case failure
        /// The last allowed attempt failed: the reminder is `failed`.
        case gaveUp = "gave_up"
    }

    static let success = Counter(label: "subledger_reminder_deliveries_total", dimensions: [("outcome", Outcome.success.rawValue)])
    static let failure = Counter(label: "subledger_reminder_deliveries_total", dimensions: [("outcome", Outcome.failure.rawValue)])
    static let gaveUp = Counter(label: "subledger_reminder_deliveries_total", dimensions: [("outcome", Outcome.gaveUp.rawValue)])

    static func deliveries(_ outcome: Outcome) -> Counter {
        switch outcome {
        case .success: success
        case .failure: failure
        case .gaveUp: gaveUp
        }
    }

    /// How long a webhook POST took, whatever its outcome.
    static let latency = Timer(label: "subledger_reminder_delivery_duration_seconds", preferredDisplayUnit: .seconds)

    /// Reminders per status, refreshed by the dispatcher's loop.
    static let byStatus: [ReminderStatus: Gauge] = Dictionary(uniqueKeysWithValues: ReminderStatus.allCases.map {
        ($0, Gauge(label: "subledger_reminders", dimensions: [("status", $0.rawValue)]))
    })

    /// Expiry events the sweeper appended (not counting duplicates).
    static let expiriesAppended = Counter(label: "subledger_expiries_appended_total")
    static let expirySweepFailures = Counter(label: "subledger_expiry_sweep_failures_total")

    static func refresh(_ repository: ReminderStore, logger: Logger) async {
        do {
            for (status, count) in try await repository.counts() { byStatus[status]?.record(count) }
        } catch {
            logger.debug("cannot count reminders", metadata: ["error": "\(error)"])
        }
    }
}
