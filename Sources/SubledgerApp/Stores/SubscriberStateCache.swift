import Foundation
import Ledger
import Postgres

/// The current state of subscribers as last computed (`subscriber_state_cache`
/// in `sql/0008_snapshots.sql`), served again while nothing can have changed it.
enum SubscriberStateCache {
    /// The cached state of `subscriberID` if it still holds at `now`: the
    /// stream has no newer event, the catalog is the same and `now` is before
    /// the next change. One statement.
    static func state(of subscriberID: String, at now: Date, catalog: Catalog, on connection: Connection) async throws -> SubscriberState? {
        let rows = try await connection.query("""
            SELECT c.state FROM subscriber_state_cache c
            JOIN streams s ON s.stream_id = \(SubscriberStreams.streamID(for: subscriberID)) AND s.version = c.stream_version
            WHERE c.subscriber_id = \(subscriberID) AND c.catalog = \(catalog.fingerprint)
              AND c.valid_from <= \(now)::timestamptz AND (c.valid_until IS NULL OR \(now)::timestamptz < c.valid_until)
            """)
        guard let text = try rows.first?.decode(String.self, at: 0),
              var state = try? LedgerJSON.makeDecoder().decode(SubscriberState.self, from: Data(text.utf8)) else { return nil }
        state.at = now
        return state
    }

    /// Stores `state` (computed at `state.at` from the ledger at `version`)
    /// until `validUntil`; a newer stream version already stored is kept.
    static func save(_ state: SubscriberState, version: Int64, validUntil: Date?, catalog: Catalog,
                     on connection: Connection) async throws {
        var stored = state
        stored.reminders = []
        let text = String(decoding: try LedgerJSON.makeEncoder().encode(stored), as: UTF8.self)
        try await connection.query("""
            INSERT INTO subscriber_state_cache AS c (subscriber_id, stream_version, catalog, valid_from, valid_until, state)
            VALUES (\(state.subscriberID), \(version), \(catalog.fingerprint), \(state.at), \(validUntil), \(text))
            ON CONFLICT (subscriber_id) DO UPDATE
            SET stream_version = EXCLUDED.stream_version, catalog = EXCLUDED.catalog, valid_from = EXCLUDED.valid_from,
                valid_until = EXCLUDED.valid_until, state = EXCLUDED.state, updated_at = now()
            WHERE c.stream_version <= EXCLUDED.stream_version
            """)
    }
}
