import EventStore
import Foundation
import Ledger
import Postgres

/// The statements of the change feed's writers (`sql/0022_change_feed.sql`):
/// progress rows, changes and the deliveries they create, the wake-up.
enum ChangeRows {
    /// Notified when changes are published; the pull feed's waiters and the
    /// webhook dispatchers listen.
    static let notificationChannel = "subledger_changes"

    /// Locks and reads the progress of `subscriberIDs` (those that have one).
    /// Blocks while a sweeper holds one, so the two never publish the same
    /// subscriber's sequence at once.
    static func lockProgress(of subscriberIDs: [String], on connection: Connection) async throws -> [String: ChangeProgress] {
        let wanted = PostgresJSON(data: try JSONEncoder().encode(subscriberIDs))
        let rows = try await connection.query("""
            SELECT subscriber_id, stream_version, clock, sequence, entitlements::text, next_transition_at
            FROM change_subscribers
            WHERE subscriber_id IN (SELECT jsonb_array_elements_text(\(wanted)::jsonb))
            ORDER BY subscriber_id
            FOR UPDATE
            """)
        return try progress(rows)
    }

    /// Locks up to `limit` subscribers whose next transition by time is due
    /// and up to `limit` with a reminder due and not yet published, skipping
    /// those another sweeper (or the consumer) holds. A subscriber the feed
    /// has not reached yet has no row: their reminders wait for it.
    static func lockDue(at now: Date, limit: Int, on connection: Connection) async throws -> [String: ChangeProgress] {
        let rows = try await connection.query("""
            SELECT subscriber_id, stream_version, clock, sequence, entitlements::text, next_transition_at
            FROM change_subscribers
            WHERE subscriber_id IN (
                (SELECT subscriber_id FROM change_subscribers WHERE next_transition_at <= \(now)
                 ORDER BY next_transition_at LIMIT \(limit))
                UNION
                (SELECT r.subscriber_id FROM reminders r
                 WHERE r.status = 'pending' AND r.next_attempt_at <= \(now)
                   AND NOT EXISTS (SELECT 1 FROM changes c WHERE c.id = r.id)
                 ORDER BY r.next_attempt_at LIMIT \(limit)))
            FOR UPDATE SKIP LOCKED
            """)
        return try progress(rows)
    }

    /// Seconds from `now` to the earliest known instant still to come: a
    /// transition by time, a pending reminder's due time (nil: none).
    static func secondsUntilNextInstant(after now: Date, pool: ConnectionPool) async throws -> Double? {
        let rows = try await pool.query("""
            SELECT extract(epoch FROM least(
                (SELECT min(next_transition_at) FROM change_subscribers WHERE next_transition_at > \(now)),
                (SELECT min(next_attempt_at) FROM reminders WHERE status = 'pending' AND next_attempt_at > \(now)
                   AND next_attempt_at < 'infinity')) - \(now))::float8
            """)
        return try rows.first?.decode(Double?.self, at: 0)
    }

    /// The progress rows as the snapshot replay's progress table
    /// (`SubscriberSnapshots.replayQuery`), one version back: the replay
    /// reads the events after its progress, and the time sweeper wants the
    /// ledger up to the version the feed reached, that version's event included.
    static let replayProgressTable = "(SELECT subscriber_id, stream_version - 1 AS stream_version, clock FROM change_subscribers)"

    /// The due reminders of `subscriberIDs` not yet published, by due time
    /// (the reminder projection's rows; `next_attempt_at` is their due time
    /// until they are published).
    static func dueReminders(of subscriberIDs: [String], at now: Date, on connection: Connection) async throws -> [String: [DesiredReminder]] {
        guard !subscriberIDs.isEmpty else { return [:] }
        let wanted = PostgresJSON(data: try JSONEncoder().encode(subscriberIDs))
        let rows = try await connection.query("""
            SELECT \(unsafeRaw: ReminderRows.columns) FROM reminders r
            WHERE subscriber_id IN (SELECT jsonb_array_elements_text(\(wanted)::jsonb))
              AND status = 'pending' AND next_attempt_at <= \(now)
              AND NOT EXISTS (SELECT 1 FROM changes c WHERE c.id = r.id)
            ORDER BY least(due_at, next_attempt_at), id
            """)
        var result: [String: [DesiredReminder]] = [:]
        for row in rows {
            let (reminder, _, _, _) = try ReminderRows.reminder(row)
            result[reminder.subscriberID, default: []].append(reminder)
        }
        return result
    }

    /// Due reminders too late to publish (due more than `lateness` seconds
    /// before `now`, never published) are `skipped`, never sent late.
    static func skipStaleRemindersStatement(at now: Date, lateness: TimeInterval) -> PostgresQuery {
        """
        UPDATE reminders r SET status = 'skipped', updated_at = now()
        WHERE r.status = 'pending' AND r.next_attempt_at <= \(now)
          AND r.due_at < \(now - lateness)
          AND NOT EXISTS (SELECT 1 FROM changes c WHERE c.id = r.id)
        """
    }

