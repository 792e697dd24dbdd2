import EventStore
import Foundation
import Ledger
import Logging
import Postgres

/// The `reminders` read model: for every subscriber a batch touches, the
/// reminders the rules call for after each of their new events, diffed with
/// what is scheduled (see `ReminderSchedule`), plus the earliest coverage end
/// the expiry sweeper has yet to record.
///
/// Deterministic, so a rebuild equals the live projection whatever the batch
/// sizes: each subscriber's events are applied one at a time in stream order
/// (reading the stream, so an event that commits in a later batch than a
/// newer one of the same stream is still applied in its place), and "now" is
/// the latest `recorded_at` seen in the stream, never the wall clock.
public struct ReminderProjection: EventConsumer {
    public static let consumerName = "reminders"
    /// Notified when a reminder becomes pending; dispatchers listen.
    public static let notificationChannel = "subledger_reminders"

    public var name: String { Self.consumerName }
    let store: EventStore
    let catalog: Catalog

    public init(store: EventStore, catalog: Catalog) {
        self.store = store
        self.catalog = catalog
    }

    public func handle(_ events: [RecordedEvent], on connection: Connection) async throws {
        var through: [String: Int64] = [:]
        var order: [String] = []
        for event in events {
            guard let subscriberID = Self.subscriberID(ofStream: event.streamID) else { continue }
            if through[subscriberID] == nil { order.append(subscriberID) }
            through[subscriberID] = max(through[subscriberID] ?? 0, event.streamVersion)
        }
        var notify = false
        for subscriberID in order {
            notify = try await update(subscriberID: subscriberID, through: through[subscriberID]!, on: connection) || notify
        }
        if notify {
            try await connection.query("SELECT pg_notify(\(Self.notificationChannel), '')")
        }
    }

    /// The dispatcher's bookkeeping (attempts, lease, last error) is not in
    /// the events: it is set aside here and put back by `finishRebuild`, so a
    /// rebuild neither drops a running delivery's lease (which would let
    /// another dispatcher send it again) nor restarts its backoff.
    public func reset(on connection: Connection) async throws {
        try await connection.query("""
            CREATE TEMP TABLE reminder_delivery_kept ON COMMIT DROP AS
            SELECT id, attempts, next_attempt_at, claim_token, last_error FROM reminders WHERE status = 'pending'
            """)
        try await connection.query("DELETE FROM reminders")
        try await connection.query("DELETE FROM reminder_subscribers")
    }

    public func finishRebuild(on connection: Connection) async throws {
        try await connection.query("""
            UPDATE reminders r
            SET attempts = k.attempts, next_attempt_at = k.next_attempt_at, claim_token = k.claim_token, last_error = k.last_error
            FROM reminder_delivery_kept k
            WHERE r.id = k.id AND r.status = 'pending'
            """)
        try await connection.query("DROP TABLE reminder_delivery_kept")
    }

    static func subscriberID(ofStream streamID: String) -> String? {
        let prefix = SubscriberStreams.streamID(for: "")
        guard streamID.hasPrefix(prefix) else { return nil }
        return String(streamID.dropFirst(prefix.count))
    }

