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
        try await WebhookDeliveryStore.claim(excluding: excluded, only: only, limit: limit ?? settings.batchSize,
                                             lease: settings.lease, token: UUID(), pool: pool)
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
                try await record(claimed, WebhookDeliveryStore.markSentStatement(claimed.deliveryID),
                                 reminderStatus: "sent", error: nil, retryAt: nil)
                logger.debug("change delivered", metadata: metadata)
                return true
            case .failure(let failure):
                ChangeMetrics.deliveries(.failure).increment()
                if claimed.isReminder { ReminderMetrics.deliveries(.failure).increment() }
                metadata["error"] = "\(failure.description)"
                let retryAt = Date() + backoff(afterAttempt: claimed.attempt).timeInterval
                let gaveUp = retryAt.timeIntervalSince(claimed.firstAttemptAt) > settings.retryFor.timeInterval
                    || claimed.maximumAttempts.map { claimed.attempt >= $0 } == true
                try await record(claimed, WebhookDeliveryStore.recordFailureStatement(
                                     claimed.deliveryID, token: claimed.token, gaveUp: gaveUp, error: failure.description, retryAt: retryAt),
                                 reminderStatus: gaveUp ? "failed" : "pending", error: failure.description, retryAt: gaveUp ? nil : retryAt)
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
        try await ReminderRows.recordDelivery(claimed.changeID, status: status, attempt: claimed.attempt, error: error,
                                              retryAt: retryAt, on: connection)
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
