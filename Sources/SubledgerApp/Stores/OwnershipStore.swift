import EventStore
import Foundation
import Ledger
import Postgres

/// A change of the ownership lookup, checked against what the decision saw.
struct OwnershipClaim: Sendable, Hashable {
    var originalTransactionID: String
    /// The owner the decision was made against (nil: nobody).
    var previousOwner: String?
    var newOwner: String
}

/// A row of the transaction lookup.
struct TransactionRow: Sendable, Hashable {
    var transactionID: String
    var originalTransactionID: String
    var subscriberID: String
}

/// Another writer changed an ownership row after this decision read it.
struct OwnershipChanged: Error {}

/// Who owns which original transaction (`transaction_owners`) and which
/// subscriber recorded which transaction (`transaction_ids`), written beside
/// the events in the writer's transaction.
struct OwnershipStore: Sendable {
    let pool: ConnectionPool

    /// A transaction found by its id or its original's.
    struct Located: Sendable {
        var originalTransactionID: String
        /// The subscriber holding the original now.
        var owner: String
        /// Whether the id asked for was the original transaction's.
        var isOriginal: Bool
        /// Every subscriber that recorded facts of it (previous owners too).
        var recordedBy: [String]
    }

    /// Finds a transaction by transaction id or original transaction id,
    /// Production's first, then Sandbox's (ownership is per environment).
    func locate(transactionOrOriginalID id: String) async throws -> Located? {
        for store in Store.allCases {
            for environment in Environment.allCases {
                if var located = try await locate(key: store.ownershipKey(id, environment: environment)) {
                    located.originalTransactionID = Store.parseOwnershipKey(located.originalTransactionID).id
                    return located
                }
            }
        }
        return nil
    }

    private func locate(key id: String) async throws -> Located? {
        let rows = try await pool.query("""
            SELECT t.transaction_id, t.original_transaction_id, t.subscriber_id, o.subscriber_id
            FROM transaction_ids t LEFT JOIN transaction_owners o ON o.original_transaction_id = t.original_transaction_id
            WHERE t.transaction_id = \(id) OR t.original_transaction_id = \(id)
            ORDER BY (t.transaction_id = \(id)) DESC, coalesce(t.subscriber_id = o.subscriber_id, false) DESC, t.recorded_at DESC
            LIMIT 1
            """)
        guard let row = rows.first else { return nil }
        let original = try row.decode(String.self, at: 1)
        let recordedBy = try row.decode(String.self, at: 2)
        let owner = try row.decode(String?.self, at: 3) ?? recordedBy
        let isOriginal = id == original
        let others = try await pool.query("""
            SELECT DISTINCT subscriber_id FROM transaction_ids
            WHERE \(unsafeRaw: isOriginal ? "original_transaction_id" : "transaction_id") = \(id)
            """)
        return Located(originalTransactionID: original, owner: owner, isOriginal: isOriginal,
                       recordedBy: try others.map { try $0.decode(String.self, at: 0) })
    }

    /// The original transactions `subscriberID` holds now, as ownership
    /// keys (`Environment.ownershipKey`).
    func originals(ownedBy subscriberID: String) async throws -> [String] {
        let rows = try await pool.query("""
            SELECT original_transaction_id FROM transaction_owners WHERE subscriber_id = \(subscriberID) ORDER BY original_transaction_id
            """)
        return try rows.map { try $0.decode(String.self, at: 0) }
    }

    /// Owners of the original transactions named in `ids` (see `owners(of:on:)`).
    func owners(of ids: Set<String>) async throws -> [String: String] {
        try await pool.withConnection { try await Self.owners(of: ids, on: $0) }
    }

    /// Owners of the original transactions named in `ids`, whether given as
    /// original or as (non-original) transaction ids.
    static func owners(of ids: Set<String>, on connection: Connection) async throws -> [String: String] {
        guard let statement = ownersStatement(ids) else { return [:] }
        return try owners(from: try await connection.query(statement))
    }

    /// The statement of `owners(of:on:)`, to pipeline with others; nil when
    /// there is nothing to ask.
    static func ownersStatement(_ ids: Set<String>) -> PostgresQuery? {
        guard !ids.isEmpty else { return nil }
        // `subledger_owners` (sql/0018) probes the indexes per id with a plan
        // made once per connection, whatever the tables held then.
        return "SELECT original_transaction_id, subscriber_id FROM subledger_owners(\(JSONArgument.strings(ids.sorted()))::jsonb)"
    }

