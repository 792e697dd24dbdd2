import EventStore
import Foundation
import Ledger
import Postgres

/// How the ledger lives in the event store: one stream per subscriber, event
/// keys scoped to it, and the ownership lookups written beside the events.
public enum LedgerStreams {
    /// The stream of a subscriber's facts.
    public static func streamID(for subscriberID: String) -> String { "subscriber-" + subscriberID }

    /// The store's idempotency keys are global; the ledger's are unique per
    /// subscriber (`expiry:pass@…` can occur for everyone), so they are scoped.
    public static func storeKey(subscriberID: String, ledgerKey: String) -> String {
        subscriberID + "\u{1F}" + ledgerKey
    }

    /// Checks a subscriber id from a path or an import line.
    public static func validate(subscriberID: String, field: String = "subscriberId") throws(LedgerError) {
        guard !subscriberID.isEmpty, subscriberID.count <= 200,
              !subscriberID.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else {
            throw LedgerError(kind: .badRequest, code: "invalid_field",
                              message: "Field '\(field)' must be 1 to 200 characters without control characters.",
                              field: field)
        }
    }

    /// The events to append for ledger events decided for `subscriberID`.
    static func newEvents(_ events: [LedgerEvent], subscriberID: String, source: String) throws -> [NewEvent] {
        try events.map { event in
            NewEvent(type: event.type, schemaVersion: event.schemaVersion, data: try event.encodedData(),
                     metadata: EventMetadata(source: event.source ?? source),
                     idempotencyKey: event.idempotencyKey.map { storeKey(subscriberID: subscriberID, ledgerKey: $0) })
        }
    }

    /// A stored event as the ledger sees it.
    static func ledgerEvent(_ recorded: RecordedEvent) throws -> RecordedLedgerEvent {
        RecordedLedgerEvent(
            position: recorded.position, recordedAt: recorded.recordedAt,
            event: try LedgerEvent.decode(type: recorded.type, schemaVersion: recorded.schemaVersion, data: recorded.data))
    }
}

/// A subscriber's stream as read: the ledger events and the version to
/// expect when appending after them.
struct SubscriberHistory: Sendable {
    var subscriberID: String
    var events: [RecordedLedgerEvent]
    var stored: [RecordedEvent]
    var version: Int64

    init(subscriberID: String, stored: [RecordedEvent]) throws {
        self.subscriberID = subscriberID
        self.stored = stored
        self.events = try stored.map(LedgerStreams.ledgerEvent)
        self.version = stored.last?.streamVersion ?? 0
    }

    var exists: Bool { version > 0 }
}

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

/// The SQL of the ledger's lookups.
enum OwnershipLookup {
    /// Owners of the original transactions named in `ids`, whether given as
    /// original or as (non-original) transaction ids.
    static func owners(of ids: Set<String>, on connection: Connection) async throws -> [String: String] {
        guard !ids.isEmpty else { return [:] }
        let list = PostgresJSON(text: "[" + ids.sorted().map(jsonString).joined(separator: ",") + "]")
        let rows = try await connection.query("""
            WITH wanted AS (SELECT jsonb_array_elements_text(\(list)::jsonb) AS id)
            SELECT o.original_transaction_id, o.subscriber_id FROM transaction_owners o
            WHERE o.original_transaction_id IN (SELECT id FROM wanted)
               OR o.original_transaction_id IN (
                    SELECT t.original_transaction_id FROM transaction_ids t WHERE t.transaction_id IN (SELECT id FROM wanted))
            """)
        var owners = [String: String]()
        for row in rows { owners[try row.decode(String.self, at: 0)] = try row.decode(String.self, at: 1) }
        return owners
    }

    /// Writes claims and transaction rows. A claim of an unowned original is
    /// an INSERT (a concurrent claim makes it fail with a unique violation);
    /// a transfer updates only if the previous owner still holds it.
    static func write(claims: [OwnershipClaim], transactions: [TransactionRow], on connection: Connection) async throws {
        for claim in claims where claim.previousOwner != claim.newOwner {
            if let previous = claim.previousOwner {
                let rows = try await connection.query("""
                    UPDATE transaction_owners SET subscriber_id = \(claim.newOwner), claimed_at = now()
                    WHERE original_transaction_id = \(claim.originalTransactionID) AND subscriber_id = \(previous)
                    """)
                if rows.affectedRows != 1 { throw OwnershipChanged() }
            } else {
                try await connection.query("""
                    INSERT INTO transaction_owners (original_transaction_id, subscriber_id)
                    VALUES (\(claim.originalTransactionID), \(claim.newOwner))
                    """)
            }
        }
        guard !transactions.isEmpty else { return }
        let unique = Set(transactions).sorted { ($0.transactionID, $0.subscriberID) < ($1.transactionID, $1.subscriberID) }
        let document = "[" + unique.map {
            "{\"t\":\(jsonString($0.transactionID)),\"o\":\(jsonString($0.originalTransactionID)),\"s\":\(jsonString($0.subscriberID))}"
        }.joined(separator: ",") + "]"
        try await connection.query("""
            INSERT INTO transaction_ids (transaction_id, original_transaction_id, subscriber_id)
            SELECT e->>'t', e->>'o', e->>'s' FROM jsonb_array_elements(\(PostgresJSON(text: document))::jsonb) e
            ON CONFLICT (transaction_id, subscriber_id) DO NOTHING
            """)
    }

    /// The transaction rows that events recorded for `subscriberID` imply.
    static func transactionRows(for events: [LedgerEvent], subscriberID: String) -> [TransactionRow] {
        events.compactMap { event -> TransactionRow? in
            switch event {
            case .purchased(let fact), .renewed(let fact), .restored(let fact):
                TransactionRow(transactionID: fact.transactionId, originalTransactionID: fact.originalTransactionId, subscriberID: subscriberID)
            case .transferredIn(let transfer):
                transfer.transaction.map {
                    TransactionRow(transactionID: $0.transactionId, originalTransactionID: $0.originalTransactionId, subscriberID: subscriberID)
                }
            default:
                nil
            }
        }
    }

    static func jsonString(_ value: String) -> String {
        let data = (try? JSONEncoder().encode(value)) ?? Data("\"\"".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    /// Whether an error means another writer got there first (decide again).
    static func isContention(_ error: Error) -> Bool {
        if error is WrongExpectedVersion || error is OwnershipChanged { return true }
        if let error = error as? PostgresError, let state = error.sqlState {
            return state == .uniqueViolation || state.isTransient
        }
        return false
    }
}

/// The original transaction ids a request's decision may ask the owner of.
enum RequestIDs {
    static func of(_ request: FactRequest) -> Set<String> {
        Set([request.transactionId, request.originalTransactionId].compactMap { $0 })
    }

    static func of(_ request: RestoreRequest) -> Set<String> {
        Set(request.transactions.flatMap { [$0.transactionId, $0.originalTransactionId] })
    }
}
