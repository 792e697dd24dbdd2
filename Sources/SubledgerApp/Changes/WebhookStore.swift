import Crypto
import Foundation
import Ledger
import Postgres

/// Webhook endpoints and their deliveries (`sql/0022_change_feed.sql`).
public struct WebhookStore: Sendable {
    public struct Endpoint: Sendable, Encodable {
        public var id: String
        public var url: String
        public var types: [String]
        public var description: String
        public var createdAt: Date
        /// Only in the answers to the creation and to a rotation.
        public var secret: String?
        /// After a rotation, until when the previous secret still signs too.
        public var previousSecretExpiresAt: Date?
    }

    public struct Delivery: Sendable, Encodable {
        public var id: String
        public var changeId: String
        public var subscriberId: String
        public var sequence: Int64
        public var status: String
        public var attempts: Int
        @ExplicitNull public var nextAttemptAt: Date?
        @ExplicitNull public var lastError: String?
        public var createdAt: Date
        @ExplicitNull public var sentAt: Date?
    }

    public enum DeliveryStatus: String, Sendable, CaseIterable {
        case pending, sent, failed
    }

    /// Registered endpoints at most (the reminder webhook not counted): each
    /// is claimed and delivered on its own, so their number is bounded.
    public static let maximumEndpoints = 50
    /// How long the previous secret still signs after a rotation.
    public static let rotationOverlap: Duration = .seconds(86_400)

    /// `maximumEndpoints` are registered already.
    public struct LimitReached: Error {}

    let pool: ConnectionPool
    let sealing: WebhookSealingSource

    public init(pool: ConnectionPool, sealing: WebhookSealingSource = WebhookSealingSource(secret: nil)) {
        self.pool = pool
        self.sealing = sealing
    }

    /// Registers an endpoint with a new secret, shown in this answer only,
    /// stored sealed. Registrations are counted under a lock, so concurrent
    /// ones cannot pass `maximumEndpoints` together.
    public func create(url: String, types: [String], description: String) async throws -> Endpoint {
        let id = "whk_" + Self.randomHex(bytes: 12)
        let secret = "whsec_" + Self.randomHex(bytes: 24)
        let sealed = try await sealing.sealing(pool: pool).seal(secret)
        let typesJSON = PostgresJSON(data: try JSONEncoder().encode(types))
        let createdAt = try await pool.withTransaction { connection in
            try await connection.lockForTransaction(.webhookRegistration)
            let count = try await connection.query("""
                SELECT count(*) FROM webhook_endpoints WHERE id <> \(ReminderWebhook.endpointID)
                """).first!.decode(Int.self, at: 0)
            guard count < Self.maximumEndpoints else { throw LimitReached() }
            return try await connection.query("""
                INSERT INTO webhook_endpoints (id, url, secret, types, description)
                VALUES (\(id), \(url), \(sealed), ARRAY(SELECT jsonb_array_elements_text(\(typesJSON)::jsonb)), \(description))
                RETURNING created_at
                """).first!.decode(Date.self, at: 0)
        }
        return Endpoint(id: id, url: url, types: types, description: description, createdAt: createdAt, secret: secret)
    }

    static let endpointColumns = """
        id, url, to_jsonb(types)::text, description, created_at,
        CASE WHEN previous_secret_expires_at > now() THEN previous_secret_expires_at END
        """

    public func list() async throws -> [Endpoint] {
        try await pool.query("""
            SELECT \(unsafeRaw: Self.endpointColumns) FROM webhook_endpoints ORDER BY created_at, id
            """).map { try Self.endpoint($0, secret: nil) }
    }

    static func endpoint(_ row: PostgresRow, secret: String?) throws -> Endpoint {
        Endpoint(id: try row.decode(String.self, at: 0), url: try row.decode(String.self, at: 1),
                 types: try JSONDecoder().decode([String].self, from: Data(try row.decode(String.self, at: 2).utf8)),
                 description: try row.decode(String.self, at: 3), createdAt: try row.decode(Date.self, at: 4), secret: secret,
                 previousSecretExpiresAt: try row.decode(Date?.self, at: 5))
    }

