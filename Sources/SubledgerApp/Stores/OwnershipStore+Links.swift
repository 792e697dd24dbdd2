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
        let list = JSONArgument.strings(ids.sorted())
        let rows = try await connection.query("""
            WITH wanted AS (SELECT DISTINCT k AS id FROM jsonb_array_elements_text(\(list)::jsonb) k),
                 recorded AS (
                     SELECT DISTINCT w.id, CASE WHEN ev.lookup_group <> '' THEN ev.lookup_group ELSE w.id END AS original
                     FROM wanted w JOIN events ev ON ev.lookup_key = w.id AND ev.lookup_key <> '')
            SELECT r.id, r.original, o.subscriber_id
            FROM recorded r LEFT JOIN transaction_owners o ON o.original_transaction_id = r.original
            UNION
            SELECT o.original_transaction_id, o.original_transaction_id, o.subscriber_id
            FROM transaction_owners o WHERE o.original_transaction_id IN (SELECT id FROM wanted)
            """)
        return try rows.map {
            Link(transactionID: try $0.decode(String.self, at: 0), originalTransactionID: try $0.decode(String.self, at: 1),
                 owner: try $0.decode(String?.self, at: 2))
        }
    }
}
