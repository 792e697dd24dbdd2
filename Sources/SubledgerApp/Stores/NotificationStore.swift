import AppStore
import Foundation
import JSON
import Ledger
import Postgres

/// How a notification's subscriber was found (`appstore_notifications.attribution`).
enum NotificationAttribution: String, Sendable {
    /// The transaction's `appAccountToken` (apps set it to the subscriber id).
    case appAccountToken = "app_account_token"
    /// The subscriber holding its original transaction.
    case transactionOwner = "transaction_owner"
    /// Nobody yet: applied when its original transaction is claimed.
    case unattributed
    /// It names no transaction (TEST, summaries).
    case none
}

/// What became of a notification (`appstore_notifications.status`, and the
/// `outcome` of the notifications metric, which adds `duplicate`).
public enum NotificationStatus: String, Sendable, Encodable, CaseIterable {
    /// Its facts are in the ledger.
    case applied
    /// It has no facts (TEST, PRICE_INCREASE, unknown types).
    case acknowledged
    /// Waiting for its original transaction to be claimed.
    case pending
    /// The ledger refused its facts, or (read by reconciliation) it failed
    /// verification; kept with the reason for support.
    case rejected
}

/// One row of `appstore_notifications`.
struct NotificationRow: Sendable {
    var facts: NotificationFacts
    var signedPayload: String
    var subscriberID: String?
    var attribution: NotificationAttribution
    var status: NotificationStatus
    var error: LedgerError?

    /// The row of a notification about an erased subscriber: not applied
    /// (`rejected`, code `erased`), under the pseudonym, without the signed
    /// payload — as the erasure step leaves the rows stored before.
    var erased: NotificationRow {
        var row = self
        row.subscriberID = subscriberID.map(SubscriberPseudonyms.pseudonym(for:))
        row.signedPayload = ""
        row.status = .rejected
        row.error = LedgerError(kind: .gone, code: .erased, message: "The subscriber was erased; the notification is not applied.")
        return row
    }
}

/// An item of Get Notification History that failed verification, as
/// stored: `rejected`, with the reason, under an id of its own.
struct UnverifiedNotificationRow: Sendable {
    /// Derived from the signed payload, never the uuid it claims: a forgery
    /// must not take the id of the real notification.
    var id: String
    /// What it claims to be, for support; "UNVERIFIED" when it says nothing readable.
    var claimedType: String
    var signedDate: Date
    var environment: Ledger.Environment
    var error: AppStoreVerificationError
    var summary: String
    var signedPayload: String
}

/// A stored notification as support sees it: what it was, whom it was
/// about, what became of it. Never the signed payload.
public struct NotificationView: Sendable, Encodable {
    public var notificationUUID: String
    public var type: String
    public var subtype: String?
    public var status: String
    public var attribution: String
    public var environment: String
    public var subscriberId: String?
    public var transactionId: String?
    public var originalTransactionId: String?
    public var productId: String?
    public var summary: String
    public var errorCode: String?
    public var errorMessage: String?
    public var signedDate: Date
    public var receivedAt: Date
    public var appliedAt: Date?

    public func encode(to encoder: any Encoder) throws {
        // Absent values as explicit nulls: one shape for every row.
        enum Keys: String, CodingKey {
            case notificationUUID, type, subtype, status, attribution, environment, subscriberId, transactionId
            case originalTransactionId, productId, summary, errorCode, errorMessage, signedDate, receivedAt, appliedAt
        }
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(notificationUUID, forKey: .notificationUUID)
        try container.encode(type, forKey: .type)
        try container.encode(subtype, forKey: .subtype)
        try container.encode(status, forKey: .status)
        try container.encode(attribution, forKey: .attribution)
        try container.encode(environment, forKey: .environment)
        try container.encode(subscriberId, forKey: .subscriberId)
        try container.encode(transactionId, forKey: .transactionId)
        try container.encode(originalTransactionId, forKey: .originalTransactionId)
        try container.encode(productId, forKey: .productId)
        try container.encode(summary, forKey: .summary)
        try container.encode(errorCode, forKey: .errorCode)
        try container.encode(errorMessage, forKey: .errorMessage)
        try container.encode(RFC3339.format(signedDate), forKey: .signedDate)
        try container.encode(RFC3339.format(receivedAt), forKey: .receivedAt)
        try container.encode(appliedAt.map(RFC3339.format), forKey: .appliedAt)
    }
}

