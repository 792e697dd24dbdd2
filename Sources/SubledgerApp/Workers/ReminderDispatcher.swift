import AsyncHTTPClient
import EventStore
import Foundation
import JSON
import NIOCore
import Ledger
import Logging
import Metrics
import Postgres
import ServiceLifecycle

/// Delivers due reminders to the webhook, as a `Service`. Any number of
/// instances may run; they share the work.
///
/// ## Why two dispatchers never both deliver one reminder
///
/// 1. **Claim** (one short statement, committed before any HTTP): the due
///    pending rows are locked `FOR UPDATE SKIP LOCKED`, and their
///    `next_attempt_at` is moved a lease ahead (longer than the request
///    timeout) under a fresh `claim_token`. Once it commits, no other claim sees
///    the row as due; a concurrent claim either skips the locked row or, had it
///    waited, would re-check `next_attempt_at <= now()` on the new version and
///    drop it. So at any time at most one dispatcher holds a live lease.
/// 2. **Deliver** outside any transaction (no row lock held over the network),
///    bounded by the request timeout, which is shorter than the lease: the
///    lease cannot run out while a healthy attempt is still in flight.
/// 3. **Record**, in one transaction: success marks the row `sent` and appends
///    `reminder_sent` (idempotency key from the reminder id), so the row is
///    sent exactly when the event exists and a sent row is never claimed
///    again; failure schedules the retry only if this claim still holds the
///    row (`claim_token`), so a stale attempt cannot reschedule someone
///    else's.
///
/// The one way to deliver twice is a dispatcher that dies (or stalls past the
/// lease) after the receiver accepted and before step 3 committed: the lease
/// runs out and the same reminder, with the same `id`, is sent again. That is
/// the documented at-least-once edge (docs/webhooks.md); receivers dedupe by
/// `id`.
public struct ReminderDispatcher: Service {
    public struct Settings: Sendable {
        /// nil: reminders are scheduled and visible, nothing is sent.
        public var webhookURL: String?
        public var secret: String?
        /// The longest sleep between looks at the table (NOTIFY wakes it sooner).
        public var pollInterval: Duration = .seconds(5)
        public var requestTimeout: Duration = .seconds(10)
        /// How long a claim keeps others off a reminder; must exceed the timeout.
        public var lease: Duration = .seconds(60)
        /// The wait after the first failure; doubled after each next one.
        public var firstRetry: Duration = .seconds(10)
        public var maximumBackoff: Duration = .seconds(3600)
        /// Attempts before the reminder is `failed`.
        public var maximumAttempts = 10
        /// Reminders claimed (and sent concurrently) per round.
        public var batchSize = 16

        public init(webhookURL: String? = nil, secret: String? = nil) {
            self.webhookURL = webhookURL
            self.secret = secret
        }

        public init(_ configuration: SubledgerConfiguration) {
            self.init(webhookURL: configuration.webhookURL, secret: configuration.webhookSecret)
        }
    }

    public let settings: Settings
    let pool: ConnectionPool
    let deliveries: ReminderDeliveryStore
    let conninfo: String
    let client: HTTPClient
    let logger: Logger

    public init(pool: ConnectionPool, store: EventStore, conninfo: String, settings: Settings,
                client: HTTPClient = .withoutRedirects, logger: Logger = Logger(label: "subledger.reminders.dispatcher")) {
        self.pool = pool
        self.deliveries = ReminderDeliveryStore(pool: pool, store: store)
        self.conninfo = conninfo
        self.settings = settings
        self.client = client
        self.logger = logger
    }

    public func run() async throws {
        if settings.webhookURL == nil {
            logger.notice("no webhook URL: reminders are scheduled but not sent")
        } else if settings.secret == nil {
            logger.warning("no webhook secret: reminders are sent without a Subledger-Signature header")
        }
        await withGracefulShutdownHandler {
            await runUntilCancelled()
        } onGracefulShutdown: {
            // The loop notices within one poll interval; in-flight deliveries finish.
        }
    }

