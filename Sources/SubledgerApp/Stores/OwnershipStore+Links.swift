import Foundation
import Postgres

extension OwnershipStore {
    /// A link the ledger stores between a transaction id, its original and
    /// the subscriber owning that original (nil: nobody; an original links to itself).
    struct Link: Sendable, Hashable {
        var transactionID: String
        var originalTransactionID: String
        var owner: String?
    }

    /// The stored links of `ids` (transaction or original transaction ids),
    /// in one statement: what `owners(of:on:)` would follow from them.
    static func links(of ids: Set<String>, on connection: Connection) async throws -> [Link] {
        guard !ids.isEmpty else { return [] }
        let list = keysWithHashes(ids.sorted())
        // An import asks for every id of a chunk at once (hundreds of
        // thousands): the planner may join them with the events by hash, and
        // only the events found are read for their keys.
        let rows = try await connection.query("""
            WITH hashed AS (SELECT DISTINCT e->>0 AS id, (e->>1)::bigint AS hash FROM jsonb_array_elements(\(list)::jsonb) e),
                 recorded AS (
                     SELECT DISTINCT h.id, coalesce(subledger_original_key(ev.type, ev.data), h.id) AS original
                     FROM hashed h JOIN events ev ON ev.lookup_key = h.hash AND ev.lookup_key <> 0
                     WHERE subledger_transaction_key(ev.type, ev.data) = h.id)
            SELECT r.id, r.original, o.subscriber_id
            FROM recorded r LEFT JOIN transaction_owners o ON o.original_transaction_id = r.original
            UNION
            SELECT o.original_transaction_id, o.original_transaction_id, o.subscriber_id
            FROM transaction_owners o WHERE o.original_transaction_id IN (SELECT id FROM hashed)
            """)
        return try rows.map {
            Link(transactionID: try $0.decode(String.self, at: 0), originalTransactionID: try $0.decode(String.self, at: 1),
                 owner: try $0.decode(String?.self, at: 2))
        }
    }
}
