import Foundation
import Ledger
import Postgres

/// What became of a Play push (`googleplay_notifications.status`).
public enum GooglePlayNotificationStatus: String, Sendable, Encodable, CaseIterable {
    /// Its facts are in the ledger (or already were).
    case applied
    /// Nothing to record (a test notification, a kind this build does not know).
    case acknowledged
    /// Nobody holds the purchase yet: recorded when it is linked.
    case unattributed
    /// Another package or environment, or the ledger refused it.
    case rejected
}

/// One row of `googleplay_notifications`.
struct GooglePlayNotificationRow: Sendable {
    var messageID: String
    var kind: String
    var notificationType: Int?
    var eventTime: Date
    var packageName: String
    var environment: Ledger.Environment?
    var purchaseToken: String?
    var subscriberID: String?
    var status: GooglePlayNotificationStatus
    var error: LedgerError?
    var summary: String
}

/// The SQL of Google Play's tables (sql/0031): pushes by message id, the
/// acknowledgements left to make, the voided-purchase walk's checkpoint.
enum GooglePlayStore {
    static func status(ofMessage messageID: String, on connection: Connection) async throws -> GooglePlayNotificationStatus? {
        let rows = try await connection.query("SELECT status FROM googleplay_notifications WHERE message_id = \(messageID)")
        return try rows.first.flatMap { GooglePlayNotificationStatus(rawValue: try $0.decode(String.self, at: 0)) }
    }

    /// Stores a push once; false when its message id was stored already.
    @discardableResult
    static func insert(_ row: GooglePlayNotificationRow, on connection: Connection) async throws -> Bool {
        let rows = try await connection.query("""
            INSERT INTO googleplay_notifications (message_id, kind, notification_type, event_time, package_name, environment,
                purchase_token, subscriber_id, status, error_code, error_message, summary)
            VALUES (\(row.messageID), \(row.kind), \(row.notificationType.map(Int64.init)), \(row.eventTime), \(row.packageName),
                \(row.environment?.rawValue), \(row.purchaseToken), \(row.subscriberID), \(row.status.rawValue),
                \(row.error?.code.rawValue), \(row.error?.message), \(row.summary))
            ON CONFLICT (message_id) DO NOTHING
            RETURNING 1
            """)
        return !rows.isEmpty
    }

    // MARK: Acknowledgements

    /// A purchase Google says is not acknowledged: to acknowledge (once; a
    /// row already there keeps its state).
    static func requireAcknowledgement(_ purchase: GooglePlayPurchase, on connection: Connection) async throws {
        try await connection.query("""
            INSERT INTO googleplay_acknowledgements (environment, purchase_token, kind, product_id, status)
            VALUES (\(purchase.environment.rawValue), \(purchase.purchaseToken), \(purchase.kind.rawValue), \(purchase.productID), 'pending')
            ON CONFLICT (environment, purchase_token) DO NOTHING
            """)
    }

    struct DueAcknowledgement: Sendable {
        var environment: Ledger.Environment
        var purchaseToken: String
        var kind: GooglePlayPurchase.Kind
        var productID: String
        var attempts: Int
    }

    /// Up to `limit` acknowledgements due now, each leased for `lease` (its
    /// next attempt moved past it) so another instance does not take it too.
    static func claimDue(limit: Int, lease: Duration, on connection: Connection) async throws -> [DueAcknowledgement] {
        let seconds = Double(lease.components.seconds)
        let rows = try await connection.query("""
            UPDATE googleplay_acknowledgements a SET next_attempt_at = now() + make_interval(secs => \(seconds))
            FROM (SELECT environment, purchase_token FROM googleplay_acknowledgements
                  WHERE status = 'pending' AND next_attempt_at <= now()
                  ORDER BY next_attempt_at LIMIT \(Int64(limit)) FOR UPDATE SKIP LOCKED) due
            WHERE a.environment = due.environment AND a.purchase_token = due.purchase_token
            RETURNING a.environment, a.purchase_token, a.kind, a.product_id, a.attempts
            """)
        return try rows.compactMap { row in
            guard let environment = Ledger.Environment(rawValue: try row.decode(String.self, at: 0)),
                  let kind = GooglePlayPurchase.Kind(rawValue: try row.decode(String.self, at: 2)) else { return nil }
            return DueAcknowledgement(environment: environment, purchaseToken: try row.decode(String.self, at: 1), kind: kind,
                                      productID: try row.decode(String.self, at: 3), attempts: Int(try row.decode(Int64.self, at: 4)))
        }
    }

    static func markAcknowledged(_ due: DueAcknowledgement, on connection: Connection) async throws {
        try await connection.query("""
            UPDATE googleplay_acknowledgements SET status = 'acknowledged', acknowledged_at = now(), attempts = attempts + 1,
                last_error = NULL
            WHERE environment = \(due.environment.rawValue) AND purchase_token = \(due.purchaseToken)
            """)
    }

    static func markFailed(_ due: DueAcknowledgement, error: String, retryIn: Duration, on connection: Connection) async throws {
        let seconds = Double(retryIn.components.seconds)
        try await connection.query("""
            UPDATE googleplay_acknowledgements SET attempts = attempts + 1, last_error = \(String(error.prefix(500))),
                next_attempt_at = now() + make_interval(secs => \(seconds))
            WHERE environment = \(due.environment.rawValue) AND purchase_token = \(due.purchaseToken)
            """)
    }

    /// (pending, acknowledged) counts, for `/metrics` and the tests.
    static func acknowledgementCounts(on connection: Connection) async throws -> (pending: Int, acknowledged: Int) {
        let row = try await connection.query("""
            SELECT count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'acknowledged')
            FROM googleplay_acknowledgements
            """).first
        return (Int(try row?.decode(Int64.self, at: 0) ?? 0), Int(try row?.decode(Int64.self, at: 1) ?? 0))
    }

    // MARK: Voided purchases

    static func voidedSince(on connection: Connection) async throws -> Date? {
        try await connection.query("SELECT voided_since FROM googleplay_reconcile_checkpoints WHERE id = 1").first?.decode(Date.self, at: 0)
    }

    static func setVoidedSince(_ date: Date, on connection: Connection) async throws {
        try await connection.query("""
            INSERT INTO googleplay_reconcile_checkpoints (id, voided_since) VALUES (1, \(date))
            ON CONFLICT (id) DO UPDATE SET voided_since = GREATEST(googleplay_reconcile_checkpoints.voided_since, EXCLUDED.voided_since),
                updated_at = now()
            """)
    }
}

extension GooglePlayStore {
    /// Erasure: the subscriber's pushes stay, counted, under the pseudonym.
    static let erasureStep = ErasureStep(name: "google play notifications") { subscriberID, pseudonym, connection in
        try await connection.query("""
            UPDATE googleplay_notifications
            SET subscriber_id = \(pseudonym), error_message = replace(error_message, \(subscriberID), \(pseudonym))
            WHERE subscriber_id = \(subscriberID)
            """)
    }
}
