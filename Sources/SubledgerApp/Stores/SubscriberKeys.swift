import Foundation
import EventStore
import Postgres
import Synchronization

/// The SQL of `subscriber_keys` (sql/0025): each subscriber's key, made by
/// the write path on its first write (`insertQuery`, in the commit's
/// pipeline) and destroyed by erasure, and the pseudonym → subscriber id
/// lookup projections use while the key exists
/// (docs/decisions/0004-erasure-by-crypto-shredding.md).
public enum SubscriberKeys {
    /// A subscriber as its stream's pseudonym resolves while its key exists.
    public struct Entry: Sendable {
        public var subscriberID: String
        public var key: SubscriberKey
    }

    /// The insert of a new key, for a pipeline ahead of a first append: a
    /// key already stored wins and this one is dropped (the append that
    /// sealed with it then fails its expected version and is decided again).
    public static func insertQuery(subscriberID: String, key: SubscriberKey) -> PostgresQuery {
        insertQuery([(subscriberID, key)])!
    }

    /// The inserts of a write's new keys as one statement (nil: none), each
    /// row as `insertQuery(subscriberID:key:)`'s. One statement rather than
    /// one a subscriber: an import batch makes about a hundred, each a
    /// statement of its own to parse, plan and answer. Rows go in pseudonym
    /// order, so two writers that make the same keys wait for each other
    /// in the same order.
    public static func insertQuery(_ keys: [(subscriberID: String, key: SubscriberKey)]) -> PostgresQuery? {
        guard !keys.isEmpty else { return nil }
        let rows = JSONArgument.objects(["p", "s", "k"], keys.map {
            [SubscriberPseudonyms.pseudonym(for: $0.subscriberID), $0.subscriberID, $0.key.rawValue.base64EncodedString()]
        }.sorted { $0[0] < $1[0] })
        return """
            INSERT INTO subscriber_keys (pseudonym, subscriber_id, key)
            SELECT e->>'p', e->>'s', decode(e->>'k', 'base64') FROM jsonb_array_elements(\(rows)::jsonb) e
            ON CONFLICT DO NOTHING
            """
    }

    /// The subscriber's key if it has one (`nil`: never written, or erased).
    public static func existingKey(for subscriberID: String, on connection: Connection) async throws -> SubscriberKey? {
        let rows = try await connection.query(
            "SELECT key FROM subscriber_keys WHERE pseudonym = \(SubscriberPseudonyms.pseudonym(for: subscriberID))")
        guard let row = rows.first else { return nil }
        return try SubscriberKey(rawValue: try row.decode(Data.self, at: 0))
    }

    /// The subscriber's key, made and stored if it has none (the one stored
    /// first wins). For appends outside the write path (tools, tests); the
    /// write path makes keys in its commit.
    public static func key(for subscriberID: String, on connection: Connection) async throws -> SubscriberKey {
        try await connection.query(insertQuery(subscriberID: subscriberID, key: SubscriberKey.generate()))
        guard let key = try await existingKey(for: subscriberID, on: connection) else { throw SealError.unreadable }
        return key
    }

    /// The subscribers the pseudonyms name whose keys exist (an erased
    /// subscriber's pseudonym is absent), their key rows locked
    /// (`FOR KEY SHARE`) until the caller's transaction ends, so an erasure
    /// waits for what the caller writes about them, then moves it.
    public static func entries(_ pseudonyms: some Collection<String>, on connection: Connection) async throws -> [String: Entry] {
        guard !pseudonyms.isEmpty else { return [:] }
        let rows = try await connection.query("""
            SELECT pseudonym, subscriber_id, key FROM subscriber_keys
            WHERE pseudonym = ANY (ARRAY(SELECT jsonb_array_elements_text(\(JSONArgument.strings(Array(pseudonyms)))::jsonb)))
            FOR KEY SHARE
            """)
        var entries: [String: Entry] = [:]
        entries.reserveCapacity(pseudonyms.count)
        for row in rows {
            entries[try row.decode(String.self, at: 0)] = Entry(subscriberID: try row.decode(String.self, at: 1),
                                                                key: try SubscriberKey(rawValue: try row.decode(Data.self, at: 2)))
        }
        return entries
    }

    /// Those of `subscriberIDs` whose key rows exist and no one else holds,
    /// their rows locked `FOR KEY SHARE` until the caller's transaction
    /// ends; a row an erasure holds is skipped, not waited for
    /// (`ChangeTimeSweeper.keyed` says why).
    static func holdKeysSkippingLocked(_ subscriberIDs: [String], on connection: Connection) async throws -> Set<String> {
        let rows = try await connection.query("""
            SELECT subscriber_id FROM subscriber_keys
            WHERE subscriber_id IN (SELECT jsonb_array_elements_text(\(JSONArgument.strings(subscriberIDs))::jsonb))
            FOR KEY SHARE SKIP LOCKED
            """)
        return Set(try rows.map { try $0.decode(String.self, at: 0) })
    }

