import EventStore
import Foundation
import Ledger
import Postgres

/// The SQL of the `reminders` table.
enum ReminderRows {
    static let columns = """
        id, subscriber_id, "group", product_id, type, lead, expires_at, due_at, status, attempts, last_error, environment
        """

    static func reminder(_ row: PostgresRow) throws -> (DesiredReminder, ReminderStatus, attempts: Int, lastError: String?) {
        let status = try row.decode(String.self, at: 8)
        let type = try row.decode(String.self, at: 4)
        let lead = try row.decode(String.self, at: 5)
        let reminder = DesiredReminder(
            id: try row.decode(String.self, at: 0), type: ReminderType(rawValue: type) ?? .renewalReminder,
            subscriberID: try row.decode(String.self, at: 1), group: try row.decode(String.self, at: 2),
            productID: try row.decode(String.self, at: 3), expiresAt: try row.decode(Date.self, at: 6),
            lead: (try? ISODuration(parsing: lead)) ?? .zero, dueAt: try row.decode(Date.self, at: 7),
            environment: Environment(rawValue: try row.decode(String.self, at: 11)) ?? .production)
        return (reminder, ReminderStatus(rawValue: status) ?? .pending, try row.decode(Int.self, at: 9), try row.decode(String?.self, at: 10))
    }

    static let tables = ["reminders", "reminder_subscribers"]

    /// The reminders of `subscriberIDs`, in one statement.
    /// `resolvingPseudonyms`: the ids given are streams' pseudonyms.
    static func scheduledQuery(of subscriberIDs: [String], in tables: ProjectionTables, resolvingPseudonyms: Bool = false) -> PostgresQuery {
        if resolvingPseudonyms {
            return """
                SELECT \(unsafeRaw: columns) FROM \(unsafeRaw: tables.name("reminders"))
                WHERE subscriber_id IN (SELECT k.subscriber_id FROM subscriber_keys k
                                        WHERE k.pseudonym IN (SELECT jsonb_array_elements_text(\(JSONArgument.strings(subscriberIDs))::jsonb)))
                """
        }
        return """
            SELECT \(unsafeRaw: columns) FROM \(unsafeRaw: tables.name("reminders"))
            WHERE subscriber_id IN (SELECT jsonb_array_elements_text(\(JSONArgument.strings(subscriberIDs))::jsonb))
            """
    }

    static func scheduled(_ rows: PostgresRows) throws -> [String: [ScheduledReminder]] {
        var scheduled: [String: [ScheduledReminder]] = [:]
        for row in rows {
            let (reminder, status, _, _) = try reminder(row)
            scheduled[reminder.subscriberID, default: []].append(ScheduledReminder(reminder: reminder, status: status))
        }
        return scheduled
    }

    /// Upserts the projection's columns of many subscribers' reminders, in
    /// one statement. A row the dispatcher has meanwhile marked `sent` or
    /// `failed` is never moved back by the projection (its event is on its
    /// way to the projection and says the same); a row that becomes pending
    /// again is due at its due time with a fresh claim.
    /// `upsert: false` (a rebuild's load, into a shadow without its keys yet): plain inserts.
    static func writeStatement(_ reminders: [ScheduledReminder], in tables: ProjectionTables,
                               upsert: Bool = true) throws -> PostgresQuery? {
        guard !reminders.isEmpty else { return nil }
        return """
            INSERT INTO \(unsafeRaw: tables.name("reminders")) AS r (id, subscriber_id, "group", product_id, type, lead, expires_at,
                                                                      due_at, status, next_attempt_at, environment)
            SELECT x.id, x.subscriber_id, x."group", x.product_id, x.type, x.lead, x.expires_at, x.due_at, x.status, x.due_at, x.environment
            FROM jsonb_to_recordset(\(try document(reminders))::jsonb) AS x(
                id text, subscriber_id text, "group" text, product_id text, type text, lead text,
                expires_at timestamptz, due_at timestamptz, status text, environment text)
            \(unsafeRaw: upsert ? onConflict : "")
            """
    }

    /// The upsert's rule for a reminder already there (see `writeStatement`).
    private static let onConflict = """
        ON CONFLICT (id) DO UPDATE
        SET subscriber_id = EXCLUDED.subscriber_id, "group" = EXCLUDED."group", product_id = EXCLUDED.product_id,
            type = EXCLUDED.type, lead = EXCLUDED.lead, environment = EXCLUDED.environment, expires_at = EXCLUDED.expires_at, due_at = EXCLUDED.due_at,
            status = EXCLUDED.status,
            next_attempt_at = CASE WHEN r.status <> 'pending' AND EXCLUDED.status = 'pending'
                                   THEN EXCLUDED.due_at ELSE r.next_attempt_at END,
            claim_token = CASE WHEN r.status <> 'pending' AND EXCLUDED.status = 'pending'
                               THEN NULL ELSE r.claim_token END,
            updated_at = now()
        WHERE r.status NOT IN ('sent', 'failed') OR EXCLUDED.status IN ('sent', 'failed')
        """

