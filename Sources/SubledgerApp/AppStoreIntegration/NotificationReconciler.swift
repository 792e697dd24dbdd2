import AppStore
import Crypto
import Foundation
import JSON
import Ledger
import Logging
import Metrics
import Postgres

/// Recovers App Store notifications the service never received: asks Get
/// Notification History for the window since the checkpoint (overlapping it
/// a little), and feeds every notification through the same path as
/// `POST /v1/appstore/notifications` (`NotificationService.receive`), which
/// dedupes by `notificationUUID`: one already received changes nothing.
///
/// A page that cannot be had (Apple away, an answer that is not Apple's
/// JSON) ends the run without moving the checkpoint, so the next run asks for
/// the same window again. One item that fails verification does not: it is
/// stored `rejected` with its reason, counted, and skipped, and the run goes
/// on; otherwise one bad item would hold the checkpoint, and every
/// notification after it, for ever.
public struct NotificationReconciler: Sendable {
    let client: AppStoreAPIClient
    let notifications: NotificationService
    let pool: ConnectionPool
    let logger: Logger
    /// How far before the checkpoint a window starts (late-stored notifications).
    public var overlap: TimeInterval = 600
    /// The window of a first run, without a checkpoint.
    public var firstWindow: TimeInterval = 86_400
    /// Apple keeps 180 days of history; windows start within it.
    public var historyLimit: TimeInterval = 179 * 86_400
    public var now: @Sendable () -> Date = { Date() }

    public init(client: AppStoreAPIClient, notifications: NotificationService, pool: ConnectionPool, logger: Logger) {
        self.client = client
        self.notifications = notifications
        self.pool = pool
        self.logger = logger
    }

    /// How far a run has got.
    public struct Progress: Sendable, CustomStringConvertible {
        public var environment: Ledger.Environment
        public var pages = 0
        public var notifications = 0
        public var recovered = 0
        public var rejected = 0
        public var description: String {
            "\(environment.rawValue): \(pages) pages, \(notifications) notifications, \(recovered) recovered, \(rejected) rejected"
        }
    }

    /// What a run did.
    public struct Report: Sendable, CustomStringConvertible {
        public var environment: Ledger.Environment
        public var windowStart: Date
        public var windowEnd: Date
        public var pages: Int
        public var notifications: Int
        /// Stored by this run: they had never arrived by POST.
        public var recovered: Int
        /// Items that failed verification, stored `rejected` (once) and skipped.
        public var rejected: Int
        /// The checkpoint after the run.
        public var reconciledUntil: Date
        public var description: String {
            "\(environment.rawValue) \(RFC3339.format(windowStart)) … \(RFC3339.format(windowEnd)): \(pages) pages, "
                + "\(notifications) notifications, \(recovered) recovered, \(rejected) rejected; reconciled until \(RFC3339.format(reconciledUntil))"
        }
    }

    /// One run over [`since` or the checkpoint − overlap, now].
    public func reconcile(environment: Ledger.Environment, since: Date? = nil,
                          progress: (@Sendable (Progress) -> Void)? = nil) async throws -> Report {
        let end = now()
        let checkpoint = try await pool.withConnection { try await ReconcileStore.checkpoint(environment, on: $0) }
        var start = since ?? checkpoint.map { $0.reconciledUntil.addingTimeInterval(-overlap) } ?? end.addingTimeInterval(-firstWindow)
        let oldest = end.addingTimeInterval(-historyLimit)
        if start < oldest {
            logger.warning("app store reconciliation window starts before Apple's 180 days of history; older notifications cannot be recovered", metadata: [
                "appstore.environment": "\(environment.rawValue)", "appstore.reconcile.asked_start": "\(RFC3339.format(start))",
            ])
            start = oldest
        }
        var state = Progress(environment: environment)
        do {
            var token: String?
            var tokensSeen = Set<String>()
            repeat {
                let page = try await client.notificationHistory(environment: environment, start: start, end: end, paginationToken: token)
                state.pages += 1
                for item in page.notifications {
                    let receipt = try await notifications.receive(item.notification, signedPayload: item.signedPayload)
                    state.notifications += 1
                    if !receipt.duplicate {
                        state.recovered += 1
                        Self.recovered(environment).increment()
                        logger.notice("app store notification recovered by reconciliation", metadata: [
                            "appstore.notification.uuid": "\(receipt.notificationUUID)", "appstore.environment": "\(environment.rawValue)",
                            "appstore.notification.status": "\(receipt.status.rawValue)",
                        ])
                    }
                }
                for item in page.unverified {
                    state.rejected += 1
                    try await reject(item, environment: environment)
                }
                progress?(state)
                token = page.hasMore ? page.paginationToken : nil
                try Self.checkPaging(token, seen: &tokensSeen, pages: state.pages, limit: client.settings.maximumHistoryPages)
            } while token != nil
        } catch {
            Self.runs(environment, "failure").increment()
            throw error
        }
        let reconciledUntil = try await pool.withConnection {
            try await ReconcileStore.save(environment, windowStart: start, windowEnd: end, recovered: state.recovered, on: $0)
        }
        Self.runs(environment, "success").increment()
        Self.windowStart(environment).record(start.timeIntervalSince1970)
        Self.windowEnd(environment).record(end.timeIntervalSince1970)
        let report = Report(environment: environment, windowStart: start, windowEnd: end, pages: state.pages,
                            notifications: state.notifications, recovered: state.recovered, rejected: state.rejected,
                            reconciledUntil: reconciledUntil)
        logger.info("app store reconciliation done", metadata: [
            "appstore.environment": "\(environment.rawValue)", "appstore.reconcile.window_start": "\(RFC3339.format(start))",
            "appstore.reconcile.window_end": "\(RFC3339.format(end))", "appstore.reconcile.pages": "\(state.pages)",
            "appstore.reconcile.notifications": "\(state.notifications)", "appstore.reconcile.recovered": "\(state.recovered)",
            "appstore.reconcile.rejected": "\(state.rejected)",
        ])
        return report
    }