/// The SQL of `appstore_notifications` (sql/0004_appstore.sql): the writes
/// the notification service makes on its connections, and support's reads.
public struct NotificationStore: Sendable {
    let pool: ConnectionPool

    /// Where listings across subscribers run: the support reads' share of
    /// the pool (`AppDependencies.listings`), or else all of it.
    let listings: PoolShare

    public init(pool: ConnectionPool, listings: PoolShare? = nil) {
        self.pool = pool
        self.listings = listings ?? PoolShare(of: pool, limit: pool.configuration.maximumConnections)
    }

    /// Notifications, most recently received first, of one subscriber and/or
    /// in one status (`pending`: the unattributed ones waiting for a claim).
    public func list(subscriberID: String? = nil, status: NotificationStatus? = nil, limit: Int = 100) async throws -> [NotificationView] {
        try await listings.query(Self.listQuery(subscriberID: subscriberID, status: status, limit: limit)).map(Self.view)
    }

    /// The listing's statement; each filter and the order have an index
    /// (`appstore_notifications_received`, `_subscriber_received`, `_status_received`).
    static func listQuery(subscriberID: String?, status: NotificationStatus?, limit: Int) -> PostgresQuery {
        """
            SELECT notification_uuid, notification_type, subtype, status, attribution, environment, subscriber_id,
                   transaction_id, original_transaction_id, product_id, summary, error_code, error_message,
                   signed_date, received_at, applied_at
            FROM appstore_notifications
            WHERE (\(subscriberID)::text IS NULL OR subscriber_id = \(subscriberID))
              AND (\(status?.rawValue)::text IS NULL OR status = \(status?.rawValue))
            ORDER BY received_at DESC, notification_uuid
            LIMIT \(limit)
            """
    }

    static func view(_ row: PostgresRow) throws -> NotificationView {
        NotificationView(
            notificationUUID: try row.decode(String.self, at: 0), type: try row.decode(String.self, at: 1),
            subtype: try row.decode(String?.self, at: 2), status: try row.decode(String.self, at: 3),
            attribution: try row.decode(String.self, at: 4), environment: try row.decode(String.self, at: 5),
            subscriberId: try row.decode(String?.self, at: 6), transactionId: try row.decode(String?.self, at: 7),
            originalTransactionId: try row.decode(String?.self, at: 8), productId: try row.decode(String?.self, at: 9),
            summary: try row.decode(String.self, at: 10), errorCode: try row.decode(String?.self, at: 11),
            errorMessage: try row.decode(String?.self, at: 12), signedDate: try row.decode(Date.self, at: 13),
            receivedAt: try row.decode(Date.self, at: 14), appliedAt: try row.decode(Date?.self, at: 15))
    }

    /// The stored status of a notification, nil when it was never stored.
    static func status(of uuid: String, on connection: Connection) async throws -> NotificationStatus? {
        let rows = try await connection.query("SELECT status FROM appstore_notifications WHERE notification_uuid = \(uuid)")
        return try rows.first.flatMap { NotificationStatus(rawValue: try $0.decode(String.self, at: 0)) }
    }

