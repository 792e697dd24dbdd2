import EventStore
import Foundation
import Ledger
import Postgres

/// The dispatcher's side of `reminders`: claims with a lease, and the
/// outcome of each delivery recorded with its event in one transaction.
struct ReminderDeliveryStore: Sendable {
    let pool: ConnectionPool
    let store: EventStore

    /// Seconds until the next pending reminder is due (negative: overdue); nil when none is pending.
    func secondsUntilNextDue() async throws -> Double? {
        let rows = try await pool.query("""
            SELECT extract(epoch FROM min(next_attempt_at) - clock_timestamp())::float8 FROM reminders WHERE status = 'pending'
            """)
        return try rows.first?.decode(Double?.self, at: 0)
    }

    /// Locks, leases and returns up to `limit` due reminders (`FOR UPDATE SKIP
    /// LOCKED`, so several dispatchers never claim the same one).
    func claimDue(limit: Int, lease: Duration, token: UUID) async throws -> [(reminder: DesiredReminder, attempts: Int)] {
        let columns = ReminderRows.columns.split(separator: ",").map { "r." + $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        let rows = try await pool.query("""
            WITH due AS (
                SELECT id FROM reminders
                WHERE status = 'pending' AND next_attempt_at <= now()
                ORDER BY next_attempt_at, id
                LIMIT \(limit)
                FOR UPDATE SKIP LOCKED)
            UPDATE reminders r
            SET attempts = r.attempts + 1, claim_token = \(token)::uuid,
                next_attempt_at = now() + make_interval(secs => \(Self.seconds(lease))), updated_at = now()
            FROM due WHERE r.id = due.id
            RETURNING \(unsafeRaw: columns.joined(separator: ", "))
            """)
        return try rows.map { row in
            let (reminder, _, attempts, _) = try ReminderRows.reminder(row)
            return (reminder, attempts)
        }
    }

    /// Success: the row is `sent` exactly when `event` is stored.
    func markSent(_ id: String, subscriberID: String, event: LedgerEvent) async throws {
        try await store.transaction { connection in
            try await connection.query("""
                UPDATE reminders SET status = 'sent', claim_token = NULL, last_error = NULL, updated_at = now()
                WHERE id = \(id) AND status <> 'sent'
                """)
            try await appendSystemEvent(event, subscriberID: subscriberID, on: connection)
        }
    }

    /// The last attempt failed: `failed` with `event`, if this claim still
    /// holds the row. Returns whether it did.
    func markFailed(_ id: String, token: UUID, error: String, subscriberID: String, event: LedgerEvent) async throws -> Bool {
        try await store.transaction { connection in
            let updated = try await connection.query("""
                UPDATE reminders SET status = 'failed', claim_token = NULL, last_error = \(error), updated_at = now()
                WHERE id = \(id) AND claim_token = \(token)::uuid AND status = 'pending'
                """)
            guard updated.affectedRows == 1 else { return false }
            try await appendSystemEvent(event, subscriberID: subscriberID, on: connection)
            return true
        }
    }

    /// A failed attempt: try again after `delay`, if this claim still holds the row.
    func scheduleRetry(_ id: String, token: UUID, after delay: Duration, error: String) async throws {
        try await pool.query("""
            UPDATE reminders
            SET next_attempt_at = now() + make_interval(secs => \(Self.seconds(delay))),
                claim_token = NULL, last_error = \(error), updated_at = now()
            WHERE id = \(id) AND claim_token = \(token)::uuid AND status = 'pending'
            """)
    }

    private func appendSystemEvent(_ event: LedgerEvent, subscriberID: String, on connection: Connection) async throws {
        _ = try await store.append([StreamAppend(
            streamID: SubscriberStreams.streamID(for: subscriberID),
            events: try SubscriberStreams.newEvents([event], subscriberID: subscriberID, source: FactSource.subledger))],
            on: connection)
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
