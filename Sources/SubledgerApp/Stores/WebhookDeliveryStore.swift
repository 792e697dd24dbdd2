import Foundation
import Postgres

/// The statements of `webhook_deliveries` (`sql/0022_change_feed.sql`): the
/// dispatcher's claim and record (`ChangeDispatcher`), the listing and the
/// manual retry of `GET`/`POST /v1/webhooks/{id}/deliveries`, the pruning of
/// sent ones, the metrics' oldest pending one and erasure's rewrite. Rows
/// are created with their change (`ChangeRows.insertStatement`).
enum WebhookDeliveryStore {
    /// Step 1 of `ChangeDispatcher`: up to `limit` due deliveries of each
    /// endpoint not in `excluded` (of `only` alone, when given), claimed
    /// under `token` for `lease`. One statement: per endpoint, a walk of its
    /// due index, each row's queue probed for being its head.
    static func claim(excluding excluded: [String], only: String?, limit: Int, lease: Duration, token: UUID,
                      pool: ConnectionPool) async throws -> [ChangeDispatcher.Claim] {
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
                    LIMIT \(limit)
                    FOR UPDATE SKIP LOCKED) q
                WHERE w.id <> ALL(ARRAY(SELECT jsonb_array_elements_text(\(excludedJSON)::jsonb)))
                  AND (\(only)::text IS NULL OR w.id = \(only)))
            UPDATE webhook_deliveries d
            SET attempts = d.attempts + 1, claim_token = \(token)::uuid, first_attempt_at = coalesce(d.first_attempt_at, now()),
                next_attempt_at = now() + make_interval(secs => \(lease.timeInterval))
            FROM due, webhook_endpoints w, changes c
            WHERE d.id = due.id AND w.id = d.endpoint_id AND c.id = d.change_id
            RETURNING d.id, d.endpoint_id, w.url, w.secret, d.change_id, c.body::text, d.attempts, d.first_attempt_at,
                      d.subscriber_id, w.max_attempts, c.type,
                      CASE WHEN w.previous_secret_expires_at > now() THEN w.previous_secret END
            """)
        return try rows.map { row in
            let endpointID = try row.decode(String.self, at: 1)
            let type = try row.decode(String.self, at: 10)
            return ChangeDispatcher.Claim(
                deliveryID: try row.decode(Int64.self, at: 0), endpointID: endpointID,
                url: try row.decode(String.self, at: 2), secret: try row.decode(String?.self, at: 3),
                changeID: try row.decode(String.self, at: 4), body: Data(try row.decode(String.self, at: 5).utf8),
                attempt: try row.decode(Int.self, at: 6), firstAttemptAt: try row.decode(Date.self, at: 7), token: token,
                subscriberID: try row.decode(String.self, at: 8), maximumAttempts: try row.decode(Int?.self, at: 9),
                isReminder: endpointID == ReminderWebhook.endpointID && ReminderWebhook.types.contains(type),
                previousSecret: try row.decode(String?.self, at: 11))
        }
    }

    /// Seconds until the next pending delivery of an endpoint not in
    /// `excluded` is due (negative: due already), nil when there is none.
    /// One probe of the per-endpoint due index per endpoint.
    static func secondsUntilNextDue(excluding excluded: [String], pool: ConnectionPool) async throws -> Double? {
        let excludedJSON = PostgresJSON(data: try JSONEncoder().encode(excluded))
        let rows = try await pool.query("""
            SELECT extract(epoch FROM min(n.next_attempt_at) - now())::float8
            FROM webhook_endpoints w
            CROSS JOIN LATERAL (SELECT d.next_attempt_at FROM webhook_deliveries d
                                WHERE d.endpoint_id = w.id AND d.status = 'pending'
                                ORDER BY d.next_attempt_at LIMIT 1) n
            WHERE w.id <> ALL(ARRAY(SELECT jsonb_array_elements_text(\(excludedJSON)::jsonb)))
            """)
        return try rows.first?.decode(Double?.self, at: 0)
    }

    /// Step 3 on success: the delivery is `sent` (only while still pending),
    /// and the next change of its subscriber becomes claimable.
    static func markSentStatement(_ deliveryID: Int64) -> PostgresQuery {
        """
        UPDATE webhook_deliveries SET status = 'sent', sent_at = now(), claim_token = NULL, last_error = NULL
        WHERE id = \(deliveryID) AND status = 'pending'
        """
    }

    /// Step 3 on failure: the retry at `retryAt`, or `failed` when the
    /// dispatcher gave up; only while the claim `token` still holds the row,
    /// so a stale attempt cannot reschedule someone else's.
    static func recordFailureStatement(_ deliveryID: Int64, token: UUID, gaveUp: Bool, error: String,
                                       retryAt: Date) -> PostgresQuery {
        """
        UPDATE webhook_deliveries
        SET status = \(gaveUp ? "failed" : "pending"), last_error = \(error),
            next_attempt_at = \(retryAt), claim_token = NULL
        WHERE id = \(deliveryID) AND claim_token = \(token)::uuid AND status = 'pending'
        """
    }

    /// Deletes up to `limit` sent deliveries older than `retention`, oldest
    /// first; returns how many (`WebhookRetention.swift`).
    static func deleteSent(olderThan retention: Duration, limit: Int, pool: ConnectionPool) async throws -> Int {
        try await pool.query("""
            DELETE FROM webhook_deliveries WHERE id IN (
                SELECT id FROM webhook_deliveries
                WHERE status = 'sent' AND sent_at < now() - make_interval(secs => \(retention.timeInterval))
                ORDER BY sent_at LIMIT \(limit))
            RETURNING 1
            """).count
    }

    /// Per endpoint: its id and the age in seconds of its oldest pending
    /// delivery (0 when none), for `ChangeMetrics`' pipeline.
    static let oldestPendingStatement: PostgresQuery = """
        SELECT w.id, coalesce(extract(epoch FROM now() - min(d.created_at)), 0)::float8
        FROM webhook_endpoints w
        LEFT JOIN webhook_deliveries d ON d.endpoint_id = w.id AND d.status = 'pending'
        GROUP BY w.id
        """

    // MARK: The webhook routes

    static let columns = """
        id::text, change_id, subscriber_id, sequence, status, attempts,
        CASE WHEN status = 'pending' THEN next_attempt_at END, last_error, created_at, sent_at
        """

    /// An endpoint's deliveries, newest first.
    static func list(of endpointID: String, status: WebhookStore.DeliveryStatus?, limit: Int,
                     pool: ConnectionPool) async throws -> [WebhookStore.Delivery] {
        try await pool.query("""
            SELECT \(unsafeRaw: columns) FROM webhook_deliveries
            WHERE endpoint_id = \(endpointID) AND (\(status == nil) OR status = \(status?.rawValue ?? ""))
            ORDER BY id DESC LIMIT \(limit)
            """).map(delivery)
    }

    /// Sends a delivery again from its first attempt (a failed one, or a
    /// pending one at once), and wakes the dispatchers; nil when the
    /// endpoint has no such delivery.
    static func retry(endpointID: String, deliveryID: Int64, pool: ConnectionPool) async throws -> WebhookStore.Delivery? {
        let rows = try await pool.query("""
            WITH retried AS (
                UPDATE webhook_deliveries
                SET status = 'pending', attempts = 0, next_attempt_at = now(), first_attempt_at = NULL,
                    claim_token = NULL, sent_at = NULL
                WHERE endpoint_id = \(endpointID) AND id = \(deliveryID)
                RETURNING *),
                 wake AS (SELECT pg_notify(\(ChangeRows.notificationChannel), '') FROM retried)
            SELECT \(unsafeRaw: columns) FROM retried, (SELECT count(*) FROM wake) AS w
            """)
        return try rows.first.map(delivery)
    }

    static func delivery(_ row: PostgresRow) throws -> WebhookStore.Delivery {
        WebhookStore.Delivery(
            id: try row.decode(String.self, at: 0), changeId: try row.decode(String.self, at: 1),
            subscriberId: try row.decode(String.self, at: 2), sequence: try row.decode(Int64.self, at: 3),
            status: try row.decode(String.self, at: 4), attempts: try row.decode(Int.self, at: 5),
            nextAttemptAt: try row.decode(Date?.self, at: 6), lastError: try row.decode(String?.self, at: 7),
            createdAt: try row.decode(Date.self, at: 8), sentAt: try row.decode(Date?.self, at: 9))
    }

    // MARK: Erasure (`ChangeRows.erasureStep`, `ChangeRows.settleDeliveries`)

    /// `last_error` of a delivery that erasure stopped.
    static let erasedDeliveryError = "not sent: the subscriber was erased"

    /// The SET items that stop a pending delivery for good (constants).
    static let stopPending = """
        status = CASE WHEN status = 'pending' THEN 'failed' ELSE status END,
        last_error = CASE WHEN status = 'pending' THEN '\(erasedDeliveryError)' ELSE last_error END,
        claim_token = NULL
        """

    /// A delivery whose POST may be under way: a dispatcher claimed it and
    /// its lease runs (the dispatcher posts outside its claim's transaction,
    /// within the request timeout, which is shorter than the lease). The
    /// wall clock, not `now()`: the erasure's transaction waits.
    static let inFlightCondition = "(status = 'pending' AND claim_token IS NOT NULL AND next_attempt_at > clock_timestamp())"

    /// Rewrites (and so locks) every delivery of the subscriber not in
    /// flight to the pseudonym, stopping the pending ones; returns how many
    /// are in flight.
    static func rewriteForErasure(of subscriberID: String, pseudonym: String, on connection: Connection) async throws -> Int {
        try await connection.query("""
            UPDATE webhook_deliveries
            SET subscriber_id = \(pseudonym), change_id = subledger_erased_change_id(change_id, \(subscriberID), \(pseudonym)),
                \(unsafeRaw: stopPending)
            WHERE subscriber_id = \(subscriberID) AND NOT \(unsafeRaw: inFlightCondition)
            """)
        return try await connection.query("""
            SELECT count(*) FROM webhook_deliveries WHERE subscriber_id = \(subscriberID) AND \(unsafeRaw: inFlightCondition)
            """).first?.decode(Int.self, at: 0) ?? 0
    }
}
