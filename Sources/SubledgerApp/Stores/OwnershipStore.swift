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

/// Another writer changed an ownership row after this decision read it.
struct OwnershipChanged: Error {}

/// Who owns which original transaction (`transaction_owners`, written
/// beside the events in the writer's transaction), and which subscriber
/// recorded which transaction, read from the log's own indexes of the keys
/// its events hold (`subledger_transactions`, sql/0044).
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
            SELECT t.transaction_key, t.original_key, t.subscriber_id, o.subscriber_id
            FROM subledger_transactions(\(JSONArgument.strings([id]))::jsonb) t
            LEFT JOIN transaction_owners o ON o.original_transaction_id = t.original_key
            ORDER BY coalesce(t.subscriber_id = o.subscriber_id, false) DESC, t.event_position DESC
            """)
        guard let first = rows.first else { return nil }
        let original = try first.decode(String.self, at: 1)
        let recordedBy = try first.decode(String.self, at: 2)
        let owner = try first.decode(String?.self, at: 3) ?? recordedBy
        let isOriginal = id == original
        // Every subscriber that recorded it: as its transaction or, for an
        // original, as any transaction of it.
        var subscribers = [String]()
        for row in rows {
            let transaction = try row.decode(String.self, at: 0), subscriber = try row.decode(String.self, at: 2)
            if (isOriginal || transaction == id), !subscribers.contains(subscriber) { subscribers.append(subscriber) }
        }
        return Located(originalTransactionID: original, owner: owner, isOriginal: isOriginal, recordedBy: subscribers.sorted())
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
    static func statements(claims: [OwnershipClaim]) -> [PostgresQuery] {
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
        return statements
    }

    /// Raised by `transfer_ownership` when the previous owner no longer holds it.
    static let ownershipChanged = SQLState("SL410")

    /// The ownership keys (`Store.ownershipKey`) an event records: the
    /// transaction's (a Play purchase: its order id's), and its original's
    /// when that is another one (a Play purchase: its token's).
    static func ownershipKeys(of event: LedgerEvent) -> (transaction: String?, original: String?) {
        func keys(_ fact: TransactionFact) -> (String?, String?) {
            (fact.environment.ownershipKey(fact.transactionID),
             fact.originalTransactionID == fact.transactionID ? nil : fact.environment.ownershipKey(fact.originalTransactionID))
        }
        switch event {
        case .purchased(let fact), .renewed(let fact), .restored(let fact): return keys(fact)
        case .transferredIn(let transfer): return transfer.transaction.map(keys) ?? (nil, nil)
        case .googlePlayPurchase(let purchase):
            let token = Store.googlePlay.ownershipKey(purchase.purchaseToken, environment: purchase.environment)
            let order = purchase.orderID.map { Store.googlePlay.ownershipKey($0, environment: purchase.environment) }
            return (order, order == token ? nil : token)
        default: return (nil, nil)
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
    /// one is not refused on its account). Which transactions it recorded
    /// stays in its stream, whose subscriber is then its pseudonym
    /// (`subledger_stream_subscriber`, sql/0044).
    static let erasureStep = ErasureStep(name: "ownership") { subscriberID, _, connection in
        try await connection.query("DELETE FROM transaction_owners WHERE subscriber_id = \(subscriberID)")
    }
}