    /// Inserts the row. With `ifAbsent`, a row already there wins (a retry
    /// whose facts another copy applied); without it, a concurrent copy makes
    /// this fail with a unique violation, rolling back the facts beside it.
    static func insert(_ row: NotificationRow, ifAbsent: Bool, on connection: Connection) async throws {
        let facts = row.facts
        let appliedAt: Date? = row.status == .applied ? Date() : nil
        try await connection.query("""
            INSERT INTO appstore_notifications (notification_uuid, notification_type, subtype, signed_date, environment,
                transaction_id, original_transaction_id, product_id, subscriber_id, attribution, status,
                error_code, error_message, summary, signed_payload, applied_at)
            VALUES (\(facts.notificationUUID), \(facts.notificationType.rawValue), \(facts.subtype?.rawValue), \(facts.signedDate),
                \(facts.environment.rawValue), \(facts.transactionID), \(facts.originalTransactionID), \(facts.productID),
                \(row.subscriberID), \(row.attribution.rawValue), \(row.status.rawValue),
                \(row.error?.code.rawValue), \(row.error?.message), \(facts.summary), \(row.signedPayload), \(appliedAt))
            \(unsafeRaw: ifAbsent ? "ON CONFLICT (notification_uuid) DO NOTHING" : "")
            """)
    }

    /// Stores an unverified item as `rejected`; false when it was already
    /// stored (an earlier run read the same item).
    static func insert(_ row: UnverifiedNotificationRow, on connection: Connection) async throws -> Bool {
        let rows = try await connection.query("""
            INSERT INTO appstore_notifications (notification_uuid, notification_type, signed_date, environment, attribution,
                status, error_code, error_message, summary, signed_payload)
            VALUES (\(row.id), \(row.claimedType), \(row.signedDate), \(row.environment.rawValue),
                \(NotificationAttribution.none.rawValue), \(NotificationStatus.rejected.rawValue), \(row.error.code.rawValue),
                \(row.error.field + ": " + row.error.message), \(row.summary), \(row.signedPayload))
            ON CONFLICT (notification_uuid) DO NOTHING
            """)
        return rows.affectedRows == 1
    }

    /// Marks a pending notification settled. Returns false when it was no
    /// longer pending (another claim applied it first).
    static func settlePending(_ uuid: String, status: NotificationStatus, subscriberID: String?, error: LedgerError?,
                              on connection: Connection) async throws -> Bool {
        let appliedAt: Date? = status == .applied ? Date() : nil
        let rows = try await connection.query("""
            UPDATE appstore_notifications
            SET status = \(status.rawValue), subscriber_id = COALESCE(\(subscriberID)::text, subscriber_id),
                attribution = COALESCE(\(subscriberID.map { _ in NotificationAttribution.transactionOwner.rawValue })::text, attribution),
                error_code = \(error?.code.rawValue), error_message = \(error?.message), applied_at = \(appliedAt)
            WHERE notification_uuid = \(uuid) AND status = 'pending'
            """)
        return rows.affectedRows == 1
    }

    /// Pending notifications about these original transactions, oldest signed first.
    static func pending(originalTransactionIDs: [String], on connection: Connection) async throws -> [(uuid: String, signedPayload: String)] {
        guard !originalTransactionIDs.isEmpty else { return [] }
        let list = JSONArgument.strings(originalTransactionIDs)
        let rows = try await connection.query("""
            SELECT notification_uuid, signed_payload FROM appstore_notifications
            WHERE status = 'pending'
              AND original_transaction_id IN (SELECT jsonb_array_elements_text(\(list)::jsonb))
            ORDER BY signed_date, received_at
            """)
        return try rows.map { (uuid: try $0.decode(String.self, at: 0), signedPayload: try $0.decode(String.self, at: 1)) }
    }
}

/// A pending notification was settled by someone else while this write was deciding.
struct NotificationAlreadySettled: Error {}

extension NotificationStore {
    /// Erasure: the subscriber's notifications stay, counted by the listing,
    /// under the pseudonym; the signed payload goes, since the transaction
    /// JWS inside it carries the `appAccountToken`.
    static let erasureStep = ErasureStep(name: "notifications") { subscriberID, pseudonym, connection in
        try await connection.query("""
            UPDATE appstore_notifications
            SET subscriber_id = \(pseudonym), signed_payload = '',
                error_message = replace(error_message, \(subscriberID), \(pseudonym))
            WHERE subscriber_id = \(subscriberID)
            """)
    }
}
