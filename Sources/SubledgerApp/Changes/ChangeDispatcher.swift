import AsyncHTTPClient
import EventStore
import Foundation
import JSON
import Ledger
import Logging
import Metrics
import NIOCore
import Postgres
import ServiceLifecycle

/// Delivers changes to the registered webhook endpoints, as a `Service`. Any
/// number of instances may run; they share the work.
///
/// ## Why two dispatchers never both deliver one change, and why in order
///
/// 1. **Claim** (one short statement, committed before any HTTP): per
///    endpoint (up to a batch of each, see `runUntilCancelled`), the due
///    pending deliveries that are the first pending one of their endpoint and
///    subscriber (no pending delivery of a lower `sequence`) are locked
///    `FOR UPDATE SKIP LOCKED`, and their `next_attempt_at` is moved a lease
///    ahead (longer than the request timeout) under a fresh `claim_token`.
///    Once it commits, no other claim sees the row as due; a concurrent claim
///    either skips the locked row or, had it waited, re-checks
///    `next_attempt_at <= now()` on the new version and drops it. A later
///    change of the same subscriber and endpoint is not claimable while this
///    one is pending, claimed or not: changes arrive in `sequence` order.
/// 2. **Deliver** outside any transaction, bounded by the request timeout,
///    which is shorter than the lease.
/// 3. **Record**: success marks the row `sent` (then the next change of that
///    subscriber becomes claimable); failure schedules the retry (or, three
///    days after the first attempt, marks it `failed`) only if this claim
///    still holds the row (`claim_token`), so a stale attempt cannot
///    reschedule someone else's.
///
/// A dispatcher that dies (kill -9) after the receiver accepted and before
/// step 3 committed leaves the row pending: when the lease runs out the same
/// change, with the same `id`, is sent again. That is the at-least-once edge;
/// receivers deduplicate by `id`. Nothing is lost: a delivery row exists from
/// the transaction that published its change until it is `sent` or `failed`.
///
/// Reminders are changes too: to the reminder webhook (`ReminderWebhook`)
/// step 3 also writes the outcome to the reminder's row and, when it is
/// final, appends `reminder_sent` or `reminder_failed` in the same
/// transaction, and that endpoint gives up after its `max_attempts`.
public struct ChangeDispatcher: Service {
    public struct Settings: Sendable {
        /// The longest sleep between looks at the table (NOTIFY wakes it sooner).
        public var pollInterval: Duration = .seconds(5)
        public var requestTimeout: Duration = .seconds(10)
        /// How long a claim keeps others off a delivery; must exceed the timeout.
        public var lease: Duration = .seconds(60)
        /// The wait after the first failure; doubled after each next one.
        public var firstRetry: Duration = .seconds(10)
        public var maximumBackoff: Duration = .seconds(3600)
        /// How long after its first attempt a delivery is retried before it is `failed`.
        public var retryFor: Duration = .seconds(3 * 86_400)
        /// Deliveries of one endpoint claimed (and sent concurrently) per
        /// round; the endpoint's next batch is claimed when this one is done.
        public var batchSize = 32
        /// When an endpoint is paused after failing (`WebhookLanes`).
        var breaker = WebhookLanes.BreakerSettings()
        /// Where registered endpoints may point (`SUBLEDGER_WEBHOOK_ALLOW_PRIVATE`).
        public var destinations = WebhookDestinations(allowPrivate: false)
        /// Opens the endpoints' sealed secrets (`SUBLEDGER_SECRET`).
        public var sealing = WebhookSealingSource(secret: nil)
        /// Between refreshes of the gauges.
        public var metricsInterval: Duration = .seconds(1)
        /// How long sent deliveries are kept (`WebhookRetention.swift`); nil: for ever.
        public var deliveredRetention: Duration? = .seconds(30 * 86_400)
        /// Between two prunings, and the most deleted by one.
        public var pruneInterval: Duration = .seconds(600)
        public var pruneBatch = 10_000

        public init() {}
    }

    public var settings: Settings
    let pool: ConnectionPool
    let conninfo: String
    let client: HTTPClient
    let logger: Logger
    let store: EventStore

    public init(pool: ConnectionPool, conninfo: String, settings: Settings = Settings(), client: HTTPClient = .withoutRedirects,
                logger: Logger = Logger(label: "subledger.changes.dispatcher")) {
        self.pool = pool
        self.store = EventStore(pool: pool, logger: logger)
        self.conninfo = conninfo
        self.settings = settings
        self.client = client
        self.logger = logger
    }

    public func run() async throws {
        await withGracefulShutdownHandler {
            await runUntilCancelled()
        } onGracefulShutdown: {
            // The loop notices within a second; batches in flight finish.
        }
    }