    /// Published reminders leave the publisher's sight: their row's
    /// `next_attempt_at` now follows their delivery (never, until one is
    /// attempted).
    static func markPublishedStatement(_ reminderIDs: [String]) throws -> PostgresQuery? {
        guard !reminderIDs.isEmpty else { return nil }
        let ids = PostgresJSON(data: try JSONEncoder().encode(reminderIDs))
        return """
            UPDATE reminders SET next_attempt_at = 'infinity', updated_at = now()
            WHERE id IN (SELECT jsonb_array_elements_text(\(ids)::jsonb)) AND status = 'pending'
            """
    }

    private static func progress(_ rows: PostgresRows) throws -> [String: ChangeProgress] {
        var result: [String: ChangeProgress] = [:]
        for row in rows {
            let subscriberID = try row.decode(String.self, at: 0)
            result[subscriberID] = ChangeProgress(
                subscriberID: subscriberID, streamVersion: try row.decode(Int64.self, at: 1), clock: try row.decode(Date.self, at: 2),
                sequence: try row.decode(Int64.self, at: 3),
                published: try PublishedEntitlements(storedJSON: Data(try row.decode(String.self, at: 4).utf8)),
                nextTransitionAt: try row.decode(Date?.self, at: 5))
        }
        return result
    }

    /// Upserts progress rows, one statement.
    static func saveProgressStatement(_ progress: [ChangeProgress]) throws -> PostgresQuery? {
        guard !progress.isEmpty else { return nil }
        struct Row: Encodable {
            var subscriber_id: String
            var stream_version: Int64
            var clock: Date
            var sequence: Int64
            var entitlements: String
            var next_transition_at: Date?
        }
        let rows = progress.map {
            Row(subscriber_id: $0.subscriberID, stream_version: $0.streamVersion, clock: $0.clock, sequence: $0.sequence,
                entitlements: $0.published.storedJSON, next_transition_at: $0.nextTransitionAt)
        }
        let json = try PostgresJSON(encoding: rows, encoder: LedgerJSON.makeEncoder())
        return """
            INSERT INTO change_subscribers (subscriber_id, stream_version, clock, sequence, entitlements, next_transition_at)
            SELECT subscriber_id, stream_version, clock, sequence, entitlements::jsonb, next_transition_at
            FROM jsonb_to_recordset(\(json)::jsonb) AS x(subscriber_id text, stream_version bigint, clock timestamptz,
                                                      sequence bigint, entitlements text, next_transition_at timestamptz)
            ON CONFLICT (subscriber_id) DO UPDATE SET
                stream_version = excluded.stream_version, clock = excluded.clock, sequence = excluded.sequence,
                entitlements = excluded.entitlements, next_transition_at = excluded.next_transition_at
            """
    }

    /// Inserts changes (in sequence order) and, in the same statement, a
    /// pending delivery for each endpoint subscribed to its type. A change
    /// whose id is already stored is left as it is (exactly once).
    static func insertStatement(_ changes: [NewChange]) throws -> PostgresQuery? {
        guard !changes.isEmpty else { return nil }
        let json = try PostgresJSON(encoding: changes, encoder: LedgerJSON.makeEncoder())
        return """
            WITH input AS (
                     SELECT x->>'id' AS id, x->>'subscriber_id' AS subscriber_id, (x->>'sequence')::bigint AS sequence,
                            x->>'type' AS type, x->>'environment' AS environment,
                            (x->>'recorded_at')::timestamptz AS recorded_at, (x->>'body')::jsonb AS body, n
                     FROM jsonb_array_elements(\(json)::jsonb) WITH ORDINALITY AS t(x, n)),
                 inserted AS (
                     INSERT INTO changes (id, subscriber_id, sequence, type, environment, recorded_at, body)
                     SELECT id, subscriber_id, sequence, type, environment, recorded_at, body FROM input ORDER BY n
                     ON CONFLICT (id) DO NOTHING
                     RETURNING id, subscriber_id, sequence, type)
            INSERT INTO webhook_deliveries (endpoint_id, change_id, subscriber_id, sequence)
            SELECT w.id, i.id, i.subscriber_id, i.sequence
            FROM inserted i JOIN webhook_endpoints w ON cardinality(w.types) = 0 OR i.type = ANY (w.types)
            """
    }

    static var notifyStatement: PostgresQuery {
        "SELECT pg_notify(\(notificationChannel), '')"
    }

    /// The writes of a fold round, one pipeline: progress, changes with
    /// their deliveries, and the wake-up when there is anything new.
    static func write(_ folds: [ChangeFold], publishedReminders: [String] = [], on connection: Connection) async throws {
        let changes = folds.flatMap(\.changes)
        let statements = [
            try saveProgressStatement(folds.map(\.progress)),
            try insertStatement(changes),
            try markPublishedStatement(publishedReminders),
            changes.isEmpty ? nil : notifyStatement,
        ].compactMap { $0 }
        if !statements.isEmpty { _ = try await connection.pipeline(statements) }
    }
}