    static func owners(from rows: PostgresRows) throws -> [String: String] {
        var owners = [String: String]()
        for row in rows { owners[try row.decode(String.self, at: 0)] = try row.decode(String.self, at: 1) }
        return owners
    }

    /// The statements writing claims and transaction rows, in order, sent
    /// with the batch's append (the writer maps SL410 to `OwnershipChanged`). A
    /// transfer is one statement (`transfer_ownership`, sql/0009) that fails
    /// by itself when the previous owner no longer holds the original; every
    /// claim of an unowned original is one row of a single INSERT (a batch of
    /// an import claims hundreds), which fails as a whole on any taken one.
    static func statements(claims: [OwnershipClaim], transactions: [TransactionRow]) -> [PostgresQuery] {
        var statements = [PostgresQuery]()
        let changed = claims.filter { $0.previousOwner != $0.newOwner }
            .sorted { $0.originalTransactionID < $1.originalTransactionID }
        let fresh = changed.filter { $0.previousOwner == nil }
        if !fresh.isEmpty {
            let rows = JSONArgument.objects(["o", "s"], fresh.map { [$0.originalTransactionID, $0.newOwner] })
            statements.append("""
                INSERT INTO transaction_owners (original_transaction_id, subscriber_id)
                SELECT e->>'o', e->>'s' FROM jsonb_array_elements(\(rows)::jsonb) e
                """)
        }
        for claim in changed {
            guard let previous = claim.previousOwner else { continue }
            statements.append("SELECT transfer_ownership(\(claim.originalTransactionID), \(previous), \(claim.newOwner))")
        }
        guard !transactions.isEmpty else { return statements }
        let unique = Set(transactions).sorted { ($0.transactionID, $0.subscriberID) < ($1.transactionID, $1.subscriberID) }
        let rows = JSONArgument.objects(["t", "o", "s"], unique.map { [$0.transactionID, $0.originalTransactionID, $0.subscriberID] })
        statements.append("""
            INSERT INTO transaction_ids (transaction_id, original_transaction_id, subscriber_id)
            SELECT e->>'t', e->>'o', e->>'s' FROM jsonb_array_elements(\(rows)::jsonb) e
            ON CONFLICT (transaction_id, subscriber_id) DO NOTHING
            """)
        return statements
    }

    /// Raised by `transfer_ownership` when the previous owner no longer holds it.
    static let ownershipChanged = SQLState("SL410")

    /// The transaction rows that events recorded for `subscriberID` imply,
    /// under their environment's ownership keys (`Environment.ownershipKey`).
    static func transactionRows(for events: [LedgerEvent], subscriberID: String) -> [TransactionRow] {
        func row(_ fact: TransactionFact) -> TransactionRow {
            TransactionRow(transactionID: fact.environment.ownershipKey(fact.transactionID),
                           originalTransactionID: fact.environment.ownershipKey(fact.originalTransactionID), subscriberID: subscriberID)
        }
        return events.flatMap { event -> [TransactionRow] in
            switch event {
            case .purchased(let fact), .renewed(let fact), .restored(let fact): [row(fact)]
            case .transferredIn(let transfer): transfer.transaction.map { [row($0)] } ?? []
            case .googlePlayPurchase(let purchase):
                // A Play purchase is found by its token and by its order id.
                [purchase.purchaseToken, purchase.orderID].compactMap { id in
                    id.map {
                        TransactionRow(transactionID: Store.googlePlay.ownershipKey($0, environment: purchase.environment),
                                       originalTransactionID: Store.googlePlay.ownershipKey(purchase.purchaseToken,
                                                                                            environment: purchase.environment),
                                       subscriberID: subscriberID)
                    }
                }
            default: []
            }
        }
    }

    /// Whether an error means another writer got there first (decide again).
    static func isContention(_ error: Error) -> Bool {
        if error is WrongExpectedVersion || error is OwnershipChanged { return true }
        if let error = error as? PostgresError, let state = error.sqlState {
            return state == .uniqueViolation || state == ownershipChanged || state.isTransient
        }
        return false
    }
}

extension OwnershipStore {
    /// Erasure: the subscriber holds no original any more (a later buyer of
    /// one is not refused on its account); which transactions it recorded
    /// stays, under the pseudonym.
    static let erasureStep = ErasureStep(name: "ownership") { subscriberID, pseudonym, connection in
        try await connection.query("DELETE FROM transaction_owners WHERE subscriber_id = \(subscriberID)")
        try await connection.query("UPDATE transaction_ids SET subscriber_id = \(pseudonym) WHERE subscriber_id = \(subscriberID)")
    }
}