    /// The loop, usable without a service group (tests).
    public func runUntilCancelled() async {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                let listener = try await Connection.connect(to: conninfo, logger: logger)
                defer { listener.close() }
                try await listener.listen(ReminderProjection.notificationChannel)
                while !Task.isCancelled && !Task.isShuttingDownGracefully {
                    let handled = settings.webhookURL == nil ? 0 : try await dispatchDue()
                    await ReminderMetrics.refresh(ReminderStore(pool: pool), logger: logger)
                    if handled < settings.batchSize {
                        _ = try await listener.waitForNotification(timeout: try await sleepBeforeNextDue())
                    }
                }
            } catch is CancellationError {
                return
            } catch {
                if Task.isCancelled || Task.isShuttingDownGracefully { return }
                logger.error("reminder dispatcher failed; retrying", metadata: ["error": "\(String(reflecting: error))"])
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// Until the next pending reminder is due, at most the poll interval.
    private func sleepBeforeNextDue() async throws -> Duration {
        guard settings.webhookURL != nil else { return settings.pollInterval }
        guard let seconds = try await deliveries.secondsUntilNextDue() else { return settings.pollInterval }
        let wait = Duration.milliseconds(Int64(max(0, seconds) * 1000) + 5)
        return min(wait, settings.pollInterval)
    }

    /// One round: claims what is due and delivers it. Returns how many were claimed.
    @discardableResult
    public func dispatchDue() async throws -> Int {
        guard let url = settings.webhookURL else { return 0 }
        let claims = try await claim()
        await withTaskGroup(of: Void.self) { group in
            for claimed in claims {
                group.addTask { await deliver(claimed, to: url) }
            }
        }
        return claims.count
    }

    struct Claim: Sendable {
        var reminder: DesiredReminder
        var attempt: Int
        var token: UUID
    }

    /// Step 1 (see the type's comment): lock, lease and return the due rows.
    func claim() async throws -> [Claim] {
        let token = UUID()
        return try await deliveries.claimDue(limit: settings.batchSize, lease: settings.lease, token: token).map {
            Claim(reminder: $0.reminder, attempt: $0.attempts, token: token)
        }
    }

    /// Steps 2 and 3 for one claimed reminder.
    func deliver(_ claimed: Claim, to url: String) async {
        var metadata: Logger.Metadata = [
            "reminder.id": "\(claimed.reminder.id)", "subscriber.id": "\(claimed.reminder.subscriberID)",
            "reminder.attempt": "\(claimed.attempt)",
        ]
        let outcome: Result<Void, DeliveryFailure>
        let started = ContinuousClock.now
        do {
            let body = try claimed.reminder.webhookBody()
            outcome = await post(body, to: url)
        } catch {
            outcome = .failure(DeliveryFailure(description: "cannot encode the reminder: \(error)"))
        }
        ReminderMetrics.latency.recordNanoseconds(Int64((ContinuousClock.now - started) / .nanoseconds(1)))
        do {
            switch outcome {
            case .success:
                ReminderMetrics.deliveries(.success).increment()
                try await recordSent(claimed)
                logger.info("reminder delivered", metadata: metadata)
            case .failure(let failure):
                ReminderMetrics.deliveries(.failure).increment()
                metadata["error"] = "\(failure.description)"
                let gaveUp = try await recordFailure(claimed, error: failure.description)
                if gaveUp {
                    ReminderMetrics.deliveries(.gaveUp).increment()
                    logger.error("reminder delivery gave up", metadata: metadata)
                } else {
                    logger.warning("reminder delivery failed; will retry", metadata: metadata)
                }
            }
        } catch {
            // The lease runs out and another round retries (same id).
            metadata["error"] = "\(String(reflecting: error))"
            logger.error("cannot record the reminder delivery", metadata: metadata)
        }
    }

    typealias DeliveryFailure = WebhookDeliveryFailure

    /// Step 2: one signed POST (`WebhookPost`); 2xx is success.
    func post(_ body: Data, to url: String) async -> Result<Void, DeliveryFailure> {
        await WebhookPost.send(body, to: url, secret: settings.secret, client: client, timeout: settings.requestTimeout)
    }

    /// Step 3, success: the row is sent exactly when the event is stored.
    func recordSent(_ claimed: Claim) async throws {
        let reminder = claimed.reminder
        let event = LedgerEvent.reminderSent(ReminderDelivery(
            reminderID: reminder.id, type: reminder.type, group: reminder.group, productID: reminder.productID,
            expiresAt: reminder.expiresAt, lead: reminder.lead, dueAt: reminder.dueAt, date: Date(), attempt: claimed.attempt))
        try await deliveries.markSent(reminder.id, subscriberID: reminder.subscriberID, event: event)
    }

    /// Step 3, failure: retry after a backoff, or give up after the last
    /// attempt (`failed` and a `reminder_failed` event). Returns whether it gave up.
    func recordFailure(_ claimed: Claim, error: String) async throws -> Bool {
        let reminder = claimed.reminder
        if claimed.attempt >= settings.maximumAttempts {
            let event = LedgerEvent.reminderFailed(ReminderDelivery(
                reminderID: reminder.id, type: reminder.type, group: reminder.group, productID: reminder.productID,
                expiresAt: reminder.expiresAt, lead: reminder.lead, dueAt: reminder.dueAt, date: Date(),
                attempt: claimed.attempt, error: error))
            return try await deliveries.markFailed(reminder.id, token: claimed.token, error: error,
                                                   subscriberID: reminder.subscriberID, event: event)
        }
        try await deliveries.scheduleRetry(reminder.id, token: claimed.token, after: backoff(afterAttempt: claimed.attempt), error: error)
        return false
    }

    /// `firstRetry · 2^(attempt−1)`, capped.
    func backoff(afterAttempt attempt: Int) -> Duration {
        WebhookPost.backoff(afterAttempt: attempt, firstRetry: settings.firstRetry, maximum: settings.maximumBackoff)
    }

}

extension HTTPClient {
    /// A client that follows no redirect: webhook deliveries, so only the
    /// configured receiver's own 2xx marks a reminder sent, and receipt
    /// validation, so the shared secret in its body is never re-sent to
    /// wherever a redirect points. Lives as long as the process.
    public static let withoutRedirects = HTTPClient(
        eventLoopGroup: HTTPClient.defaultEventLoopGroup,
        configuration: HTTPClient.Configuration(redirectConfiguration: .disallow))
}
