import EventStore
import Foundation
import Ledger
import Logging
import Postgres

/// Converts the streams written before erasure existed (`subscriber-<id>`,
/// personal fields and idempotency keys as sent) to what the service writes
/// now: the pseudonymous stream, a key per subscriber, personal fields
/// sealed and idempotency keys digested with it
/// (docs/decisions/0004-erasure-by-crypto-shredding.md, "Existing databases").
///
/// A one-time change of the log's format, made when the database is
/// prepared, before any instance serves: every starting instance takes the
/// conversion's lock and waits while another converts, so none reads a
/// database half converted. Positions, stream versions, event ids and commit
/// transaction ids stay, so consumer checkpoints stay valid; tables derived
/// from the log are keyed by subscriber id and stay as they are.
public enum PlainStreamConversion {
    /// A converted stream's id: the prefix, `ps-` and 32 hexadecimal digits.
    static let convertedPattern = "^subscriber-ps-[0-9a-f]{32}$"

    /// The next `batch` streams to convert. Its condition is the predicate
    /// of the partial index `streams_unconverted` (sql/0041), word for
    /// word, so it reads that index, normally empty, and not every stream.
    /// Planned at each run: a plan prepared for any parameters could not
    /// use the index (its predicate holds only for these values).
    static func pendingStreams(batch: Int) -> PostgresQuery {
        var query: PostgresQuery = """
            SELECT stream_id FROM streams
            WHERE starts_with(stream_id, \(SubscriberStreams.prefix)) AND stream_id !~ \(convertedPattern)
            ORDER BY stream_id LIMIT \(batch)
            """
        query.mayPrepare = false
        return query
    }

    /// Converts every plain subscriber stream, `batch` streams a
    /// transaction; returns how many.
    @discardableResult
    public static func run(conninfo: String, batch: Int = 200, logger: Logger) async throws -> Int {
        let connection = try await Connection.connect(to: conninfo)
        defer { connection.close() }
        try await connection.lock(.plainStreamConversion)
        do {
            var converted = 0
            while true {
                let streams = try await connection.query(pendingStreams(batch: batch)).map { try $0.decode(String.self, at: 0) }
                guard !streams.isEmpty else { break }
                try await connection.withTransaction { connection in
                    for streamID in streams { try await convert(streamID, on: connection) }
                }
                converted += streams.count
                logger.info("subscriber streams converted to pseudonyms", metadata: ["streams.converted": "\(converted)"])
            }
            try await connection.unlock(.plainStreamConversion)
            return converted
        } catch {
            // A broken connection ends its session and the lock with it.
            try? await connection.unlock(.plainStreamConversion)
            throw error
        }
    }

    /// One stream, on `connection` (in the caller's transaction).
    static func convert(_ streamID: String, on connection: Connection) async throws {
        let subscriberID = String(streamID.dropFirst(SubscriberStreams.prefix.count))
        let pseudonym = SubscriberPseudonyms.pseudonym(for: subscriberID)
        let converted = SubscriberStreams.prefix + pseudonym
        let key = try await SubscriberKeys.key(for: subscriberID, on: connection)
        var rows: [EventRewrite] = []
        let scope = subscriberID + "\u{1F}"
        let events = try await EventStore.readStream(streamID, on: connection)
        // The keys as written before erasure existed: the log keeps only
        // their digests since sql/0044, which kept these apart until now
        // (taken out here; the caller's transaction puts them back if the
        // conversion fails).
        let positions = PostgresJSON(text: "[" + events.map { String($0.position) }.joined(separator: ",") + "]")
        var storedKeys = [Int64: String]()
        for row in try await connection.query("""
            DELETE FROM unconverted_idempotency_keys
            WHERE position IN (SELECT p::bigint FROM jsonb_array_elements_text(\(positions)::jsonb) p)
            RETURNING position, stored_key
            """) {
            storedKeys[try row.decode(Int64.self, at: 0)] = try row.decode(String.self, at: 1)
        }
        for event in events {
            var (version, data) = (event.schemaVersion, event.data)
            // A type this build does not know has no personal fields it knows of: kept as stored.
            if let decoded = try? LedgerEvent.decodeFast(type: event.type, schemaVersion: event.schemaVersion, data: event.data),
               decoded.hasPersonalFields {
                (version, data) = try key.sealingPersonalFields(of: SubscriberStreams.namingCounterpartByPseudonym(decoded, in: subscriberID),
                                                                pseudonym: pseudonym).stored()
            }
            let ledgerKey = storedKeys[event.position].map { $0.hasPrefix(scope) ? String($0.dropFirst(scope.count)) : $0 }
            rows.append(EventRewrite(position: event.position, data: String(decoding: data, as: UTF8.self), schemaVersion: version,
                                     eventID: ledgerKey.map { EventStore.storedKey(SubscriberStreams.storeKey(key: key, ledgerKey: $0)) }))
        }
        try await EventStore.rewrite(rows, inStream: streamID, on: connection)
        // The events name their stream by number: renaming its row moves them all.
        try await connection.query("UPDATE streams SET stream_id = \(converted) WHERE stream_id = \(streamID)")
        try await connection.query("UPDATE consumer_parked_events SET stream_id = \(converted) WHERE stream_id = \(streamID)")
    }
}