    /// The loop, usable without a service group (tests).
    ///
    /// Each round claims, in one statement, up to `batchSize` due deliveries
    /// of every endpoint that has no batch in flight in this process and is
    /// not paused by its breaker, and starts each endpoint's batch as a task
    /// of its own; it does not wait for them. A batch that finishes (or a
    /// NOTIFY of new changes) wakes the loop, which claims again: an endpoint
    /// that answers slowly holds back only its own next batch.
    public func runUntilCancelled() async {
        let lanes = WebhookLanes(settings: settings.breaker)
        let bell = Doorbell()
        await withDiscardingTaskGroup { group in
            group.addTask { await listen(ringing: bell) }
            var lastRefresh = ContinuousClock.now - .seconds(60)
            var lastPrune = ContinuousClock.now - settings.pruneInterval
            while !Task.isCancelled && !Task.isShuttingDownGracefully {
                do {
                    let excluded = await lanes.excluded()
                    var claims = try await claim(excluding: excluded, limit: settings.batchSize)
                    for endpointID in await lanes.probing() {
                        claims += try await claim(only: endpointID, limit: 1)
                    }
                    for (endpointID, batch) in Dictionary(grouping: claims, by: \.endpointID) {
                        await lanes.start(endpointID)
                        group.addTask {
                            let outcomes = await deliverConcurrently(batch)
                            await lanes.finish(endpointID, outcomes: outcomes)
                            bell.ring()
                        }
                    }
                    if ContinuousClock.now - lastRefresh >= settings.metricsInterval {
                        lastRefresh = .now
                        await ChangeMetrics.refresh(pool: pool, logger: logger)
                        await ReminderMetrics.refresh(ReminderStore(pool: pool), logger: logger)
                        WebhookDispatchMetrics.pausedEndpoints.record(await lanes.pausedCount())
                    }
                    if ContinuousClock.now - lastPrune >= settings.pruneInterval {
                        lastPrune = .now
                        await prune()
                    }
                    if claims.isEmpty {
                        await bell.wait(timeout: try await sleepBeforeNextDue(lanes))
                    }
                } catch is CancellationError {
                    break
                } catch {
                    if Task.isCancelled || Task.isShuttingDownGracefully { break }
                    logger.error("change dispatcher failed; retrying", metadata: ["error": "\(String(reflecting: error))"])
                    try? await Task.sleep(for: .seconds(1))
                }
            }
        }
    }

    /// Rings `bell` at every NOTIFY of a published change, on a connection of
    /// its own; reconnects after a failure. Looks at cancellation every second.
    private func listen(ringing bell: Doorbell) async {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                let listener = try await Connection.connect(to: conninfo, logger: logger)
                defer { listener.close() }
                try await listener.listen(ChangeRows.notificationChannel)
                bell.ring()
                while !Task.isCancelled && !Task.isShuttingDownGracefully {
                    if try await listener.waitForNotification(timeout: .seconds(1)) != nil { bell.ring() }
                }
            } catch {
                if Task.isCancelled || Task.isShuttingDownGracefully { return }
                logger.warning("change dispatcher cannot listen; polling", metadata: ["error": "\(String(reflecting: error))"])
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// Until the next pending delivery of an endpoint that may be claimed is
    /// due (a paused endpoint's at the end of its pause), at most the poll
    /// interval. One probe of the per-endpoint due index per endpoint.
    private func sleepBeforeNextDue(_ lanes: WebhookLanes) async throws -> Duration {
        var sleep = settings.pollInterval
        if let seconds = try await WebhookDeliveryStore.secondsUntilNextDue(excluding: await lanes.waitingOn(), pool: pool) {
            // Due already but not claimable (behind an earlier change of its
            // subscriber, or locked by another instance): look again soon.
            sleep = seconds <= 0 ? .milliseconds(250) : .milliseconds(Int64(seconds * 1000) + 5)
        }
        if let pauseEnd = await lanes.nextPauseEnd() {
            sleep = min(sleep, max(pauseEnd - .now, .milliseconds(5)))
        }
        return min(sleep, settings.pollInterval)
    }

    /// One round for tests and the bench: claims what is due (every
    /// endpoint's, no breaker) and delivers it, waiting for every delivery.
    /// Returns how many were claimed.
    @discardableResult
    public func dispatchDue() async throws -> Int {
        let claims = try await claim(excluding: [], limit: settings.batchSize)
        _ = await deliverConcurrently(claims)
        return claims.count
    }

    /// Delivers `claims` at once; each one's success, in the order they finished.
    func deliverConcurrently(_ claims: [Claim]) async -> [Bool] {
        await withTaskGroup(of: Bool.self) { group in
            for claimed in claims {
                group.addTask { await deliver(claimed) }
            }
            var outcomes: [Bool] = []
            for await outcome in group { outcomes.append(outcome) }
            return outcomes
        }
    }

    typealias DeliveryFailure = WebhookDeliveryFailure

    /// Step 2: one signed POST (`WebhookPost`); 2xx is success. A
    /// registered endpoint's destination is checked (`WebhookDestinations`);
    /// the reminder webhook's, set by the operator, is not.
    func post(_ claimed: Claim) async -> Result<Void, DeliveryFailure> {
        var secrets: [String] = []
        do {
            let sealing = try await settings.sealing.sealing(pool: pool)
            if let secret = claimed.secret { secrets.append(try sealing.open(secret)) }
            if let previous = claimed.previousSecret, let old = try? sealing.open(previous) { secrets.append(old) }
        } catch let error as WebhookSecretSealing.CannotUnseal {
            return .failure(DeliveryFailure(description: error.description))
        } catch {
            logger.error("cannot load the webhook sealing key", metadata: ["error": "\(String(reflecting: error))"])
            return .failure(DeliveryFailure(description: "the endpoint's secret could not be read"))
        }
        let destinations = claimed.endpointID == ReminderWebhook.endpointID ? nil : settings.destinations
        return await WebhookPost.send(claimed.body, to: claimed.url, secrets: secrets, eventID: claimed.changeID,
                                      destinations: destinations, client: client, timeout: settings.requestTimeout)
    }

    /// `firstRetry · 2^(attempt−1)`, capped.
    func backoff(afterAttempt attempt: Int) -> Duration {
        WebhookPost.backoff(afterAttempt: attempt, firstRetry: settings.firstRetry, maximum: settings.maximumBackoff)
    }
}
