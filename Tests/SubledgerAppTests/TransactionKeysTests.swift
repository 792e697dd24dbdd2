import Foundation
import Ledger
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
import Testing
import TestSupport

/// The transaction lookup finds events by the keys the writer stores with
/// them (`OwnershipStore.ownershipKeys`). The events stored before got
/// theirs in the migration, read by the database from their data
/// (`subledger_transaction_key`, `subledger_original_key`, sql/0044). Here
/// generated events of every kind that records a transaction, in every
/// stored form, give that reader the keys the writer's rule gives.
@Suite("Transaction keys read from the log")
struct TransactionKeysTests {
    /// Ids as stores and imports give them, and ones a byte-length reader
    /// would get wrong: lengths of one, two and three digits, several bytes
    /// a character, and text that looks like a record's field.
    static func id(_ random: inout SplitMix64) -> String {
        let shapes = ["2000000%d", "t%d-0", "GPA.3371-%d-5599-12345", "ü%dé", "日本%d語", "e7:Sandbox%d", "%d:o4:fake",
                      String(repeating: "x", count: 120) + "%d", "%d"]
        let shape = shapes[Int(random.next() % UInt64(shapes.count))]
        return shape.replacingOccurrences(of: "%d", with: String(random.next() % 100_000_000_000))
    }

    static func event(_ random: inout SplitMix64) -> LedgerEvent {
        let transaction = id(&random)
        let original = random.next() % 2 == 0 ? transaction : id(&random)
        let environment: Environment = random.next() % 3 == 0 ? .sandbox : .production
        let date = Date(timeIntervalSince1970: 1_700_000_000 + Double(random.next() % 10_000_000))
        let deviceID = random.next() % 2 == 0 ? nil : "device e7:Sandbox " + id(&random)
        let fact = TransactionFact(transactionID: transaction, originalTransactionID: original, productID: "com.example.é" + id(&random),
                                   purchaseDate: date, expiresDate: date.addingTimeInterval(86_400), deviceID: deviceID,
                                   environment: environment)
        switch random.next() % 7 {
        case 0: return .purchased(fact)
        case 1: return .renewed(fact)
        case 2: return .restored(fact)
        case 3:
            return .transferredIn(TransferFact(originalTransactionID: original, fromSubscriberID: "a", toSubscriberID: "b",
                                               afterPosition: 9, date: date, transaction: random.next() % 4 == 0 ? nil : fact,
                                               environment: environment))
        case 4:
            return .googlePlayPurchase(GooglePlayPurchase(
                kind: .subscription, purchaseToken: id(&random), orderID: random.next() % 4 == 0 ? nil : transaction,
                productID: "pro", state: .active, startTime: date, acknowledged: true, observedAt: date, environment: environment))
        case 5:
            return .refunded(RefundFact(transactionID: transaction, originalTransactionID: original, productID: "pro",
                                        revocationDate: date, environment: environment))
        default: return .purchased(fact)
        }
    }

    @Test func theDatabaseReadsTheKeysTheLedgerGivesFromEveryStoredForm() async throws {
        let dependencies = try await makeDependencies(poolSize: 1)
        defer { Task { await dependencies.pool.close() } }
        var random = SplitMix64(seed: 44)
        let events = (0..<3_000).map { _ in Self.event(&random) }
        // Purchases and renewals as the JSON objects of schema 1, which
        // logs written before the records still hold.
        var legacy = Set<Int>()
        for index in stride(from: 0, to: events.count, by: 11) { legacy.insert(index) }
        var items = [String]()
        var sandboxRecords = 0, multiDigit = 0, nonASCII = 0
        for (index, event) in events.enumerated() {
            let data: Data
            if legacy.contains(index), case .purchased(let fact) = event {
                data = fact.storedJSON()
            } else {
                data = try event.stored().data
            }
            if data.first == UInt8(ascii: "\"") {
                if case .purchased(let fact) = event, fact.environment == .sandbox { sandboxRecords += 1 }
                if let id = event.transactionID, id.utf8.count >= 10 { multiDigit += 1 }
                if let id = event.transactionID, id.utf8.count != id.count { nonASCII += 1 }
            }
            items.append("{\"t\": \"\(event.type)\", \"d\": \(String(decoding: data, as: UTF8.self))}")
        }
        #expect(sandboxRecords > 50 && multiDigit > 500 && nonASCII > 200, "the cases cover what they are for")
        let rows = try await dependencies.pool.query("""
            SELECT subledger_transaction_key(e->>'t', e->'d'), subledger_original_key(e->>'t', e->'d')
            FROM jsonb_array_elements(\("[" + items.joined(separator: ",") + "]")::jsonb) WITH ORDINALITY AS x(e, n) ORDER BY n
            """)
        var index = 0
        for row in rows {
            let found = (try row.decode(String?.self, at: 0), try row.decode(String?.self, at: 1))
            let expected = OwnershipStore.ownershipKeys(of: events[index])
            #expect(found.0 == expected.transaction && found.1 == expected.original,
                    "event \(index) \(events[index].type): \(found) where the ledger gives \(expected)")
            index += 1
        }
        #expect(index == events.count)
    }
}
