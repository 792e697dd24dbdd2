import AppStore
import Foundation
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
public enum NotificationStatus: String, Sendable, Encodable {
    /// Its facts are in the ledger.
    case applied
    /// It has no facts (TEST, PRICE_INCREASE, unknown types).
    case acknowledged
    /// Waiting for its original transaction to be claimed.
    case pending
    /// The ledger refused its facts; kept with the reason for support.
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
}

/// The SQL of `appstore_notifications` (sql/0004_appstore.sql).
enum NotificationStore {
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
                \(row.error?.code), \(row.error?.message), \(facts.summary), \(row.signedPayload), \(appliedAt))
            \(unsafeRaw: ifAbsent ? "ON CONFLICT (notification_uuid) DO NOTHING" : "")
            """)
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
                error_code = \(error?.code), error_message = \(error?.message), applied_at = \(appliedAt)
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