    /// Whether the subscriber has a key; while it does, its row is locked
    /// (`FOR KEY SHARE`) until the caller's transaction ends, so an erasure
    /// waits for what the caller writes.
    static func holdKey(of subscriberID: String, on connection: Connection) async throws -> Bool {
        try await !connection.query(
            "SELECT 1 FROM subscriber_keys WHERE pseudonym = \(SubscriberPseudonyms.pseudonym(for: subscriberID)) FOR KEY SHARE").isEmpty
    }

    /// The erasure's first lock (`ErasureService`): the subscriber's key
    /// row `FOR UPDATE`, so every derived write that holds it `FOR KEY
    /// SHARE` finishes first and later ones find no key. The key's stored
    /// bytes, nil when there is none; the caller opens them once it knows
    /// the subscriber is there to erase.
    static func lockKeyForErasure(pseudonym: String, on connection: Connection) async throws -> Data? {
        try await connection.query("SELECT key FROM subscriber_keys WHERE pseudonym = \(pseudonym) FOR UPDATE")
            .first?.decode(Data.self, at: 0)
    }

    // The two statements of `streams` erasure needs, beside the key's
    // (the stream's own writes are `EventStore`'s).

    /// The version of the subscriber's stream (0: none), locked `FOR
    /// UPDATE` by the erasure: a write that read the stream before waits,
    /// then fails its expected version.
    static func lockStreamVersion(streamID: String, on connection: Connection) async throws -> Int64 {
        guard let number = try await connection.query("SELECT number FROM streams WHERE stream_id = \(streamID) FOR UPDATE")
            .first?.decode(Int64.self, at: 0) else { return 0 }
        // Its last event's version, in a statement after the lock: its
        // snapshot holds what a write it waited for committed.
        return try await connection.query("SELECT coalesce(max(stream_version), 0) FROM events WHERE stream_number = \(number)")
            .first?.decode(Int64.self, at: 0) ?? 0
    }

    /// The version of the subscriber's stream (0: none), unlocked: with no
    /// key, more than 0 means the subscriber was erased.
    static func streamVersion(of subscriberID: String, on connection: Connection) async throws -> Int64 {
        try await EventStore.streamVersion(SubscriberStreams.streamID(for: subscriberID), on: connection)
    }

    /// Deletes the subscriber's key on `connection` (the erasure's
    /// transaction); `true` when there was one.
    public static func destroyKey(pseudonym: String, on connection: Connection) async throws -> Bool {
        let rows = try await connection.query("DELETE FROM subscriber_keys WHERE pseudonym = \(pseudonym) RETURNING pseudonym")
        return !rows.isEmpty
    }
}

/// Every subscriber key, read for a rebuild that folds streams without I/O
/// (`StreamwiseConsumer.rows(for:)`): each load worker adds the keys its own
/// snapshot sees before it reads a stream, so every stream it reads finds
/// its key (a stream's first events and its key commit together). Keys are
/// only added while a rebuild loads: erasure, which deletes one, waits for
/// no rebuild to be loading (`SubscriberErasure`).
public final class SubscriberKeyring: Sendable {
    /// A key as stored: it is made from its bytes when a stream asks for it.
    /// Every worker loads every key and reads only its own range of the
    /// streams, so making each key at load made twice the keys a rebuild uses.
    private struct Stored: Sendable {
        var subscriberID: String
        var key: Data
    }

    private let entries = Mutex<[String: Stored]>([:])

    public init() {}

    /// Adds every key `connection`'s snapshot sees (a rebuild reads every stream anyway).
    public func load(on connection: Connection) async throws {
        // Binary: a key's bytes as they are, where the text form is hex to parse.
        let loaded = try await connection.query("SELECT pseudonym, subscriber_id, key FROM subscriber_keys",
                                                into: [String: Stored](), binaryResults: true) { loaded, row throws(PostgresError) in
            loaded[String(decoding: try row.bytes(at: 0), as: UTF8.self)] = Stored(
                subscriberID: String(decoding: try row.bytes(at: 1), as: UTF8.self), key: Data(try row.bytes(at: 2)))
        }
        entries.withLock { entries in
            if entries.isEmpty { entries = loaded } else { entries.merge(loaded) { _, new in new } }
        }
    }

    /// Drops what `load` read, once the rebuild is done.
    public func clear() { entries.withLock { $0 = [:] } }

    /// The subscriber and key of the stream named `pseudonym` (nil: no key,
    /// the subscriber was erased); throws when the stored key is not a key.
    public func entry(forPseudonym pseudonym: String) throws -> SubscriberKeys.Entry? {
        guard let stored = entries.withLock({ $0[pseudonym] }) else { return nil }
        return SubscriberKeys.Entry(subscriberID: stored.subscriberID, key: try SubscriberKey(rawValue: stored.key))
    }
}
