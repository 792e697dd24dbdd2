import EventStore
import Foundation
import Ledger
import Postgres

/// A subscriber's ledger as loaded: a snapshot and the events after it.
struct LoadedLedger: Sendable {
    var ledger: SubscriberLedger
    /// The stream version folded into it (0: the subscriber has no events).
    var version: Int64
    /// The version of the stored snapshot it started from (0: none).
    var snapshotVersion: Int64
    /// The current state as cached (`SubscriberStateCache`), when the load
    /// asked for it and it still held; the ledger is not read then.
    var cachedState: SubscriberState? = nil
    /// Read again because its stream is shorter than the ledger held in
    /// memory: replaces that ledger, though its version is lower.
    var supersedesHeld = false
    /// The subscriber's key (`SubscriberKeys`); nil for a subscriber not
    /// yet written, or erased.
    var key: SubscriberKey? = nil
    /// Erased while streams were named under an earlier scheme, whose name
    /// for the id still has a stream (`StreamNaming.markErasedUnderEarlierNames`).
    var erasedUnderEarlierName = false

    var subscriberID: String { ledger.subscriberID }
    var exists: Bool { version > 0 }
    /// A stream without a key: its subscriber was erased (every stream
    /// written gets its key in the commit of its first events).
    var isErased: Bool { (exists && key == nil) || erasedUnderEarlierName }
    /// Whether enough events followed the stored snapshot to store a new one.
    /// Never for an erased subscriber: a snapshot is keyed by the id.
    var isSnapshotDue: Bool { !isErased && SubscriberSnapshots.isDue(version: version, snapshotVersion: snapshotVersion) }

    static func empty(_ subscriberID: String) -> LoadedLedger {
        LoadedLedger(ledger: SubscriberLedger(subscriberID: subscriberID), version: 0, snapshotVersion: 0)
    }
}

/// Subscribers' ledgers from their snapshots (`sql/0008_snapshots.sql`) and
/// the tails of their streams.
enum SubscriberSnapshots {
    /// Events after a snapshot before a new one is stored: at least this
    /// many, so the cost of encoding and writing one is spread over them.
    static let interval: Int64 = 64

    /// Whether a ledger at `version` whose snapshot folds `snapshotVersion`
    /// events is due a new one: once the tail reaches `interval` events or an
    /// eighth of the snapshot, whichever is more. A snapshot costs what the
    /// whole ledger does, so at a fixed interval a long history paid more per
    /// event the longer it got (a megabyte every 64 writes at 10,000
    /// renewals, and the writes beside those saves set the p99); in
    /// proportion, each event pays for about eight events' worth of
    /// snapshot, whatever the length. A cold read's tail is at most an eighth
    /// of the snapshot it decodes anyway.
    static func isDue(version: Int64, snapshotVersion: Int64) -> Bool {
        version - snapshotVersion >= max(interval, snapshotVersion / 8)
    }

    /// The ledgers of `subscriberIDs`, in one statement: each stored snapshot
    /// (sent once) with the events after it, read in one MVCC snapshot so the
    /// tail starts exactly where the stored ledger ends. A snapshot that
    /// cannot be read is ignored and the whole stream is read instead.
    static func load(_ subscriberIDs: [String], on connection: Connection) async throws -> [String: LoadedLedger] {
        try await load(subscriberIDs, unlessCached: nil, on: connection)
    }

    /// The cached current state a load may return instead of the ledger:
    /// valid at `now` for `catalog` and the stream's current version.
    struct CacheProbe {
        var now: Date
        var catalog: Catalog
    }

    /// As `load(_:on:)`; with a probe, a subscriber whose cached state still
    /// holds comes back with `cachedState` and without the ledger, so a read
    /// costs one statement whether the cache holds or not. With a ledger
    /// cache, a ledger it holds is read on from its version (see
    /// `LedgerCache.Use` for what `use` does); keeping what was read is the
    /// caller's (after any snapshot it stores).
    static func load(_ subscriberIDs: [String], unlessCached probe: CacheProbe?, cache: LedgerCache? = nil,
                     use: LedgerCache.Use = .share, on connection: Connection) async throws -> [String: LoadedLedger] {
        guard !subscriberIDs.isEmpty else { return [:] }
        var held = cache?.ledgers(subscriberIDs, use: use) ?? [:]
        let loaded = try await ledgers(from: try await connection.query(loadStatement(subscriberIDs, unlessCached: probe, held: held)),
                                       unlessCached: probe, held: &held, on: connection)
        return loaded
    }

