import Foundation
import Ledger
import Logging
import Postgres
import ServiceLifecycle

/// Runs `NotificationReconciler` every `interval`, as a `Service`, on one
/// instance of the fleet: the leader holds a session advisory lock on a
/// connection of its own (as the consumers do); when it dies, its session
/// ends and a standby takes over.
///
/// When Apple cannot be reached (or rate-limits, or answers something that
/// fails verification), the run fails without moving the checkpoint; the
/// worker retries after `retryDelay`, doubling up to `interval`, and the next
/// successful run covers everything since the checkpoint.
public struct ReconcileWorker: Service {
    public let reconciler: NotificationReconciler
    public let environments: [Ledger.Environment]
    public var interval: Duration
    /// How often a standby tries to take the lead.
    public var standbyPoll: Duration = .seconds(30)
    /// The first wait after a failed run.
    public var retryDelay: Duration = .seconds(60)
    let conninfo: String
    let logger: Logger

    public init(reconciler: NotificationReconciler, environments: [Ledger.Environment], interval: Duration, conninfo: String,
                logger: Logger = Logger(label: "subledger.appstore.reconcile")) {
        self.reconciler = reconciler
        self.environments = environments
        self.interval = interval
        self.conninfo = conninfo
        self.logger = logger
    }

    public func run() async throws {
        // Graceful shutdown cancels the loop: a run in flight stops without
        // moving the checkpoint, and the next leader covers its window.
        await cancelWhenGracefulShutdown {
            await runUntilCancelled()
        }
    }

    /// The loop, usable without a service group (tests): a session on a
    /// connection of its own, as a standby until it takes the lead, then as
    /// the leader; a lost connection starts another 5 s later.
    public func runUntilCancelled() async {
        await repeatRounds(logger: logger, failure: "app store reconciliation worker lost its connection; retrying",
                           retryAfter: .seconds(5)) {
            let connection = try await Connection.connect(to: conninfo, logger: logger)
            defer { connection.close() }
            while try await !ReconcileStore.tryLeadership(on: connection) {
                try await Task.sleep(for: standbyPoll)
            }
            logger.info("app store reconciliation leader", metadata: [
                "appstore.environments": "\(environments.map(\.rawValue))", "appstore.reconcile.interval": "\(interval)",
            ])
            try await lead(on: connection)
            return .zero
        }
    }

    /// Runs while the lock's session lives.
    private func lead(on connection: Connection) async throws {
        var failures = 0
        try await repeatRounds {
            try await ReconcileStore.ping(connection)
            var wait = interval
            var failed = false
            for environment in environments {
                do {
                    _ = try await reconciler.reconcile(environment: environment)
                } catch is CancellationError {
                    throw CancellationError()
                } catch {
                    if Task.isCancelled { throw CancellationError() }
                    failed = true
                    wait = min(wait, retryDelay * (1 << min(failures, 16)))
                    if let apiError = error as? AppStoreAPIError, case .rateLimited(let retryAt) = apiError.kind {
                        wait = max(wait, .milliseconds(Int64(max(0, retryAt.timeIntervalSinceNow) * 1000)))
                    }
                    logger.error("app store reconciliation failed; the checkpoint stays and the next run covers the gap", metadata: [
                        "appstore.environment": "\(environment.rawValue)", "error": "\(error)", "appstore.reconcile.retry_in": "\(wait)",
                    ])
                }
            }
            failures = failed ? failures + 1 : 0
            return wait
        }
    }
}

extension AppStoreIntegration {
    /// The reconciler, when notifications and the App Store Server API are both configured.
    public var reconciler: NotificationReconciler? {
        guard let api, let notifications else { return nil }
        return NotificationReconciler(client: api, notifications: notifications, pool: writer.pool, logger: logger)
    }

    /// The environments reconciliation asks about (`SUBLEDGER_APPSTORE_ENVIRONMENTS`).
    public var environmentsToReconcile: [Ledger.Environment] { reconcileEnvironments }
}

/// The reconciliation worker `serve` runs: none when the App Store Server API
/// or notifications are not configured, or the interval is `P0D`.
public func makeReconcileServices(_ dependencies: AppDependencies, conninfo: String) -> [any Service] {
    guard let interval = dependencies.configuration.appStoreReconcileInterval else {
        dependencies.logger.notice("app store reconciliation is off (SUBLEDGER_APPSTORE_RECONCILE_INTERVAL=P0D)")
        return []
    }
    let integration = AppStoreIntegration(dependencies)
    guard let reconciler = integration.reconciler else {
        if dependencies.configuration.hasAppStoreAPIKey {
            dependencies.logger.warning("app store reconciliation is off", metadata: [
                "reason": "\(integration.apiUnavailable.isEmpty ? integration.unavailable : integration.apiUnavailable)",
            ])
        }
        return []
    }
    return [ReconcileWorker(reconciler: reconciler, environments: integration.environmentsToReconcile, interval: interval,
                            conninfo: conninfo, logger: dependencies.logger)]
}
