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

    static func scheduled(of subscriberID: String, on connection: Connection) async throws -> [ScheduledReminder] {
        try await connection.query("""
            SELECT \(unsafeRaw: columns) FROM reminders WHERE subscriber_id = \(subscriberID)
            """).map { row in
            let (reminder, status, _, _) = try reminder(row)
            return ScheduledReminder(reminder: reminder, status: status)
        }
    }

    /// Upserts the projection's columns. A row the dispatcher has meanwhile
    /// marked `sent` or `failed` is never moved back by the projection (its
    /// event is on its way to the projection and says the same); a row that
    /// becomes pending again is due at its due time with a fresh claim.
    static func write(_ reminders: [ScheduledReminder], subscriberID: String, on connection: Connection) async throws {
        guard !reminders.isEmpty else { return }
        struct Row: Encodable {
            var id, subscriber_id, group, product_id, type, lead, status, environment: String
            var expires_at, due_at: Date
        }
        let rows = reminders.map {
            Row(id: $0.reminder.id, subscriber_id: subscriberID, group: $0.reminder.group, product_id: $0.reminder.productID,
                type: $0.reminder.type.rawValue, lead: $0.reminder.lead.description, status: $0.status.rawValue,
                environment: $0.reminder.environment.rawValue,
                expires_at: $0.reminder.expiresAt, due_at: $0.reminder.dueAt)
        }
        let document = PostgresJSON(data: try LedgerJSON.makeEncoder().encode(rows))
        try await connection.query("""
            INSERT INTO reminders AS r (id, subscriber_id, "group", product_id, type, lead, expires_at, due_at, status, next_attempt_at, environment)
            SELECT x.id, x.subscriber_id, x."group", x.product_id, x.type, x.lead, x.expires_at, x.due_at, x.status, x.due_at, x.environment
            FROM jsonb_to_recordset(\(document)::jsonb) AS x(
                id text, subscriber_id text, "group" text, product_id text, type text, lead text,
                expires_at timestamptz, due_at timestamptz, status text, environment text)
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
            """)
    }

    /// Wakes the dispatchers (they listen on `channel`) when this transaction commits.
    static func notifyDispatchers(channel: String, on connection: Connection) async throws {
        try await connection.query("SELECT pg_notify(\(channel), '')")
    }

    /// How far the projection has applied a subscriber's stream, and its clock.
    static func progress(of subscriberID: String, on connection: Connection) async throws -> (streamVersion: Int64, clock: Date)? {
        guard let row = try await connection.query("""
            SELECT stream_version, clock FROM reminder_subscribers WHERE subscriber_id = \(subscriberID)
            """).first else { return nil }
        return (try row.decode(Int64.self, at: 0), try row.decode(Date.self, at: 1))
    }

    static func saveProgress(of subscriberID: String, streamVersion: Int64, clock: Date, nextExpiry: Date?,
                             on connection: Connection) async throws {
        try await connection.query("""
            INSERT INTO reminder_subscribers (subscriber_id, stream_version, clock, next_expiry_at)
            VALUES (\(subscriberID), \(streamVersion), \(clock), \(nextExpiry))
            ON CONFLICT (subscriber_id) DO UPDATE
            SET stream_version = EXCLUDED.stream_version, clock = EXCLUDED.clock, next_expiry_at = EXCLUDED.next_expiry_at
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
}