    /// The statement of `load(_:unlessCached:on:)`, to pipeline with others;
    /// its rows go to `ledgers(from:unlessCached:held:on:)`.
    /// `held`: ledgers already in memory; only the events after their
    /// versions are read for them (and the stream's version, to tell a
    /// stream shorter than the ledger).
    /// `resolvingPseudonyms`: the ids given are streams' pseudonyms,
    /// resolved to subscribers through `subscriber_keys` (an erased
    /// subscriber's is absent from the answer). The key rows found are
    /// locked (`FOR KEY SHARE`) until the caller's transaction ends: an
    /// erasure, which locks its key row first, waits for a projection's batch
    /// that read the subscriber, then moves the rows it wrote.
    static func loadStatement(_ subscriberIDs: [String], unlessCached probe: CacheProbe?,
                              held: [String: LoadedLedger] = [:], resolvingPseudonyms: Bool = false) -> PostgresQuery {
        let known = PostgresJSON(text: "{" + held.map { JSONArgument.string($0.key) + ":" + String($0.value.version) }
            .joined(separator: ",") + "}")
        // Distinct here rather than in SQL: a sort and a unique node fewer
        // for PostgreSQL to start on every run.
        var seen = Set<String>()
        let distinct = subscriberIDs.filter { seen.insert($0).inserted }
        // Streams are named by pseudonyms, computed here rather than by the
        // server for each row (a SQL function call that is not inlined).
        let pseudonyms = resolvingPseudonyms ? distinct : distinct.map(SubscriberPseudonyms.pseudonym(for:))
        // The lookups are LATERAL (kept from being flattened by OFFSET 0) so
        // they are index probes per subscriber whatever the planner's
        // statistics say: as plain joins, an `events` table filled since its
        // last ANALYZE got a sequential scan of every event on every write.
        // The snapshot is sent once, on a subscriber's first row: the one
        // without events after it, or the event right after it (a stream's
        // versions have no gaps). No window function and no DISTINCT:
        // starting this plan is a large part of running it (starting plans,
        // mostly this one's, was a quarter of PostgreSQL's CPU in a profile
        // of the bench's reads), and without them the statement runs about a
        // sixth faster (pgbench, two clients, three subscribers a run: 30.7k
        // runs/s against 26.4k).
        return """
            WITH given AS (SELECT * FROM ROWS FROM (jsonb_array_elements_text(\(JSONArgument.strings(resolvingPseudonyms ? [] : distinct))::jsonb),
                                                    jsonb_array_elements_text(\(JSONArgument.strings(pseudonyms))::jsonb))
                                 AS x(subscriber_id, pseudonym)),
                 ids AS (\(unsafeRaw: resolvingPseudonyms ? Self.resolvedIDs : Self.givenIDs)),
                 wanted AS (SELECT ids.subscriber_id, ids.pseudonym, coalesce((\(known)::jsonb ->> ids.subscriber_id)::bigint, 0) AS known FROM ids)
            SELECT w.subscriber_id, coalesce(sn.stream_version, 0),
                   CASE WHEN e.stream_version IS NULL OR e.stream_version = coalesce(sn.stream_version, 0) + 1
                        THEN encode(sn.ledger, 'base64') END,
                   e.position, e.stream_version, e.type, e.schema_version, e.data::text, e.recorded_at, c.state,
                   st.version, k.key
            FROM wanted w
            LEFT JOIN LATERAL (SELECT keys.key FROM subscriber_keys keys
                               WHERE keys.pseudonym = w.pseudonym OFFSET 0) k ON true
            LEFT JOIN LATERAL (SELECT streams.number,
                                      coalesce((SELECT max(v.stream_version) FROM events v WHERE v.stream_number = streams.number), 0)
                                          AS version
                               FROM streams
                               WHERE streams.stream_id = \(SubscriberStreams.prefix) || w.pseudonym
                               OFFSET 0) st ON true
            LEFT JOIN LATERAL (SELECT cache.state FROM subscriber_state_cache cache
                               WHERE \(probe != nil) AND cache.subscriber_id = w.subscriber_id
                                 AND cache.stream_version = st.version
                                 AND cache.catalog = \(probe?.catalog.fingerprint)
                                 AND cache.valid_from <= \(probe?.now)::timestamptz
                                 AND (cache.valid_until IS NULL OR \(probe?.now)::timestamptz < cache.valid_until)
                               OFFSET 0) c ON true
            LEFT JOIN LATERAL (SELECT s.stream_version, s.ledger FROM subscriber_snapshots s
                               WHERE c.state IS NULL AND w.known = 0 AND s.subscriber_id = w.subscriber_id
                                 AND s.format = \(SubscriberLedger.snapshotFormat)
                               OFFSET 0) sn ON true
            LEFT JOIN LATERAL (SELECT ev.position, ev.stream_version, ev.type, ev.schema_version, ev.data, ev.recorded_at
                               FROM events ev
                               WHERE c.state IS NULL AND ev.stream_number = st.number
                                 AND ev.stream_version > greatest(coalesce(sn.stream_version, 0), w.known)
                               ORDER BY ev.stream_version OFFSET 0) e ON true
            ORDER BY w.subscriber_id, e.stream_version
            """
    }