    /// Stores an item that failed verification as `rejected`, once, under an
    /// id derived from its bytes; what it claims (type, uuid, date) is only
    /// described, as it cannot be trusted.
    private func reject(_ item: AppStoreAPIClient.UnverifiedNotification, environment: Ledger.Environment) async throws {
        let claimed = AppStoreVerifier.unverifiedNotification(item.signedPayload)
        let claimedType = claimed.flatMap { try? InputLimits.identifier($0.notificationType.rawValue, field: "notificationType") }
        let claimedUUID = claimed.flatMap { try? InputLimits.identifier($0.notificationUUID, field: "notificationUUID") }
        let signedDate = claimed.flatMap { try? InputLimits.instant($0.signedDate, field: "signedDate") } ?? now()
        let row = UnverifiedNotificationRow(
            id: Self.unverifiedID(item.signedPayload), claimedType: claimedType ?? "UNVERIFIED", signedDate: signedDate,
            environment: environment, error: item.error,
            summary: "failed verification in Get Notification History" + (claimedUUID.map { "; claims notificationUUID \($0)" } ?? ""),
            signedPayload: item.signedPayload)
        let stored = try await pool.withConnection { try await NotificationStore.insert(row, on: $0) }
        if stored { Self.rejected(environment).increment() }
        logger.error("app store notification of the history failed verification; stored as rejected and skipped", metadata: [
            "appstore.notification.id": "\(row.id)", "appstore.environment": "\(environment.rawValue)",
            "error.code": "\(item.error.code)", "error.field": "\(item.error.field)", "appstore.reconcile.first_seen": "\(stored)",
        ])
    }

    /// A stable id for an item that cannot be trusted: the same bytes read
    /// again (the overlap, a rerun) find the row already stored.
    static func unverifiedID(_ signedPayload: String) -> String {
        "unverified:" + SHA256.hash(data: Data(signedPayload.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// The stored checkpoint of `environment`, for status displays.
    public func reconciledUntil(_ environment: Ledger.Environment) async throws -> Date? {
        try await pool.withConnection { try await ReconcileStore.checkpoint(environment, on: $0) }?.reconciledUntil
    }

    // MARK: Metrics

    /// `subledger_appstore_reconcile_recovered_total{environment}`: notifications only reconciliation brought in.
    static func recovered(_ environment: Ledger.Environment) -> Counter {
        Counter(label: "subledger_appstore_reconcile_recovered_total", dimensions: [("environment", environment.rawValue)])
    }

    /// `subledger_appstore_reconcile_rejected_total{environment}`: items of
    /// the history that failed verification, each counted once, when stored.
    static func rejected(_ environment: Ledger.Environment) -> Counter {
        Counter(label: "subledger_appstore_reconcile_rejected_total", dimensions: [("environment", environment.rawValue)])
    }

    /// `subledger_appstore_reconcile_runs_total{environment, outcome}`.
    static func runs(_ environment: Ledger.Environment, _ outcome: String) -> Counter {
        Counter(label: "subledger_appstore_reconcile_runs_total", dimensions: [("environment", environment.rawValue), ("outcome", outcome)])
    }

    /// The last successful window, as UNIX seconds.
    static func windowStart(_ environment: Ledger.Environment) -> Gauge {
        Gauge(label: "subledger_appstore_reconcile_last_window_start_seconds", dimensions: [("environment", environment.rawValue)])
    }

    static func windowEnd(_ environment: Ledger.Environment) -> Gauge {
        Gauge(label: "subledger_appstore_reconcile_last_window_end_seconds", dimensions: [("environment", environment.rawValue)])
    }

    /// Paging ends: a token Apple gave before would loop for ever, and a
    /// history longer than the cap is refused rather than read without end.
    /// The checkpoint stays where it was; the next run starts over.
    static func checkPaging(_ token: String?, seen: inout Set<String>, pages: Int, limit: Int) throws(AppStoreAPIError) {
        guard let token else { return }
        guard seen.insert(token).inserted else {
            throw AppStoreAPIError(.invalidAnswer, endpoint: .notificationHistory,
                                   message: "Apple gave the same paginationToken twice (page \(pages)); reconciliation stopped")
        }
        guard pages < limit else {
            throw AppStoreAPIError(.invalidAnswer, endpoint: .notificationHistory,
                                   message: "notification history still has more after \(limit) pages; reconciliation stopped")
        }
    }
}
