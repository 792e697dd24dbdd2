import EventStore
import Foundation
import Ledger
import Logging
import Postgres

/// Renames every live subscriber's stream when the process's pseudonym
/// scheme (`PseudonymScheme.current`, from `SUBLEDGER_SECRET`) is not the
/// one the database's streams are named under: the first start with a
/// secret, a changed secret, or a secret removed
/// (docs/decisions/0004-erasure-by-crypto-shredding.md, "The installation
/// secret").
///
/// Made when the database is prepared, before any instance serves, under a
/// lock every starting instance takes (like `PlainStreamConversion`). Needs
/// no earlier secret: `subscriber_keys` says which id each live stream is.
/// Per stream, in one transaction: the stream's and its events' name,
/// every sealed field sealed again under the new name (the name is authenticated with it), a transfer's other party by
/// its new name, the key row, parked events and the analytics contribution.
/// Positions, versions, event ids and commit transaction ids stay, so every
/// checkpoint stays valid. Erased streams keep their names: their ids are
/// known to nobody (`StreamNaming`).
public enum StreamNamingConversion {
    /// Converts what is needed; returns how many streams were renamed.
    /// Streams named without a secret are renamed under the process's
    /// scheme; streams named under another secret only when
    /// `fromAnotherSecret` (`subledger migrate --rename-streams`): otherwise
    /// a process started without the secret, or with a mistyped one, would
    /// rename the streams from under the instances that serve them.
    @discardableResult
    public static func run(conninfo: String, batch: Int = 100, fromAnotherSecret: Bool = false, logger: Logger) async throws -> Int {
        let connection = try await Connection.connect(to: conninfo)
        defer { connection.close() }
        try await connection.lock(.streamNamingConversion)
        do {
            let target = PseudonymScheme.current
            let inForce = try await connection.query("SELECT scheme FROM stream_naming WHERE in_force").first?.decode(String.self, at: 0)
            var renamed = 0
            if inForce != target.name {
                guard inForce == PseudonymScheme.unkeyed.name || fromAnotherSecret else {
                    throw ConfigurationError(
                        variable: ConfigurationVariable.secret.name,
                        message: "the database's streams are named under another secret (\(inForce ?? "none")) than this one "
                            + "(\(target.name)); start with that secret, or rotate with `subledger migrate --rename-streams` "
                            + "after stopping every instance (docs/operations.md#secrets)")
                }
                try await plan(target, on: connection)
                renamed = try await rename(batch: batch, logger: logger, on: connection)
                try await finish(target, on: connection)
                logger.notice("subscriber streams renamed under the configured secret's pseudonyms", metadata: [
                    "streams.renamed": "\(renamed)", "naming.scheme": "\(target.name)"])
            }
            try await StreamNaming.load(on: connection)
            try await connection.unlock(.streamNamingConversion)
            return renamed
        } catch {
            // A broken connection ends its session and the lock with it.
            try? await connection.unlock(.streamNamingConversion)
            throw error
        }
    }

    /// Fills `stream_renames` with every live stream whose name is not the
    /// target's, a few thousand keys at a time.
    static func plan(_ target: PseudonymScheme, on connection: Connection) async throws {
        if let other = try await connection.query("SELECT scheme FROM stream_renames WHERE scheme <> \(target.name) LIMIT 1").first {
            throw ConfigurationError(
                variable: ConfigurationVariable.secret.name,
                message: "a renaming of streams to another secret's pseudonyms (\(try other.decode(String.self, at: 0))) was interrupted; "
                    + "start once with that secret to finish it, then change the secret")
        }
        var after = ""
        while true {
            let rows = try await connection.query("""
                SELECT subscriber_id, pseudonym FROM subscriber_keys WHERE subscriber_id > \(after) ORDER BY subscriber_id LIMIT 5000
                """).map { (id: try $0.decode(String.self, at: 0), stored: try $0.decode(String.self, at: 1)) }
            guard let last = rows.last else { return }
            after = last.id
            var old: [String] = [], new: [String] = []
            for row in rows {
                let name = target.pseudonym(for: row.id)
                if name != row.stored { old.append(row.stored); new.append(name) }
            }
            guard !old.isEmpty else { continue }
            try await connection.query("""
                INSERT INTO stream_renames (old_pseudonym, new_pseudonym, scheme)
                SELECT o, n, \(target.name) FROM ROWS FROM (jsonb_array_elements_text(\(JSONArgument.strings(old))::jsonb),
                                                   jsonb_array_elements_text(\(JSONArgument.strings(new))::jsonb)) AS x(o, n)
                ON CONFLICT (old_pseudonym) DO NOTHING
                """)
        }
    }

