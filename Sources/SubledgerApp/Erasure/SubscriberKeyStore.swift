import Foundation
import Postgres
import Synchronization

/// The SQL of `installation_secrets` and `subscriber_keys` (sql/0025): the
/// installation's pseudonyms, each subscriber's key, made on its first use
/// and destroyed by erasure, and the pseudonym → subscriber id lookup that
/// projections use while the key exists. Keys and ids found are cached in
/// process; erasure drops the subscriber from the caches with `forget`
/// (docs/decisions/0004-erasure-by-crypto-shredding.md).
public final class SubscriberKeyStore: Sendable {
    /// The row of `installation_secrets` that names streams.
    static let pseudonymSecretName = "subscriber_pseudonyms"
    /// Past this many cached keys the cache starts over (a key is 32 bytes;
    /// the cost of a miss is one index probe).
    static let cacheLimit = 200_000

    public let pseudonyms: SubscriberPseudonyms
    private let pool: ConnectionPool
    private struct Cached {
        var keys: [String: SubscriberKey] = [:]
        var subscriberIDs: [String: String] = [:]
    }
    private let cache = Mutex(Cached())

    init(pool: ConnectionPool, pseudonyms: SubscriberPseudonyms) {
        self.pool = pool
        self.pseudonyms = pseudonyms
    }

    /// The store of a migrated database: reads the installation secret.
    public static func load(pool: ConnectionPool) async throws -> SubscriberKeyStore {
        let secret: Data? = try await pool.withConnection { connection in
            let rows = try await connection.query("SELECT secret FROM installation_secrets WHERE name = \(pseudonymSecretName)")
            return try rows.first?.decode(Data.self, at: 0)
        }
        guard let secret else { throw SubscriberKeyStoreError.missingSecret }
        return SubscriberKeyStore(pool: pool, pseudonyms: try SubscriberPseudonyms(secret: secret))
    }

    /// The pseudonym naming `subscriberID`'s stream (no lookup).
    public func pseudonym(for subscriberID: String) -> String { pseudonyms.pseudonym(for: subscriberID) }

    /// The subscriber's key if it has one (`nil`: never written, or erased).
    public func existingKey(for subscriberID: String) async throws -> SubscriberKey? {
        let pseudonym = pseudonym(for: subscriberID)
        if let key = cache.withLock({ $0.keys[pseudonym] }) { return key }
        let key = try await pool.withConnection { connection in try await Self.readKey(pseudonym: pseudonym, on: connection) }
        if let key { remember(key, pseudonym: pseudonym, subscriberID: subscriberID) }
        return key
    }

    /// The subscriber's key, made and stored if it has none. Two callers
    /// making the same subscriber's key at once both get the one stored
    /// first (`ON CONFLICT DO NOTHING`, then read).
    public func key(for subscriberID: String) async throws -> SubscriberKey {
        let pseudonym = pseudonym(for: subscriberID)
        if let key = cache.withLock({ $0.keys[pseudonym] }) { return key }
        let candidate = SubscriberKey.generate()
        let key = try await pool.withConnection { connection in
            try await connection.query(Self.insertQuery(pseudonym: pseudonym, subscriberID: subscriberID, key: candidate))
            return try await Self.readKey(pseudonym: pseudonym, on: connection)
        }
        // Present unless erased between the insert and the read.
        guard let key else { throw SubscriberKeyStoreError.destroyed }
        remember(key, pseudonym: pseudonym, subscriberID: subscriberID)
        return key
    }

    /// The insert of a new key, for a pipeline ahead of a first append: a
    /// key already stored wins and this one is dropped.
    public static func insertQuery(pseudonym: String, subscriberID: String, key: SubscriberKey) -> PostgresQuery {
        "INSERT INTO subscriber_keys (pseudonym, subscriber_id, key) VALUES (\(pseudonym), \(subscriberID), \(key.rawValue)) ON CONFLICT DO NOTHING"
    }

    /// The subscriber id a stream's pseudonym names while its key exists
    /// (`nil` after erasure: projections then write under the pseudonym).
    public func subscriberID(forPseudonym pseudonym: String) async throws -> String? {
        if let id = cache.withLock({ $0.subscriberIDs[pseudonym] }) { return id }
        let found: (String, SubscriberKey)? = try await pool.withConnection { connection in
            let rows = try await connection.query("SELECT subscriber_id, key FROM subscriber_keys WHERE pseudonym = \(pseudonym)")
            guard let row = rows.first else { return nil }
            return (try row.decode(String.self, at: 0), try SubscriberKey(rawValue: try row.decode(Data.self, at: 1)))
        }
        guard let (id, key) = found else { return nil }
        remember(key, pseudonym: pseudonym, subscriberID: id)
        return id
    }

    /// Deletes the subscriber's key on `connection` (the erasure's
    /// transaction); `true` when there was one. Call `forget` after commit.
    public static func destroyKey(pseudonym: String, on connection: Connection) async throws -> Bool {
        let rows = try await connection.query("DELETE FROM subscriber_keys WHERE pseudonym = \(pseudonym) RETURNING pseudonym")
        return !rows.isEmpty
    }

    /// Drops the subscriber from the in-process caches.
    public func forget(pseudonym: String) {
        cache.withLock { cached in
            cached.keys[pseudonym] = nil
            cached.subscriberIDs[pseudonym] = nil
        }
    }

    static func readKey(pseudonym: String, on connection: Connection) async throws -> SubscriberKey? {
        let rows = try await connection.query("SELECT key FROM subscriber_keys WHERE pseudonym = \(pseudonym)")
        guard let row = rows.first else { return nil }
        return try SubscriberKey(rawValue: try row.decode(Data.self, at: 0))
    }

    private func remember(_ key: SubscriberKey, pseudonym: String, subscriberID: String) {
        cache.withLock { cached in
            if cached.keys.count >= Self.cacheLimit { cached = Cached() }
            cached.keys[pseudonym] = key
            cached.subscriberIDs[pseudonym] = subscriberID
        }
    }
}

/// Why the key store cannot answer.
public enum SubscriberKeyStoreError: Error, CustomStringConvertible {
    /// `installation_secrets` has no pseudonym secret: sql/0025 not applied.
    case missingSecret
    /// The key was destroyed (erased) while it was being made.
    case destroyed

    public var description: String {
        switch self {
        case .missingSecret: "installation_secrets has no subscriber_pseudonyms row: apply the migrations (sql/0025)"
        case .destroyed: "the subscriber's key was destroyed (erased) while it was being made"
        }
    }
}