    /// The subscribers of `loadStatement`: as given, or resolved from their
    /// streams' pseudonyms with the key rows locked.
    private static let givenIDs = "SELECT subscriber_id, pseudonym FROM given"
    private static let resolvedIDs = """
        SELECT k.subscriber_id, k.pseudonym FROM subscriber_keys k JOIN given g ON k.pseudonym = g.pseudonym FOR KEY SHARE OF k
        """

    /// The ledgers in the rows of `loadStatement` (given the same `held`); a
    /// subscriber whose snapshot or cached state cannot be read, or whose
    /// stream is shorter than the ledger held, is read again from its events.
    /// A ledger used from `held` is taken out of it, so applying its tail
    /// changes it in place instead of copying it.
    static func ledgers(from rows: PostgresRows, unlessCached probe: CacheProbe?, held: inout [String: LoadedLedger],
                        on connection: Connection) async throws -> [String: LoadedLedger] {
        var loaded = [String: LoadedLedger]()
        var unreadable = [String]()
        var shorter = Set<String>()
        // The rows come subscriber by subscriber: the one being read is kept
        // here and stored when the next one starts, so a row costs a string
        // comparison, not lookups by subscriber id.
        var currentID: String?
        var current: LoadedLedger?
        var currentKey: SubscriberKey?
        var currentPseudonym = ""
        func store() {
            if let current, let currentID { loaded[currentID] = current }
            current = nil
        }
        for row in rows {
            let subscriberID = try row.decode(String.self, at: 0)
            if subscriberID != currentID {
                store()
                currentID = subscriberID
                current = loaded.removeValue(forKey: subscriberID)
                currentKey = try row.decode(Data?.self, at: 11).map { try SubscriberKey(rawValue: $0) }
                currentPseudonym = SubscriberPseudonyms.pseudonym(for: subscriberID)
            }
            if current == nil, let probe, let text = try row.decode(String?.self, at: 9) {
                // A cached state that cannot be read is as good as none: read the ledger.
                guard let state = SubscriberStateCache.decode(text, at: probe.now) else {
                    unreadable.append(subscriberID)
                    continue
                }
                var cached = LoadedLedger.empty(subscriberID)
                cached.cachedState = state
                cached.key = currentKey
                current = cached
                continue
            }
            if current == nil, let start = held.removeValue(forKey: subscriberID) {
                guard try row.decode(Int64?.self, at: 10) ?? 0 >= start.version else {
                    shorter.insert(subscriberID)
                    unreadable.append(subscriberID)
                    continue
                }
                current = start
                current!.key = currentKey
            }
            if current == nil {
                let snapshotVersion = try row.decode(Int64.self, at: 1)
                var start = LoadedLedger.empty(subscriberID)
                if snapshotVersion > 0 {
                    // Base64 (PostgreSQL breaks its lines) is smaller than bytea's hex and quicker to read.
                    guard let text = try row.decode(String?.self, at: 2),
                          let data = Data(base64Encoded: text, options: .ignoreUnknownCharacters),
                          let ledger = try? SubscriberLedger(snapshot: data),
                          ledger.subscriberID == subscriberID else {
                        unreadable.append(subscriberID)
                        continue
                    }
                    start = LoadedLedger(ledger: ledger, version: snapshotVersion, snapshotVersion: snapshotVersion)
                }
                start.key = currentKey
                current = start
            }
            guard let version = try row.decode(Int64?.self, at: 4), current != nil else { continue }
            current!.ledger.apply(try SubscriberStreams.opened(try recorded(row, from: 3), key: currentKey, pseudonym: currentPseudonym))
            current!.version = version
        }
        store()
        for subscriberID in Set(unreadable) {
            loaded[subscriberID] = try await loadWithoutSnapshot(subscriberID, on: connection)
            loaded[subscriberID]!.supersedesHeld = shorter.contains(subscriberID)
        }
        try await StreamNaming.markErasedUnderEarlierNames(&loaded, on: connection)
        return loaded
    }

    /// The ledgers of the subscribers whose streams' pseudonyms are given
    /// (a projection's batch), by subscriber id, in one statement; an
    /// erased subscriber's is absent.
    static func load(pseudonyms: [String], on connection: Connection) async throws -> [String: LoadedLedger] {
        guard !pseudonyms.isEmpty else { return [:] }
        var held: [String: LoadedLedger] = [:]
        return try await ledgers(from: try await connection.query(loadStatement(pseudonyms, unlessCached: nil, resolvingPseudonyms: true)),
                                 unlessCached: nil, held: &held, on: connection)
    }