    /// Applies the subscriber's events up to stream version `through`; returns
    /// whether a reminder became pending.
    private func update(subscriberID: String, through: Int64, on connection: Connection) async throws -> Bool {
        let progress = try await connection.query("""
            SELECT stream_version, clock FROM reminder_subscribers WHERE subscriber_id = \(subscriberID)
            """).first
        let applied = try progress?.decode(Int64.self, at: 0) ?? 0
        guard through > applied else { return false }
        var clock = try progress?.decode(Date.self, at: 1) ?? .distantPast

        let stored = try await store.readStream(SubscriberStreams.streamID(for: subscriberID), on: connection)
            .filter { $0.streamVersion <= through }
        var ledger = SubscriberLedger(subscriberID: subscriberID)
        var schedule = ReminderSchedule(try await ReminderRows.scheduled(of: subscriberID, on: connection))
        for event in stored {
            let recorded = try SubscriberStreams.ledgerEvent(event)
            ledger.apply(recorded)
            guard event.streamVersion > applied else { continue }
            clock = max(clock, event.recordedAt)
            switch recorded.event {
            case .reminderSent(let delivery):
                schedule.markSent(delivery.reminderId)
            case .reminderFailed(let delivery):
                schedule.markFailed(delivery.reminderId)
            default:
                schedule.schedule(Coverage.desiredReminders(of: ledger, catalog: catalog, now: clock), now: clock)
            }
        }
        let nextExpiry = Coverage.dueExpiries(of: ledger, catalog: catalog, now: .distantFuture)
            .compactMap { event -> Date? in
                if case .expired(let expiry) = event { return expiry.expiresDate }
                return nil
            }
            .min()
        try await connection.query("""
            INSERT INTO reminder_subscribers (subscriber_id, stream_version, clock, next_expiry_at)
            VALUES (\(subscriberID), \(through), \(clock), \(nextExpiry))
            ON CONFLICT (subscriber_id) DO UPDATE
            SET stream_version = EXCLUDED.stream_version, clock = EXCLUDED.clock, next_expiry_at = EXCLUDED.next_expiry_at
            """)
        let changed = schedule.changedReminders
        try await ReminderRows.write(changed, subscriberID: subscriberID, on: connection)
        return changed.contains { $0.status == .pending }
    }
}

/// The SQL of the `reminders` table.
enum ReminderRows {
    static let columns = """
        id, subscriber_id, "group", product_id, type, lead, expires_at, due_at, status, attempts, last_error
        """

    static func reminder(_ row: PostgresRow) throws -> (DesiredReminder, ReminderStatus, attempts: Int, lastError: String?) {
        let status = try row.decode(String.self, at: 8)
        let type = try row.decode(String.self, at: 4)
        let lead = try row.decode(String.self, at: 5)
        let reminder = DesiredReminder(
            id: try row.decode(String.self, at: 0), type: ReminderType(rawValue: type) ?? .renewalReminder,
            subscriberId: try row.decode(String.self, at: 1), group: try row.decode(String.self, at: 2),
            productId: try row.decode(String.self, at: 3), expiresAt: try row.decode(Date.self, at: 6),
            lead: (try? ISODuration(parsing: lead)) ?? .zero, dueAt: try row.decode(Date.self, at: 7))
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
            var id, subscriber_id, group, product_id, type, lead, status: String
            var expires_at, due_at: Date
        }
        let rows = reminders.map {
            Row(id: $0.reminder.id, subscriber_id: subscriberID, group: $0.reminder.group, product_id: $0.reminder.productId,
                type: $0.reminder.type.rawValue, lead: $0.reminder.lead.description, status: $0.status.rawValue,
                expires_at: $0.reminder.expiresAt, due_at: $0.reminder.dueAt)
        }
        let document = PostgresJSON(data: try LedgerJSON.makeEncoder().encode(rows))
        try await connection.query("""
            INSERT INTO reminders AS r (id, subscriber_id, "group", product_id, type, lead, expires_at, due_at, status, next_attempt_at)
            SELECT x.id, x.subscriber_id, x."group", x.product_id, x.type, x.lead, x.expires_at, x.due_at, x.status, x.due_at
            FROM jsonb_to_recordset(\(document)::jsonb) AS x(
                id text, subscriber_id text, "group" text, product_id text, type text, lead text,
                expires_at timestamptz, due_at timestamptz, status text)
            ON CONFLICT (id) DO UPDATE
            SET subscriber_id = EXCLUDED.subscriber_id, "group" = EXCLUDED."group", product_id = EXCLUDED.product_id,
                type = EXCLUDED.type, lead = EXCLUDED.lead, expires_at = EXCLUDED.expires_at, due_at = EXCLUDED.due_at,
                status = EXCLUDED.status,
                next_attempt_at = CASE WHEN r.status <> 'pending' AND EXCLUDED.status = 'pending'
                                       THEN EXCLUDED.due_at ELSE r.next_attempt_at END,
                claim_token = CASE WHEN r.status <> 'pending' AND EXCLUDED.status = 'pending'
                                   THEN NULL ELSE r.claim_token END,
                updated_at = now()
            WHERE r.status NOT IN ('sent', 'failed') OR EXCLUDED.status IN ('sent', 'failed')
            """)
    }
}
