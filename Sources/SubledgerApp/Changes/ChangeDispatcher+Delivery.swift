import EventStore
import Foundation
import Ledger
import Logging
import Postgres

/// The claim, the delivery and its record (steps 1 to 3 of `ChangeDispatcher`).
extension ChangeDispatcher {
    struct Claim: Sendable {
        var deliveryID: Int64
        var endpointID: String
        var url: String
        /// Sealed (`WebhookSecretSealing`).
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
        /// The secret before a rotation, sealed, while it is still valid.
        var previousSecret: String?
    }

    /// Step 1 (see the type's comment): up to `limit` due deliveries of each
    /// endpoint not in `excluded` (of `only` alone, when given). One
    /// statement: per endpoint, a walk of its due index, each row's queue
    /// probed for being its head.
    func claim(excluding excluded: [String] = [], only: String? = nil, limit: Int? = nil) async throws -> [Claim] {
        let token = UUID()
        let excludedJSON = PostgresJSON(data: try JSONEncoder().encode(excluded))
        let rows = try await pool.query("""
            WITH due AS (
                SELECT q.id FROM webhook_endpoints w
                CROSS JOIN LATERAL (
                    SELECT d.id FROM webhook_deliveries d
                    WHERE d.endpoint_id = w.id AND d.status = 'pending' AND d.next_attempt_at <= now()
                      -- The head of its queue. Written as the queue index's
                      -- first row (ORDER BY sequence LIMIT 1), not as NOT
                      -- EXISTS: a queue table's statistics are often stale,
                      -- and with them the anti-join was planned as a scan of
                      -- the endpoint's whole pending list per row, N² (0.8 s
                      -- per claim at 3,000 pending); this probe stays one
                      -- index step per row.
                      AND d.id = (SELECT e.id FROM webhook_deliveries e
                                  WHERE e.endpoint_id = d.endpoint_id AND e.subscriber_id = d.subscriber_id
                                    AND e.status = 'pending'
                                  ORDER BY e.sequence LIMIT 1)
                    ORDER BY d.next_attempt_at
                    LIMIT \(limit ?? settings.batchSize)
                    FOR UPDATE SKIP LOCKED) q
                WHERE w.id <> ALL(ARRAY(SELECT jsonb_array_elements_text(\(excludedJSON)::jsonb)))
                  AND (\(only)::text IS NULL OR w.id = \(only)))
            UPDATE webhook_deliveries d
            SET attempts = d.attempts + 1, claim_token = \(token)::uuid, first_attempt_at = coalesce(d.first_attempt_at, now()),
                next_attempt_at = now() + make_interval(secs => \(Self.seconds(settings.lease)))
            FROM due, webhook_endpoints w, changes c
            WHERE d.id = due.id AND w.id = d.endpoint_id AND c.id = d.change_id
            RETURNING d.id, d.endpoint_id, w.url, w.secret, d.change_id, c.body::text, d.attempts, d.first_attempt_at,
                      d.subscriber_id, w.max_attempts, c.type,
                      CASE WHEN w.previous_secret_expires_at > now() THEN w.previous_secret END
            """)
        return try rows.map { row in
            let endpointID = try row.decode(String.self, at: 1)
            let type = try row.decode(String.self, at: 10)
            return Claim(deliveryID: try row.decode(Int64.self, at: 0), endpointID: endpointID,
                         url: try row.decode(String.self, at: 2), secret: try row.decode(String?.self, at: 3),
                         changeID: try row.decode(String.self, at: 4), body: Data(try row.decode(String.self, at: 5).utf8),
                         attempt: try row.decode(Int.self, at: 6), firstAttemptAt: try row.decode(Date.self, at: 7), token: token,
                         subscriberID: try row.decode(String.self, at: 8), maximumAttempts: try row.decode(Int?.self, at: 9),
                         isReminder: endpointID == ReminderWebhook.endpointID && ReminderWebhook.types.contains(type),
                         previousSecret: try row.decode(String?.self, at: 11))
        }
    }

    /// Steps 2 and 3 for one claimed delivery; whether the receiver took
    /// it. No subscriber id is logged.
    func deliver(_ claimed: Claim) async -> Bool {
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
                return true
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
        return false
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

}