    /// Renames the planned streams not yet renamed, `batch` a transaction.
    static func rename(batch: Int, logger: Logger, on connection: Connection) async throws -> Int {
        var renamed = 0
        while true {
            let rows = try await connection.query("""
                SELECT r.old_pseudonym, r.new_pseudonym, k.key FROM stream_renames r
                LEFT JOIN subscriber_keys k ON k.pseudonym = r.old_pseudonym
                WHERE NOT r.done ORDER BY r.old_pseudonym LIMIT \(batch)
                """)
            guard !rows.isEmpty else { return renamed }
            try await connection.withTransaction { connection in
                for row in rows {
                    let old = try row.decode(String.self, at: 0), new = try row.decode(String.self, at: 1)
                    if let key = try row.decode(Data?.self, at: 2) {
                        try await renameStream(from: old, to: new, key: try SubscriberKey(rawValue: key), on: connection)
                    }
                    try await connection.query("UPDATE stream_renames SET done = true WHERE old_pseudonym = \(old)")
                }
            }
            renamed += rows.count
            logger.info("subscriber streams renamed", metadata: ["streams.renamed": "\(renamed)"])
        }
    }

    /// One stream, in the caller's transaction.
    static func renameStream(from old: String, to new: String, key: SubscriberKey, on connection: Connection) async throws {
        let oldStream = SubscriberStreams.prefix + old, newStream = SubscriberStreams.prefix + new
        let events = try await EventStore.readStream(oldStream, on: connection)
        var opened: [Int64: LedgerEvent] = [:]
        var counterparts: Set<String> = []
        for event in events {
            // A type this build does not know has no personal fields it knows of: kept as stored.
            guard let decoded = try? LedgerEvent.decodeFast(type: event.type, schemaVersion: event.schemaVersion, data: event.data),
                  decoded.hasPersonalFields else { continue }
            let open = try key.openingPersonalFields(of: decoded, pseudonym: old)
            opened[event.position] = open
            if let other = open.transferCounterpart, SubscriberPseudonyms.isPseudonym(other) { counterparts.insert(other) }
        }
        // A transfer's other party under its new name, when it is live (an erased one keeps its name).
        var renamedParties: [String: String] = [:]
        if !counterparts.isEmpty {
            for row in try await connection.query("""
                SELECT old_pseudonym, new_pseudonym FROM stream_renames
                WHERE old_pseudonym IN (SELECT jsonb_array_elements_text(\(JSONArgument.strings(Array(counterparts)))::jsonb))
                """) {
                renamedParties[try row.decode(String.self, at: 0)] = try row.decode(String.self, at: 1)
            }
        }
        let rows = try opened.map { position, open in
            let stored = try key.sealingPersonalFields(of: open.renamingCounterpart(renamedParties), pseudonym: new).stored()
            return EventRewrite(position: position, data: String(decoding: stored.data, as: UTF8.self), schemaVersion: stored.schemaVersion)
        }
        try await EventStore.rewrite(rows, inStream: oldStream, on: connection)
        // The events name their stream by number: renaming its row moves them all.
        try await connection.query("UPDATE streams SET stream_id = \(newStream) WHERE stream_id = \(oldStream)")
        try await connection.query("UPDATE consumer_parked_events SET stream_id = \(newStream) WHERE stream_id = \(oldStream)")
        try await connection.query("UPDATE subscriber_keys SET pseudonym = \(new) WHERE pseudonym = \(old)")
        try await connection.query("UPDATE analytics_contributions SET pseudonym = \(new) WHERE pseudonym = \(old)")
    }

    /// Records the target as the scheme in force, the one it replaces as
    /// holding erased streams when any stream has no key, and drops the
    /// work list and the caches (they change no answer; a snapshot holds a
    /// transfer's other party by its name).
    static func finish(_ target: PseudonymScheme, on connection: Connection) async throws {
        try await connection.withTransaction { connection in
            let erased = try await connection.query("""
                SELECT EXISTS (SELECT 1 FROM streams s WHERE starts_with(s.stream_id, \(SubscriberStreams.prefix))
                               AND \(unsafeRaw: StreamNaming.hasNoKey))
                """).first?.decode(Bool.self, at: 0) ?? false
            try await connection.query("UPDATE stream_naming SET in_force = false, holds_erased = holds_erased OR \(erased) WHERE in_force")
            try await connection.query("DELETE FROM stream_naming WHERE NOT in_force AND NOT holds_erased")
            try await connection.query("""
                INSERT INTO stream_naming (scheme, in_force) VALUES (\(target.name), true)
                ON CONFLICT (scheme) DO UPDATE SET in_force = true
                """)
            try await connection.query("DELETE FROM stream_renames")
            try await connection.query("DELETE FROM subscriber_snapshots")
            try await connection.query("DELETE FROM subscriber_state_cache")
        }
    }
}
