import Foundation
import Logging
import Postgres

/// Rewrites every subscriber key of version 1 (32 bytes of HKDF material)
/// as version 2, its two derived keys themselves (sql/0038), so loading a
/// subscriber derives nothing. Run when the database is prepared, while
/// `subscriber_key_conversion` says keys may be left.
///
/// Needs no lock and no pause: a key's row is replaced only if it still
/// holds the bytes read (`key = old`), and the new bytes seal, open and
/// digest exactly as the old ones did, so an instance that loaded either
/// form reads and writes the same; an erased key is simply gone. Keys an
/// older instance still makes in version 1 during a rolling start stay
/// readable in that form.
public enum SubscriberKeyConversion {
    /// Converts what is left; returns how many keys were rewritten.
    @discardableResult
    public static func run(conninfo: String, batch: Int = 2_000, logger: Logger) async throws -> Int {
        let connection = try await Connection.connect(to: conninfo, logger: logger)
        defer { connection.close() }
        guard try await !connection.query("SELECT 1 FROM subscriber_key_conversion").isEmpty else { return 0 }
        var after = "", converted = 0
        while true {
            let rows = try await connection.query("""
                SELECT subscriber_id, key FROM subscriber_keys
                WHERE subscriber_id > \(after) ORDER BY subscriber_id LIMIT \(batch)
                """).map { (id: try $0.decode(String.self, at: 0), key: try $0.decode(Data.self, at: 1)) }
            guard let last = rows.last else { break }
            after = last.id
            // Three parallel arrays: the ids, the bytes read and the bytes
            // to store (hex, as `decode(…, 'hex')` reads them).
            var ids: [String] = [], old: [String] = [], new: [String] = []
            for row in rows {
                guard row.key.count == SubscriberKey.derivedCount else { continue }
                ids.append(row.id)
                let separated = try SubscriberKey(rawValue: row.key).separated.rawValue
                old.append(InstallationSecret.hex(row.key, digits: 2 * row.key.count))
                new.append(InstallationSecret.hex(separated, digits: 2 * separated.count))
            }
            guard !ids.isEmpty else { continue }
            converted += try await connection.query("""
                UPDATE subscriber_keys k SET key = decode(c.new, 'hex')
                FROM (SELECT jsonb_array_elements_text(\(JSONArgument.strings(ids))::jsonb) AS subscriber_id,
                             jsonb_array_elements_text(\(JSONArgument.strings(old))::jsonb) AS old,
                             jsonb_array_elements_text(\(JSONArgument.strings(new))::jsonb) AS new) c
                WHERE k.subscriber_id = c.subscriber_id AND k.key = decode(c.old, 'hex')
                RETURNING 1
                """).count
        }
        try await connection.query("DELETE FROM subscriber_key_conversion")
        if converted > 0 { logger.notice("subscriber keys stored as their two keys", metadata: ["keys.converted": "\(converted)"]) }
        return converted
    }
}
