import EventStore
import Foundation
import Ledger
import Postgres

/// What a projection that applies events one at a time (the reminders)
/// needs of a subscriber: its ledger as of the last version it applied and
/// the events after it, up to the batch's last.
struct LedgerReplay: Sendable {
    var ledger: SubscriberLedger
    /// The stream version the projection had applied (0: none).
    var applied: Int64
    /// The projection's clock (the latest `recorded_at` it saw).
    var clock: Date
    /// Events after the ledger's version, through the batch's last, in order.
    var events: [(version: Int64, event: RecordedLedgerEvent)]
}

extension SubscriberSnapshots {
    /// For each subscriber with its batch's last stream version (`through`),
    /// in one statement: the progress recorded in `progressTable` (a table of
    /// subscriber_id, stream_version, clock), the latest stored snapshot not
    /// past that progress, and the events from there through `through`.
    /// Subscribers with nothing new (a replayed batch) are absent.
    /// `resolvingPseudonyms`: the ids given are streams' pseudonyms, resolved
    /// to subscribers through `subscriber_keys` in the same statement (an
    /// erased subscriber's is absent from the answer).
    static func replayQuery(_ through: [(subscriberID: String, through: Int64)], progressTable: String,
                            resolvingPseudonyms: Bool = false) throws -> PostgresQuery {
        struct Wanted: Encodable {
            var subscriber_id: String?
            var pseudonym: String
            var through: Int64
        }
        // Pseudonyms computed here rather than by the server for each row.
        let wanted = PostgresJSON(data: try JSONEncoder().encode(through.map {
            resolvingPseudonyms ? Wanted(subscriber_id: nil, pseudonym: $0.subscriberID, through: $0.through)
                : Wanted(subscriber_id: $0.subscriberID, pseudonym: SubscriberPseudonyms.pseudonym(for: $0.subscriberID), through: $0.through)
        }))
        return """
            WITH wanted AS (
                     SELECT x.subscriber_id, x.pseudonym, x.through, coalesce(p.stream_version, 0) AS applied, p.clock
                     FROM (SELECT \(unsafeRaw: resolvingPseudonyms ? "named" : "given").subscriber_id, given.pseudonym, given.through
                           FROM jsonb_to_recordset(\(wanted)::jsonb) AS given(subscriber_id text, pseudonym text, through bigint)
                           \(unsafeRaw: resolvingPseudonyms ? Self.resolvingJoin : "")) x
                     LEFT JOIN \(unsafeRaw: progressTable) p ON p.subscriber_id = x.subscriber_id
                     WHERE x.subscriber_id IS NOT NULL AND x.through > coalesce(p.stream_version, 0)),
                 snapshot AS (
                     SELECT s.subscriber_id, s.stream_version, s.ledger FROM subscriber_snapshots s JOIN wanted w USING (subscriber_id)
                     WHERE s.format = \(SubscriberLedger.snapshotFormat) AND s.stream_version <= w.applied)
            SELECT w.subscriber_id, w.applied, w.clock, coalesce(sn.stream_version, 0),
                   CASE WHEN row_number() OVER (PARTITION BY w.subscriber_id ORDER BY e.stream_version) = 1
                        THEN encode(sn.ledger, 'base64') END,
                   e.position, e.stream_version, e.type, e.schema_version, e.data::text, e.recorded_at, k.key
            FROM wanted w
            LEFT JOIN snapshot sn ON sn.subscriber_id = w.subscriber_id
            LEFT JOIN subscriber_keys k ON k.pseudonym = w.pseudonym
            LEFT JOIN streams st ON st.stream_id = \(SubscriberStreams.prefix) || w.pseudonym
            LEFT JOIN events e ON e.stream_number = st.number
                               AND e.stream_version > coalesce(sn.stream_version, 0) AND e.stream_version <= w.through
            ORDER BY w.subscriber_id, e.stream_version
            """
    }

    /// How `replayQuery` resolves pseudonyms: the key rows locked until the
    /// caller's transaction ends, as in `loadStatement`.
    private static let resolvingJoin = "JOIN subscriber_keys named ON named.pseudonym = given.pseudonym FOR KEY SHARE OF named"