    /// One subscriber's ledger (an empty one when it has no events).
    static func load(_ subscriberID: String, cache: LedgerCache? = nil, use: LedgerCache.Use = .share,
                     on connection: Connection) async throws -> LoadedLedger {
        try await load([subscriberID], unlessCached: nil, cache: cache, use: use, on: connection)[subscriberID] ?? .empty(subscriberID)
    }

    private static func loadWithoutSnapshot(_ subscriberID: String, on connection: Connection) async throws -> LoadedLedger {
        let pseudonym = SubscriberPseudonyms.pseudonym(for: subscriberID)
        let read = try await connection.pipeline([
            Self.streamEvents(SubscriberStreams.prefix + pseudonym),
            "SELECT key FROM subscriber_keys WHERE pseudonym = \(pseudonym)",
        ])
        var loaded = LoadedLedger.empty(subscriberID)
        loaded.key = try read[1].first.map { try SubscriberKey(rawValue: try $0.decode(Data.self, at: 0)) }
        for row in read[0] {
            loaded.ledger.apply(try SubscriberStreams.opened(try recorded(row, from: 0), key: loaded.key, pseudonym: pseudonym))
            loaded.version = try row.decode(Int64.self, at: 1)
        }
        return loaded
    }

    /// The statement storing `ledgers` as snapshots (one multi-row upsert); a
    /// stored snapshot is never replaced by an earlier one (one of the same
    /// version is: it was unreadable). nil when there is none.
    /// `withoutFlushWait`: the statement's own transaction commits without
    /// waiting for the WAL flush (`synchronous_commit` off for it alone) — for
    /// a save on its own, after the events it folds have committed: a lost
    /// snapshot is only read around, never ahead of what committed.
    static func saveStatement(_ ledgers: [LoadedLedger], withoutFlushWait: Bool = false) -> PostgresQuery? {
        // Each snapshot is a bytea parameter of its own, not base64 inside a
        // JSON document: a long history's snapshot is a megabyte, and
        // encoding it as a JSON string and parsing that back as jsonb cost
        // more than the rest of the save.
        let saved = ledgers.filter(\.exists)
        guard !saved.isEmpty else { return nil }
        var binds: [String?] = [withoutFlushWait.postgresText, String(SubscriberLedger.snapshotFormat)]
        var rows: [String] = []
        for ledger in saved {
            let first = binds.count + 1
            rows.append("($\(first)::text, $\(first + 1)::bigint, $\(first + 2)::bytea)")
            binds += [ledger.subscriberID, String(ledger.version), ledger.ledger.snapshotData().postgresText]
        }
        // Only subscribers that have their keys, held until commit: an
        // erasure (which locks the key row first) waits for this save, then
        // deletes what it wrote; a save after it stores nothing.
        return PostgresQuery(unsafeSQL: """
            WITH x(subscriber_id, stream_version, ledger) AS (VALUES \(rows.joined(separator: ", "))),
                 keyed AS (SELECT k.subscriber_id FROM subscriber_keys k JOIN x USING (subscriber_id) FOR KEY SHARE OF k)
            INSERT INTO subscriber_snapshots AS s (subscriber_id, stream_version, format, ledger)
            SELECT x.subscriber_id, x.stream_version, $2::integer, x.ledger
            FROM x JOIN keyed USING (subscriber_id),
                 (SELECT set_config('synchronous_commit',
                                    CASE WHEN $1::boolean THEN 'off' ELSE current_setting('synchronous_commit') END, true)) AS commit_mode
            ON CONFLICT (subscriber_id) DO UPDATE
            SET stream_version = EXCLUDED.stream_version, format = EXCLUDED.format, ledger = EXCLUDED.ledger, updated_at = now()
            WHERE s.stream_version <= EXCLUDED.stream_version OR s.format <> EXCLUDED.format
            """, binds: binds)
    }

    /// Stores snapshots in a statement of their own, outside any transaction.
    static func save(_ ledgers: [LoadedLedger], on connection: Connection) async throws {
        if let statement = saveStatement(ledgers, withoutFlushWait: true) { try await connection.query(statement) }
    }
}

extension SubscriberSnapshots {
    /// Erasure: a snapshot holds the folded ledger, personal fields opened;
    /// it is a cache, so it goes.
    static let erasureStep = ErasureStep(name: "snapshots") { subscriberID, _, connection in
        try await connection.query("DELETE FROM subscriber_snapshots WHERE subscriber_id = \(subscriberID)")
    }
}
