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
/// 1. **Claim** (one short statement, committed before any HTTP): the due
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
        /// Deliveries claimed (and sent concurrently) per round.
        public var batchSize = 32

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
            // The loop notices within one poll interval; in-flight deliveries finish.
        }
    }

    /// The loop, usable without a service group (tests).
    public func runUntilCancelled() async {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                let listener = try await Connection.connect(to: conninfo, logger: logger)
                defer { listener.close() }
                try await listener.listen(ChangeRows.notificationChannel)
                while !Task.isCancelled && !Task.isShuttingDownGracefully {
                    let handled = try await dispatchDue()
                    await ChangeMetrics.refresh(pool: pool, logger: logger)
                    await ReminderMetrics.refresh(ReminderStore(pool: pool), logger: logger)
                    if handled == 0 {
                        _ = try await listener.waitForNotification(timeout: try await sleepBeforeNextDue())
                    }
                }
            } catch is CancellationError {
                return
            } catch {
                if Task.isCancelled || Task.isShuttingDownGracefully { return }
                logger.error("change dispatcher failed; retrying", metadata: ["error": "\(String(reflecting: error))"])
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// Until the next pending delivery is due, at most the poll interval.
    private func sleepBeforeNextDue() async throws -> Duration {
        let rows = try await pool.query("""
            SELECT extract(epoch FROM min(next_attempt_at) - now())::float8 FROM webhook_deliveries WHERE status = 'pending'
            """)
        guard let seconds = try rows.first?.decode(Double?.self, at: 0) else { return settings.pollInterval }
        return min(.milliseconds(Int64(max(0, seconds) * 1000) + 5), settings.pollInterval)
    }

    struct Claim: Sendable {
        var deliveryID: Int64
        var endpointID: String
        var url: String
        var secret: String?
        var changeID: String
        var body: Data
        var attempt: Int
        var firstAttemptAt: Date
        var token: UUID
        var subscriberID: String
        /// The endpoint's limit on attempts; nil: the retry period alone.
        var maximumAttempts: Int?
        /// A reminder to the reminder webhook: its outcome is the reminder's.
        var isReminder: Bool
    }

    /// One round: claims what is due and delivers it. Returns how many were claimed.
    @discardableResult
    public func dispatchDue() async throws -> Int {
        let claims = try await claim()
        await withTaskGroup(of: Void.self) { group in
            for claimed in claims {
                group.addTask { await deliver(claimed) }
            }
        }
        return claims.count
    }

    /// Step 1 (see the type's comment).
    func claim() async throws -> [Claim] {
        let token = UUID()
        let rows = try await pool.query("""
            WITH due AS (
                SELECT d.id FROM webhook_deliveries d
                WHERE d.status = 'pending' AND d.next_attempt_at <= now()
                  -- The head of its queue. Written as the queue index's first
                  -- row (ORDER BY sequence LIMIT 1), not as NOT EXISTS: a
                  -- queue table's statistics are often stale (thousands of
                  -- rows published since the last ANALYZE), and with them the
                  -- anti-join was planned as a scan of the endpoint's whole
                  -- pending list per row, N² (0.8 s per claim at 3,000
                  -- pending); this probe stays one index step per row.
                  AND d.id = (SELECT e.id FROM webhook_deliveries e
                              WHERE e.endpoint_id = d.endpoint_id AND e.subscriber_id = d.subscriber_id
                                AND e.status = 'pending'
                              ORDER BY e.sequence LIMIT 1)
                -- With fresh statistics the plan walks the due index and
                -- probes each row's queue until the batch is full, instead of
                -- sorting every pending row.
                ORDER BY d.next_attempt_at
                LIMIT \(settings.batchSize)
                FOR UPDATE SKIP LOCKED)
            UPDATE webhook_deliveries d
            SET attempts = d.attempts + 1, claim_token = \(token)::uuid, first_attempt_at = coalesce(d.first_attempt_at, now()),
                next_attempt_at = now() + make_interval(secs => \(Self.seconds(settings.lease)))
            FROM due, webhook_endpoints w, changes c
            WHERE d.id = due.id AND w.id = d.endpoint_id AND c.id = d.change_id
            RETURNING d.id, d.endpoint_id, w.url, w.secret, d.change_id, c.body::text, d.attempts, d.first_attempt_at,
                      d.subscriber_id, w.max_attempts, c.type
            """)
        return try rows.map { row in
            let endpointID = try row.decode(String.self, at: 1)
            let type = try row.decode(String.self, at: 10)
            return Claim(deliveryID: try row.decode(Int64.self, at: 0), endpointID: endpointID,
                         url: try row.decode(String.self, at: 2), secret: try row.decode(String?.self, at: 3),
                         changeID: try row.decode(String.self, at: 4), body: Data(try row.decode(String.self, at: 5).utf8),
                         attempt: try row.decode(Int.self, at: 6), firstAttemptAt: try row.decode(Date.self, at: 7), token: token,
                         subscriberID: try row.decode(String.self, at: 8), maximumAttempts: try row.decode(Int?.self, at: 9),
                         isReminder: endpointID == ReminderWebhook.endpointID && ReminderWebhook.types.contains(type))
        }
    }

    /// Steps 2 and 3 for one claimed delivery. No subscriber id is logged.
    func deliver(_ claimed: Claim) async {
        var metadata: Logger.Metadata = [
            // The delivery's id, not the change's: a reminder's change id names its subscriber.
            "webhook.id": "\(claimed.endpointID)", "delivery.id": "\(claimed.deliveryID)", "delivery.attempt": "\(claimed.attempt)",
            "subscriber.ref": "\(LogReference.subscriber(claimed.subscriberID))",
        ]
        let started = ContinuousClock.now
        let outcome = await post(claimed)
        if claimed.isReminder {
            ReminderMetrics.latency.recordNanoseconds(Int64((ContinuousClock.now - started) / .nanoseconds(1)))
        }
        do {
            switch outcome {
            case .success:
                ChangeMetrics.deliveries(.success).increment()
                if claimed.isReminder { ReminderMetrics.deliveries(.success).increment() }
                try await record(claimed, """
                    UPDATE webhook_deliveries SET status = 'sent', sent_at = now(), claim_token = NULL, last_error = NULL
                    WHERE id = \(claimed.deliveryID) AND status = 'pending'
                    """, reminderStatus: "sent", error: nil, retryAt: nil)
                logger.debug("change delivered", metadata: metadata)
            case .failure(let failure):
                ChangeMetrics.deliveries(.failure).increment()
                if claimed.isReminder { ReminderMetrics.deliveries(.failure).increment() }
                metadata["error"] = "\(failure.description)"
                let retryAt = Date() + backoff(afterAttempt: claimed.attempt).timeInterval
                let gaveUp = retryAt.timeIntervalSince(claimed.firstAttemptAt) > settings.retryFor.timeInterval
                    || claimed.maximumAttempts.map { claimed.attempt >= $0 } == true
                try await record(claimed, """
                    UPDATE webhook_deliveries
                    SET status = \(gaveUp ? "failed" : "pending"), last_error = \(failure.description),
                        next_attempt_at = \(retryAt), claim_token = NULL
                    WHERE id = \(claimed.deliveryID) AND claim_token = \(claimed.token)::uuid AND status = 'pending'
                    """, reminderStatus: gaveUp ? "failed" : "pending", error: failure.description, retryAt: gaveUp ? nil : retryAt)
                if gaveUp {
                    ChangeMetrics.deliveries(.gaveUp).increment()
                    if claimed.isReminder { ReminderMetrics.deliveries(.gaveUp).increment() }
                    logger.error("change delivery gave up", metadata: metadata)
                } else {
                    logger.warning("change delivery failed; will retry", metadata: metadata)
                }
            }
        } catch {
            // The lease runs out and another round retries (same id).
            metadata["error"] = "\(String(reflecting: error))"
            logger.error("cannot record the change delivery", metadata: metadata)
        }
    }

    /// Step 3: `update` writes the outcome to the delivery's row (only while
    /// it is still pending). One statement, no transaction around it, on the
    /// hot path; to the reminder webhook, in one transaction with the
    /// reminder's own record when `update` changed the row.
    private func record(_ claimed: Claim, _ update: PostgresQuery, reminderStatus: String, error: String?,
                        retryAt: Date?) async throws {
        guard claimed.isReminder else {
            try await pool.query(update)
            return
        }
        try await store.transaction { connection in
            if try await connection.query(update).affectedRows == 1 {
                try await recordReminder(claimed, status: reminderStatus, error: error, retryAt: retryAt, on: connection)
            }
        }
    }

    /// Step 3 for a reminder, in the delivery's transaction: its row shows
    /// the attempts, the last error and the next attempt (as
    /// `GET /v1/reminders` lists them); `sent` and `failed` are final and
    /// recorded as the subscriber's `reminder_sent` / `reminder_failed`.
    private func recordReminder(_ claimed: Claim, status: String, error: String?, retryAt: Date?,
                                on connection: Connection) async throws {
        try await connection.query("""
            UPDATE reminders
            SET status = CASE WHEN \(status) = 'pending' THEN status ELSE \(status) END, attempts = \(claimed.attempt),
                last_error = \(error), next_attempt_at = coalesce(\(retryAt)::timestamptz, now()), claim_token = NULL,
                updated_at = now()
            WHERE id = \(claimed.changeID)
            """)
        guard status != "pending" else { return }
        // The change carries the reminder's webhook fields at its top level.
        let reminder = try LedgerJSON.makeDecoder().decode(DesiredReminder.self, from: claimed.body)
        let delivery = ReminderDelivery(
            reminderID: claimed.changeID, type: reminder.type, group: reminder.group, productID: reminder.productID,
            expiresAt: reminder.expiresAt, lead: reminder.lead, dueAt: reminder.dueAt, date: Date(), attempt: claimed.attempt,
            error: error)
        let event: LedgerEvent = status == "sent" ? .reminderSent(delivery) : .reminderFailed(delivery)
        // No key: the subscriber was erased after the claim; nothing more is recorded for it.
        guard let key = try await SubscriberKeys.existingKey(for: claimed.subscriberID, on: connection) else { return }
        _ = try await store.append([StreamAppend(
            streamID: SubscriberStreams.streamID(for: claimed.subscriberID),
            events: try SubscriberStreams.newEvents([event], subscriberID: claimed.subscriberID, key: key, source: FactSource.subledger))],
            on: connection)
    }

    typealias DeliveryFailure = WebhookDeliveryFailure

    /// Step 2: one signed POST (`WebhookPost`); 2xx is success.
    func post(_ claimed: Claim) async -> Result<Void, DeliveryFailure> {
        await WebhookPost.send(claimed.body, to: claimed.url, secret: claimed.secret, eventID: claimed.changeID,
                               client: client, timeout: settings.requestTimeout)
    }

    /// `firstRetry · 2^(attempt−1)`, capped.
    func backoff(afterAttempt attempt: Int) -> Duration {
        WebhookPost.backoff(afterAttempt: attempt, firstRetry: settings.firstRetry, maximum: settings.maximumBackoff)
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

extension Duration {
    var timeInterval: TimeInterval {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
