import EventStore
import Foundation
import Ledger
import Postgres
import SubledgerApp
import SubledgerAppTesting
import Testing

/// Transaction facts stored as records (schema version 2) through a real
/// PostgreSQL: `jsonb` keeps the record as a string and prints it with its
/// own escapes, and every way the service reads the log — the event store's
/// reads, the text the snapshots and the rebuild select — gives back the
/// fact, for strings that need escaping, hold digits and colons that look
/// like a record's own, or are not ASCII.
struct TransactionRecordStorageTests {
    static let awkward = ["", "\"", "\\", "\\\"", "i3:abc", "12:", ":", "p1:x", "a\u{1}b", "line\nbreak", "tab\there", "\u{7F}",
                          "é", "日本語", "🎉", "e\u{301}", "\u{2028}", "</script>", String(repeating: "9", count: 300)]

    @Test func recordsWithAwkwardStringsReadBackFromEveryPath() async throws {
        let dependencies = try await makeDependencies(poolSize: 2)
        defer { Task { await dependencies.pool.close() } }
        var events: [LedgerEvent] = []
        for (index, text) in Self.awkward.enumerated() {
            let fact = TransactionFact(
                transactionID: "t\(index)" + text, originalTransactionID: index % 2 == 0 ? "t\(index)" + text : "o" + text,
                productID: text + "p", productType: ProductType.allCases[index % ProductType.allCases.count], group: text,
                duration: ISODuration(months: index % 3), purchaseDate: Date(timeIntervalSince1970: Double(1_767_225_599_999 + index * 1_000) / 1_000),
                expiresDate: index % 3 == 0 ? nil : Date(timeIntervalSince1970: -62_135_596_800 + Double(index)),
                quantity: index % 4 == 0 ? 1 : -index, autoRenew: index % 2 == 0, deviceID: text,
                environment: index % 2 == 0 ? .production : .sandbox, source: text,
                details: AppleTransactionDetails(ownershipType: text, offerType: index, webOrderLineItemID: text, isUpgraded: index % 2 == 1,
                                                 sale: SaleTerms(price: Amount(micros: Int64(index) * 999_999), currency: text,
                                                                 offerDiscount: .freeTrial, storefront: text)))
            events.append([LedgerEvent.purchased(fact), .renewed(fact), .restored(fact)][index % 3])
        }
        let streamID = "records-" + UUID().uuidString
        let newEvents = try events.map { event in
            let stored = try event.stored()
            return NewEvent(type: event.type, schemaVersion: stored.schemaVersion, data: stored.data)
        }
        #expect(newEvents.allSatisfy { $0.schemaVersion == 2 })
        _ = try await dependencies.store.append(to: streamID, events: newEvents)

        let read = try await dependencies.store.readStream(streamID)
        #expect(try read.map { try LedgerEvent.decodeFast(type: $0.type, schemaVersion: $0.schemaVersion, data: $0.data) } == events)
        let text = try await dependencies.pool.query("""
            SELECT type, schema_version, data::text FROM events WHERE stream_number = (SELECT number FROM streams WHERE stream_id = \(streamID)) ORDER BY stream_version
            """)
        let fromText = try text.map { row in
            try LedgerEvent.decodeFast(type: try row.decode(String.self, at: 0), schemaVersion: try row.decode(Int.self, at: 1),
                                       data: Data(try row.decode(String.self, at: 2).utf8))
        }
        #expect(fromText == events)
        // jsonb holds one string, not an object.
        let kinds = try await dependencies.pool.query("SELECT DISTINCT jsonb_typeof(data) FROM events WHERE stream_number = (SELECT number FROM streams WHERE stream_id = \(streamID))")
        #expect(try kinds.map { try $0.decode(String.self, at: 0) } == ["string"])
    }
}