    private static func document(_ reminders: [ScheduledReminder]) throws -> PostgresJSON {
        struct Row: Encodable {
            var id, subscriber_id, group, product_id, type, lead, status, environment: String
            var expires_at, due_at: Date
        }
        let rows = reminders.map {
            Row(id: $0.reminder.id, subscriber_id: $0.reminder.subscriberID, group: $0.reminder.group, product_id: $0.reminder.productID,
                type: $0.reminder.type.rawValue, lead: $0.reminder.lead.description, status: $0.status.rawValue,
                environment: $0.reminder.environment.rawValue,
                expires_at: $0.reminder.expiresAt, due_at: $0.reminder.dueAt)
        }
        return PostgresJSON(data: try LedgerJSON.makeEncoder().encode(rows))
    }

    /// Wakes the dispatchers (they listen on `channel`) when this transaction commits.
    static func notifyStatement(channel: String) -> PostgresQuery {
        "SELECT pg_notify(\(channel), '')"
    }

    /// How far the projection has applied each subscriber's stream, its
    /// clock, and the earliest coverage end the expiry sweeper has to record.
    struct Progress: Encodable, Sendable {
        var subscriber_id: String
        var stream_version: Int64
        var clock: Date
        @ExplicitNull var next_expiry_at: Date?
    }

    /// Upserts the progress of many subscribers, in one statement.
    static func saveProgressStatement(_ progress: [Progress], in tables: ProjectionTables,
                                      upsert: Bool = true) throws -> PostgresQuery? {
        guard !progress.isEmpty else { return nil }
        return """
            INSERT INTO \(unsafeRaw: tables.name("reminder_subscribers")) (subscriber_id, stream_version, clock, next_expiry_at)
            SELECT x.subscriber_id, x.stream_version, x.clock, x.next_expiry_at
            FROM jsonb_to_recordset(\(PostgresJSON(data: try LedgerJSON.makeEncoder().encode(progress)))::jsonb) AS x(
                subscriber_id text, stream_version bigint, clock timestamptz, next_expiry_at timestamptz)
            \(unsafeRaw: upsert ? """
                ON CONFLICT (subscriber_id) DO UPDATE
                SET stream_version = EXCLUDED.stream_version, clock = EXCLUDED.clock, next_expiry_at = EXCLUDED.next_expiry_at
                """ : "")
            """
    }

    /// In a rebuild's swap: the dispatcher's bookkeeping (attempts, lease,
    /// last error) is not in the events, so it is carried from the live rows
    /// to the rebuilt ones still pending, or a running delivery's lease would
    /// be dropped (and another dispatcher could send it again) and its
    /// backoff restarted.
    static func carryDeliveriesToShadow(on connection: Connection) async throws {
        try await connection.query("""
            UPDATE \(unsafeRaw: ProjectionTables.shadow.name("reminders")) r
            SET attempts = l.attempts, next_attempt_at = l.next_attempt_at, claim_token = l.claim_token, last_error = l.last_error
            FROM reminders l
            WHERE r.id = l.id AND r.status = 'pending' AND l.status = 'pending'
            """)
    }

    /// Empties the projection for a rebuild. The dispatcher's bookkeeping
    /// (attempts, lease, last error) is not in the events: it is set aside
    /// for `restoreDeliveries`, in this transaction.
    static func resetKeepingDeliveries(on connection: Connection) async throws {
        try await connection.query("""
            CREATE TEMP TABLE reminder_delivery_kept ON COMMIT DROP AS
            SELECT id, attempts, next_attempt_at, claim_token, last_error FROM reminders WHERE status = 'pending'
            """)
        try await connection.query("DELETE FROM reminders")
        try await connection.query("DELETE FROM reminder_subscribers")
    }

    /// Puts back what `resetKeepingDeliveries` set aside, on the reminders still pending.
    static func restoreDeliveries(on connection: Connection) async throws {
        try await connection.query("""
            UPDATE reminders r
            SET attempts = k.attempts, next_attempt_at = k.next_attempt_at, claim_token = k.claim_token, last_error = k.last_error
            FROM reminder_delivery_kept k
            WHERE r.id = k.id AND r.status = 'pending'
            """)
        try await connection.query("DROP TABLE reminder_delivery_kept")
    }

    /// A delivery's outcome on its reminder's row, in the delivery's
    /// transaction (`ChangeDispatcher`, step 3): the attempts, the last
    /// error and the next attempt (as `GET /v1/reminders` lists them); a
    /// `status` other than `pending` (`sent`, `failed`) is final.
    static func recordDelivery(_ reminderID: String, status: String, attempt: Int, error: String?, retryAt: Date?,
                               on connection: Connection) async throws {
        try await connection.query("""
            UPDATE reminders
            SET status = CASE WHEN \(status) = 'pending' THEN status ELSE \(status) END, attempts = \(attempt),
                last_error = \(error), next_attempt_at = coalesce(\(retryAt)::timestamptz, now()), claim_token = NULL,
                updated_at = now()
            WHERE id = \(reminderID)
            """)
    }
}

extension ReminderRows {
    /// Erasure: the subscriber's reminders and progress go. None is sent to
    /// an erased subscriber, and the projection schedules none for a stream
    /// without a key, so a rebuild after an erasure has none either (the
    /// sealed reminder ids of the stream could not be matched to rows kept).
    static let erasureStep = ErasureStep(name: "reminders") { subscriberID, _, connection in
        try await connection.query("DELETE FROM reminders WHERE subscriber_id = \(subscriberID)")
        try await connection.query("DELETE FROM reminder_subscribers WHERE subscriber_id = \(subscriberID)")
    }
}