    /// The replays of `replayQuery`'s rows. A snapshot that cannot be read
    /// is replaced by the whole stream, one extra statement per such subscriber.
    /// `throughByPseudonym`: `through` is keyed by the streams' pseudonyms
    /// (a `resolvingPseudonyms` query's).
    static func replays(_ rows: PostgresRows, through: [String: Int64], throughByPseudonym: Bool = false,
                        on connection: Connection) async throws -> [String: LedgerReplay] {
        var replays: [String: LedgerReplay] = [:]
        var unreadable: [String: (applied: Int64, clock: Date)] = [:]
        var keys: [String: (key: SubscriberKey?, pseudonym: String)] = [:]
        for row in rows {
            let subscriberID = try row.decode(String.self, at: 0)
            if replays[subscriberID] == nil && unreadable[subscriberID] == nil {
                keys[subscriberID] = (try row.decode(Data?.self, at: 11).map { try SubscriberKey(rawValue: $0) },
                                      SubscriberPseudonyms.pseudonym(for: subscriberID))
                let applied = try row.decode(Int64.self, at: 1)
                let clock = try row.decode(Date?.self, at: 2) ?? .distantPast
                var ledger = SubscriberLedger(subscriberID: subscriberID)
                if try row.decode(Int64.self, at: 3) > 0 {
                    guard let text = try row.decode(String?.self, at: 4),
                          let data = Data(base64Encoded: text, options: .ignoreUnknownCharacters),
                          let stored = try? SubscriberLedger(snapshot: data), stored.subscriberID == subscriberID else {
                        unreadable[subscriberID] = (applied, clock)
                        continue
                    }
                    ledger = stored
                }
                replays[subscriberID] = LedgerReplay(ledger: ledger, applied: applied, clock: clock, events: [])
            }
            guard replays[subscriberID] != nil, let version = try row.decode(Int64?.self, at: 6) else { continue }
            let key = keys[subscriberID]!
            replays[subscriberID]!.events.append((version, try SubscriberStreams.opened(try recorded(row, from: 5), key: key.key,
                                                                                         pseudonym: key.pseudonym)))
        }
        for (subscriberID, progress) in unreadable {
            let key = keys[subscriberID]!
            let rows = try await connection.query(Self.streamEvents(SubscriberStreams.streamID(for: subscriberID),
                                                                    through: through[throughByPseudonym ? key.pseudonym : subscriberID] ?? 0))
            replays[subscriberID] = LedgerReplay(
                ledger: SubscriberLedger(subscriberID: subscriberID), applied: progress.applied, clock: progress.clock,
                events: try rows.map {
                    (try $0.decode(Int64.self, at: 1), try SubscriberStreams.opened(try recorded($0, from: 0), key: key.key, pseudonym: key.pseudonym))
                })
        }
        return replays
    }

    /// A stream's events in version order (through `through` when given),
    /// in the columns `recorded(_:from: 0)` reads.
    static func streamEvents(_ streamID: String, through: Int64? = nil) -> PostgresQuery {
        """
        SELECT e.position, e.stream_version, e.type, e.schema_version, e.data::text, e.recorded_at
        FROM \(unsafeRaw: EventStore.eventsWithStreams)
        WHERE s.stream_id = \(streamID) AND (\(through)::bigint IS NULL OR e.stream_version <= \(through))
        ORDER BY e.stream_version
        """
    }

    /// The event in columns position, stream_version, type, schema_version,
    /// data, recorded_at from `column` on (every read of a ledger's events).
    static func recorded(_ row: PostgresRow, from column: Int) throws -> RecordedLedgerEvent {
        let base = column + 1
        let event = try LedgerEvent.decodeFast(type: try row.decode(String.self, at: base + 1),
                                               schemaVersion: try row.decode(Int.self, at: base + 2),
                                               data: Data(try row.decode(String.self, at: base + 3).utf8))
        return RecordedLedgerEvent(position: try row.decode(Int64.self, at: column), recordedAt: try row.decode(Date.self, at: base + 4),
                                   event: event)
    }
}
