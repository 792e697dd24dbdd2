import Crypto
import Foundation
import Ledger
import Postgres

/// Webhook endpoints (`sql/0022_change_feed.sql`): the routes of
/// `/v1/webhooks`, the reminder webhook's row (`ReminderWebhook`), the
/// sealed secrets and the database's sealing key (`WebhookSecretSealing`).
/// Their deliveries are `WebhookDeliveryStore`'s.
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
        try await Self.delete(id, pool: pool)
    }

    /// Removes the endpoint and its deliveries (`ON DELETE CASCADE`); false
    /// when there was none.
    @discardableResult
    static func delete(_ id: String, pool: ConnectionPool) async throws -> Bool {
        try await !pool.query("DELETE FROM webhook_endpoints WHERE id = \(id) RETURNING id").isEmpty
    }

    /// An endpoint's deliveries, newest first (`WebhookDeliveryStore`).
    public func deliveries(of endpointID: String, status: DeliveryStatus?, limit: Int) async throws -> [Delivery] {
        try await WebhookDeliveryStore.list(of: endpointID, status: status, limit: limit, pool: pool)
    }

    /// Sends a delivery again from its first attempt (a failed one, or a
    /// pending one at once); nil when the endpoint has no such delivery.
    public func retry(endpointID: String, deliveryID: Int64) async throws -> Delivery? {
        try await WebhookDeliveryStore.retry(endpointID: endpointID, deliveryID: deliveryID, pool: pool)
    }

    static func randomHex(bytes: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }
}

/// The rows written by configuration rather than through the routes: the
/// reminder webhook's endpoint and the secrets' sealing.
extension WebhookStore {
    /// Writes the reminder webhook's endpoint (`ReminderWebhook.register`)
    /// as configured: its URL, its secret sealed (nil: unsigned), subscribed
    /// to `types`; a secret rotated by an earlier configuration is forgotten.
    static func saveReminderEndpoint(id: String, url: String, sealedSecret: String?, types: [String], maximumAttempts: Int,
                                     pool: ConnectionPool) async throws {
        let typesJSON = PostgresJSON(data: try JSONEncoder().encode(types))
        try await pool.query("""
            INSERT INTO webhook_endpoints (id, url, secret, types, description, max_attempts)
            VALUES (\(id), \(url), \(sealedSecret),
                    ARRAY(SELECT jsonb_array_elements_text(\(typesJSON)::jsonb)), 'SUBLEDGER_WEBHOOK_URL: reminders',
                    \(maximumAttempts))
            ON CONFLICT (id) DO UPDATE SET url = excluded.url, secret = excluded.secret, types = excluded.types,
                description = excluded.description, max_attempts = excluded.max_attempts,
                previous_secret = NULL, previous_secret_expires_at = NULL
            """)
    }

    /// Stores `key` as the database's sealing key (`webhook_sealing_keys`)
    /// unless one is stored already: the first stored wins.
    static func insertSealingKey(_ key: Data, on connection: Connection) async throws {
        try await connection.query("INSERT INTO webhook_sealing_keys (id, key) VALUES (1, \(key)) ON CONFLICT (id) DO NOTHING")
    }

    /// The database's sealing key, nil when none is stored.
    static func sealingKey(on connection: Connection) async throws -> Data? {
        try await connection.query("SELECT key FROM webhook_sealing_keys WHERE id = 1").first?.decode(Data.self, at: 0)
    }

    /// Every endpoint with a stored secret: its id, secret and previous
    /// secret as stored, the rows locked (`FOR UPDATE`) until the caller's
    /// transaction ends, so they are sealed again without a race.
    static func lockStoredSecrets(on connection: Connection) async throws -> [(id: String, secret: String?, previousSecret: String?)] {
        try await connection.query("""
            SELECT id, secret, previous_secret FROM webhook_endpoints
            WHERE secret IS NOT NULL OR previous_secret IS NOT NULL FOR UPDATE
            """).map { row in
            (try row.decode(String.self, at: 0), try row.decode(String?.self, at: 1), try row.decode(String?.self, at: 2))
        }
    }

    /// Replaces an endpoint's stored secret and previous secret.
    static func updateSecrets(of id: String, secret: String?, previousSecret: String?, on connection: Connection) async throws {
        try await connection.query("""
            UPDATE webhook_endpoints SET secret = \(secret), previous_secret = \(previousSecret) WHERE id = \(id)
            """)
    }
}