    /// Gives the endpoint a new secret, shown in this answer only; the one it
    /// had keeps signing, beside the new one, for `rotationOverlap` (a
    /// second rotation within that time ends the older one at once). Nil
    /// when there is no such endpoint; the reminder webhook's secret is the
    /// configuration's.
    public func rotateSecret(of id: String) async throws -> Endpoint? {
        let secret = "whsec_" + Self.randomHex(bytes: 24)
        let sealed = try await sealing.sealing(pool: pool).seal(secret)
        return try await pool.query("""
            UPDATE webhook_endpoints
            SET previous_secret = secret, secret = \(sealed),
                previous_secret_expires_at = now() + make_interval(secs => \(Double(Self.rotationOverlap.components.seconds)))
            WHERE id = \(id) AND id <> \(ReminderWebhook.endpointID)
            RETURNING \(unsafeRaw: Self.endpointColumns)
            """).first.map { try Self.endpoint($0, secret: secret) }
    }

    public func exists(_ id: String) async throws -> Bool {
        try await !pool.query("SELECT 1 FROM webhook_endpoints WHERE id = \(id)").isEmpty
    }

    /// Removes the endpoint and its deliveries; false when there was none.
    public func delete(_ id: String) async throws -> Bool {
        try await !pool.query("DELETE FROM webhook_endpoints WHERE id = \(id) RETURNING id").isEmpty
    }

    static let deliveryColumns = """
        id::text, change_id, subscriber_id, sequence, status, attempts,
        CASE WHEN status = 'pending' THEN next_attempt_at END, last_error, created_at, sent_at
        """

    /// An endpoint's deliveries, newest first.
    public func deliveries(of endpointID: String, status: DeliveryStatus?, limit: Int) async throws -> [Delivery] {
        try await pool.query("""
            SELECT \(unsafeRaw: Self.deliveryColumns) FROM webhook_deliveries
            WHERE endpoint_id = \(endpointID) AND (\(status == nil) OR status = \(status?.rawValue ?? ""))
            ORDER BY id DESC LIMIT \(limit)
            """).map(Self.delivery)
    }

    /// Sends a delivery again from its first attempt (a failed one, or a
    /// pending one at once); nil when the endpoint has no such delivery.
    public func retry(endpointID: String, deliveryID: Int64) async throws -> Delivery? {
        let rows = try await pool.query("""
            WITH retried AS (
                UPDATE webhook_deliveries
                SET status = 'pending', attempts = 0, next_attempt_at = now(), first_attempt_at = NULL,
                    claim_token = NULL, sent_at = NULL
                WHERE endpoint_id = \(endpointID) AND id = \(deliveryID)
                RETURNING *),
                 wake AS (SELECT pg_notify(\(ChangeRows.notificationChannel), '') FROM retried)
            SELECT \(unsafeRaw: Self.deliveryColumns) FROM retried, (SELECT count(*) FROM wake) AS w
            """)
        return try rows.first.map(Self.delivery)
    }

    static func delivery(_ row: PostgresRow) throws -> Delivery {
        Delivery(id: try row.decode(String.self, at: 0), changeId: try row.decode(String.self, at: 1),
                 subscriberId: try row.decode(String.self, at: 2), sequence: try row.decode(Int64.self, at: 3),
                 status: try row.decode(String.self, at: 4), attempts: try row.decode(Int.self, at: 5),
                 nextAttemptAt: try row.decode(Date?.self, at: 6), lastError: try row.decode(String?.self, at: 7),
                 createdAt: try row.decode(Date.self, at: 8), sentAt: try row.decode(Date?.self, at: 9))
    }

    static func randomHex(bytes: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }
}
