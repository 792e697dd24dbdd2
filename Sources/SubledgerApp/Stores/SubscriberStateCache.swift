import Foundation
import Ledger
import Postgres

/// The current state of subscribers as last computed (`subscriber_state_cache`
/// in `sql/0008_snapshots.sql`), served again while nothing can have changed it.
enum SubscriberStateCache {
    /// A cached state as stored, served at `now`; nil when it cannot be read.
    /// (`SubscriberSnapshots.load(_:unlessCached:on:)` looks it up.)
    static func decode(_ text: String, at now: Date) -> SubscriberState? {
        guard var state = try? LedgerJSON.makeDecoder().decode(SubscriberState.self, from: Data(text.utf8)) else { return nil }
        state.at = now
        return state
    }

    /// Stores `state` (computed at `state.at` from the ledger at `version`)
    /// until `validUntil`; a newer stream version already stored is kept.
    /// The row is a cache, recomputed when lost: its commit does not wait
    /// for the WAL flush (`synchronous_commit` off for this statement's
    /// transaction only), so a read does not pay for a durable write.
    static func save(_ state: SubscriberState, version: Int64, validUntil: Date?, catalog: Catalog,
                     on connection: Connection) async throws {
        var stored = state
        stored.reminders = []
        let text = String(decoding: try LedgerJSON.makeEncoder().encode(stored), as: UTF8.self)
        try await connection.query("""
            INSERT INTO subscriber_state_cache AS c (subscriber_id, stream_version, catalog, valid_from, valid_until, state)
            SELECT \(state.subscriberID), \(version), \(catalog.fingerprint), \(state.at)::timestamptz, \(validUntil)::timestamptz, \(text)
            FROM (SELECT set_config('synchronous_commit', 'off', true)) AS without_flush_wait,
                 -- Only while the subscriber has its key, held until commit: an
                 -- erasure (which locks the key row first) waits for this save,
                 -- then deletes what it wrote; a save after it stores nothing.
                 (SELECT 1 FROM subscriber_keys WHERE subscriber_id = \(state.subscriberID) FOR KEY SHARE) AS keyed
            ON CONFLICT (subscriber_id) DO UPDATE
            SET stream_version = EXCLUDED.stream_version, catalog = EXCLUDED.catalog, valid_from = EXCLUDED.valid_from,
                valid_until = EXCLUDED.valid_until, state = EXCLUDED.state, updated_at = now()
            WHERE c.stream_version <= EXCLUDED.stream_version
            """)
    }
}

extension SubscriberStateCache {
    /// Erasure: the cached state names devices; it is a cache, so it goes.
    static let erasureStep = ErasureStep(name: "state cache") { subscriberID, _, connection in
        try await connection.query("DELETE FROM subscriber_state_cache WHERE subscriber_id = \(subscriberID)")
    }
}
