import Foundation
import Ledger
import Postgres

/// A reminder as served: the state's fields plus who it is for and how its
/// delivery went.
public struct ReminderView: Sendable, Equatable, Encodable {
    public var id: String
    public var subscriberID: String
    public var type: ReminderType
    public var group: String
    public var productID: String
    public var expiresAt: Date
    public var lead: ISODuration
    public var dueAt: Date
    public var status: ReminderStatus
    public var attempts: Int
    @ExplicitNull public var lastError: String?
    public var environment: Ledger.Environment

    enum CodingKeys: String, CodingKey {
        case id, subscriberID = "subscriberId", type, group, productID = "productId", expiresAt, lead, dueAt, status
        case attempts, lastError, environment
    }

    /// As the subscriber state shows it.
    public var stateReminder: SubscriberState.Reminder {
        SubscriberState.Reminder(id: id, dueAt: dueAt, lead: lead, status: status)
    }
}

/// Reads of the reminder projection (`reminders`).
public struct ReminderStore: Sendable {
    let pool: ConnectionPool

    /// Where listings across subscribers run: the support reads' share of
    /// the pool (`AppDependencies.listings`), or else all of it.
    let listings: PoolShare

    public init(pool: ConnectionPool, listings: PoolShare? = nil) {
        self.pool = pool
        self.listings = listings ?? PoolShare(of: pool, limit: pool.configuration.maximumConnections)
    }

    /// Reminders across subscribers (or of one), by due time; `dueAfter` is
    /// inclusive, `dueBefore` exclusive.
    public func list(status: ReminderStatus? = nil, subscriberID: String? = nil, dueAfter: Date? = nil, dueBefore: Date? = nil,
                     limit: Int = 1000) async throws -> [ReminderView] {
        try await listings.query(Self.listQuery(status: status, subscriberID: subscriberID, dueAfter: dueAfter, dueBefore: dueBefore,
                                                limit: limit)).map(Self.view)
    }

    /// The listing's statement; each filter and the order have an index
    /// (`reminders_due_order`, `reminders_by_status`, `reminders_subscriber`).
    static func listQuery(status: ReminderStatus?, subscriberID: String?, dueAfter: Date?, dueBefore: Date?, limit: Int) -> PostgresQuery {
        """
            SELECT \(unsafeRaw: ReminderRows.columns) FROM reminders
            WHERE (\(status?.rawValue)::text IS NULL OR status = \(status?.rawValue))
              AND (\(subscriberID)::text IS NULL OR subscriber_id = \(subscriberID))
              AND (\(dueAfter)::timestamptz IS NULL OR due_at >= \(dueAfter))
              AND (\(dueBefore)::timestamptz IS NULL OR due_at < \(dueBefore))
            ORDER BY due_at, id
            LIMIT \(limit)
            """
    }

    /// The statement reading some subscribers' reminders, by due time, to
    /// pipeline with others (`SubscriberReader.states`); its rows are read
    /// with `view`.
    static func remindersStatement(of subscriberIDs: [String]) -> PostgresQuery {
        if subscriberIDs.count == 1 {
            // A read alone: the plain index probe, cheapest to start.
            return """
                SELECT \(unsafeRaw: ReminderRows.columns) FROM reminders WHERE subscriber_id = \(subscriberIDs[0])
                ORDER BY due_at, id
                """
        }
        // One index probe per subscriber (LATERAL, kept apart by OFFSET 0),
        // whatever the planner thinks of the list's length.
        return """
            SELECT r.* FROM jsonb_array_elements_text(\(JSONArgument.strings(subscriberIDs))::jsonb) AS ids(subscriber_id)
            CROSS JOIN LATERAL (SELECT \(unsafeRaw: ReminderRows.columns) FROM reminders
                                WHERE reminders.subscriber_id = ids.subscriber_id OFFSET 0) r
            ORDER BY r.due_at, r.id
            """
    }

    /// Subscribers whose non-renewing coverage has ended by `instant` without
    /// an expiry event yet (the expiry sweeper's work), earliest first.
    func subscribersWithExpiryDue(at instant: Date, limit: Int) async throws -> [String] {
        try await pool.query("""
            SELECT subscriber_id FROM reminder_subscribers
            WHERE next_expiry_at <= \(instant)
            ORDER BY next_expiry_at, subscriber_id
            LIMIT \(limit)
            """).map { try $0.decode(String.self, at: 0) }
    }

    /// Sets a subscriber aside from the expiry sweep until `instant` (its
    /// sweep failed). The projection sets the real time again with its next event.
    func deferExpiry(of subscriberID: String, until instant: Date) async throws {
        try await pool.query("""
            UPDATE reminder_subscribers SET next_expiry_at = \(instant) WHERE subscriber_id = \(subscriberID)
            """)
    }

    /// Counts by status (for `/metrics`).
    public func counts() async throws -> [ReminderStatus: Int] {
        var counts = Dictionary(uniqueKeysWithValues: ReminderStatus.allCases.map { ($0, 0) })
        for row in try await pool.query("SELECT status, count(*) FROM reminders GROUP BY status") {
            if let status = ReminderStatus(rawValue: try row.decode(String.self, at: 0)) {
                counts[status] = try row.decode(Int.self, at: 1)
            }
        }
        return counts
    }

    static func view(_ row: PostgresRow) throws -> ReminderView {
        let (reminder, status, attempts, lastError) = try ReminderRows.reminder(row)
        return ReminderView(id: reminder.id, subscriberID: reminder.subscriberID, type: reminder.type, group: reminder.group,
                            productID: reminder.productID, expiresAt: reminder.expiresAt, lead: reminder.lead,
                            dueAt: reminder.dueAt, status: status, attempts: attempts, lastError: lastError,
                            environment: reminder.environment)
    }
}
