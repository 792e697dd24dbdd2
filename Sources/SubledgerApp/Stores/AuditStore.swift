import Foundation
import EventStore
import JSON
import Postgres

/// The SQL of `audit_entries` (sql/0023): batched inserts, the keyset
/// listing of `GET /v1/audit`, and pruning past the retention.
public struct AuditStore: Sendable {
    let pool: ConnectionPool

    /// Writes what `trail` holds (a read of the audit includes what this instance recorded up to now).
    public func flush(_ trail: AuditTrail) async throws { try await trail.flush(to: pool) }

    public init(pool: ConnectionPool) {
        self.pool = pool
    }

    /// A stored entry with its position (the listing's cursor); its fields
    /// read as the entry's (`row.at`, `row.subscriberID`).
    @dynamicMemberLookup
    public struct Row: Sendable, Encodable {
        public var position: Int64
        public var entry: AuditTrail.Entry

        public subscript<Value>(dynamicMember field: KeyPath<AuditTrail.Entry, Value>) -> Value { entry[keyPath: field] }

        enum CodingKeys: String, CodingKey {
            case position, at, role, keyFingerprint, actor, method, path, subscriberID = "subscriberId", action, status
        }

        /// Every member, absent values as `null`.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(position, forKey: .position)
            try container.encode(entry.at, forKey: .at)
            try container.encode(entry.role, forKey: .role)
            try container.encode(entry.keyFingerprint, forKey: .keyFingerprint)
            try container.encode(entry.actor, forKey: .actor)
            try container.encode(entry.method, forKey: .method)
            try container.encode(entry.path, forKey: .path)
            try container.encode(entry.subscriberID, forKey: .subscriberID)
            try container.encode(entry.action, forKey: .action)
            try container.encode(entry.status, forKey: .status)
        }
    }

    /// Inserts a batch with one `COPY` in binary form: the server reads
    /// each value as it is stored (no JSON to parse, no casts), which is the
    /// cheapest way to keep pace with every audited read.
    ///
    /// An entry names an erased subscriber (a stream without a key) by its
    /// pseudonym. The batch first takes the lock its `COPY` takes anyway
    /// (`ROW EXCLUSIVE` on `audit_entries`), then looks for erased
    /// subscribers: an erasure locks the table against it (`SHARE ROW
    /// EXCLUSIVE`), so a batch either commits before the erasure moves its
    /// entries, or looks after the erasure committed. Row locks on every
    /// audited subscriber's key, the first way this was written, halved the
    /// rate of GET state in the bench.
    func insert(_ entries: [AuditTrail.Entry]) async throws {
        guard !entries.isEmpty else { return }
        let named = Set(entries.compactMap(\.subscriberID))
        try await pool.withTransaction { connection in
            try await connection.query("LOCK TABLE audit_entries IN ROW EXCLUSIVE MODE")
            var erased = Set<String>()
            if !named.isEmpty {
                let stored = named.map(Self.storable)
                let rows = try await connection.query("""
                    SELECT x.id FROM ROWS FROM (jsonb_array_elements_text(\(JSONArgument.strings(stored))::jsonb),
                                               jsonb_array_elements_text(\(JSONArgument.strings(stored.map(SubscriberStreams.streamID(for:))))::jsonb))
                                     AS x(id, stream)
                    WHERE NOT EXISTS (SELECT 1 FROM subscriber_keys k WHERE k.subscriber_id = x.id)
                      AND EXISTS (SELECT 1 FROM streams s WHERE s.stream_id = x.stream)
                    """)
                for row in rows { erased.insert(try row.decode(String.self, at: 0)) }
            }
            try await connection.copy(unsafeSQL: """
                COPY audit_entries (at, role, key_fingerprint, actor, method, path, subscriber_id, action, status)
                FROM STDIN WITH (FORMAT binary)
                """, rows: Self.rows(entries, erased: erased))
        }
    }

    /// The COPY rows of `entries`; a subscriber in `erased` by its pseudonym.
    static func rows(_ entries: [AuditTrail.Entry], erased: Set<String>) -> CopyBinaryRows {
        var rows = CopyBinaryRows(reservingCapacity: entries.count * 160)
        for entry in entries {
            rows.beginRow(fields: 9)
            rows.append(unixMilliseconds: RFC3339.milliseconds(of: entry.at))
            rows.append(Self.storable(entry.role))
            rows.append(Self.storable(entry.keyFingerprint))
            rows.append(entry.actor.map(Self.storable))
            rows.append(Self.storable(entry.method))
            rows.append(Self.storable(entry.path))
            rows.append(entry.subscriberID.map { id in
                let stored = Self.storable(id)
                return erased.contains(stored) ? SubscriberPseudonyms.pseudonym(for: stored) : stored
            })
            rows.append(Self.storable(entry.action))
            rows.append(integer: Int32(clamping: entry.status))
        }
        return rows
    }

    /// A value `text` can hold: PostgreSQL refuses U+0000, which a refused
    /// request's percent-decoded subscriber id may contain. One such entry
    /// must not stop its batch (it would be retried for ever).
    static func storable(_ text: String) -> String {
        text.utf8.contains(0) ? text.replacingOccurrences(of: "\u{0}", with: "\u{FFFD}") : text
    }

    /// Entries after position `after`, oldest first, of one subscriber or
    /// of all; at most `limit`, and whether more follow.
    public func list(subscriberID: String?, after: Int64, limit: Int) async throws -> (rows: [Row], more: Bool) {
        let rows = try await pool.query("""
            SELECT position, at, role, key_fingerprint, actor, method, path, subscriber_id, action, status
            FROM audit_entries
            WHERE position > \(after)
              AND (\(subscriberID)::text IS NULL OR subscriber_id IN (\(subscriberID)::text, \(subscriberID.map(SubscriberPseudonyms.pseudonym(for:)))::text))
            ORDER BY position LIMIT \(limit + 1)
            """)
        let decoded = try rows.map { row in
            Row(position: try row.decode(Int64.self, at: 0), entry: AuditTrail.Entry(
                at: try row.decode(Date.self, at: 1), role: try row.decode(String.self, at: 2),
                keyFingerprint: try row.decode(String.self, at: 3), actor: try row.decode(String?.self, at: 4),
                method: try row.decode(String.self, at: 5), path: try row.decode(String.self, at: 6),
                subscriberID: try row.decode(String?.self, at: 7), action: try row.decode(String.self, at: 8),
                status: try row.decode(Int.self, at: 9)))
        }
        return (Array(decoded.prefix(limit)), decoded.count > limit)
    }

    /// Deletes entries older than `cutoff`, `chunk` at a time, while holding
    /// a transaction-scoped advisory lock: with several instances, one prunes
    /// and the others skip the round. Returns how many it deleted, nil when
    /// another instance held the lock.
    public func prune(olderThan cutoff: Date, chunk: Int = 10_000) async throws -> Int? {
        var total = 0
        while true {
            let deleted: Int? = try await pool.withTransaction { connection in
                guard try await connection.tryLockForTransaction(.auditPrune) else { return nil }
                let rows = try await connection.query("""
                    WITH doomed AS (
                        SELECT position FROM audit_entries WHERE at < \(cutoff) ORDER BY at LIMIT \(chunk)
                    )
                    DELETE FROM audit_entries a USING doomed d WHERE a.position = d.position RETURNING 1
                    """)
                return rows.count
            }
            guard let deleted else { return total == 0 ? nil : total }
            total += deleted
            if deleted < chunk { return total }
        }
    }
}
