import Foundation
import JSON
import Ledger
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
@testable import HTTPAPI
import Testing

/// The log stores a purchase as a record (schema version 2), which is no
/// part of the contract: the history, a transaction's facts and the change
/// feed show it as the JSON object they always showed.
@Suite("Stored records as shown", .timeLimit(.minutes(3)))
struct StoredRecordShapeTests {
    @Test func aRecordedPurchaseIsShownAsItsJSONObject() async throws {
        try await ChangeFixture.with { client, fixture in
            let start = Date() - 10 * 86_400
            let posted = try await client.post("/v1/subscribers/rita/events",
                                               monthlyJSON("r-1000000", at: start, expires: start + 30 * 86_400))
            #expect(posted.status == .created, "\(posted.text)")
            let stored = try await fixture.dependencies.pool.query("""
                SELECT schema_version, jsonb_typeof(data) FROM events WHERE type = 'purchased'
                """)
            #expect(try stored.map { "\(try $0.decode(Int.self, at: 0)) \(try $0.decode(String.self, at: 1))" } == ["2 string"],
                    "the purchase is stored as a record")

            func expectObject(_ data: JSONValue?, _ place: String) {
                #expect(data?["transactionId"]?.string == "r-1000000", "\(place): \(String(describing: data))")
                #expect(data?["productId"]?.string == "com.example.pro.monthly", "\(place)")
                #expect(data?["purchaseDate"]?.string == RFC3339.format(start), "\(place)")
                #expect(data?["environment"]?.string == "Production", "\(place)")
                #expect(data?["quantity"]?.int == 1, "\(place)")
            }
            let history = try await client.get("/v1/subscribers/rita/history", key: Keys.support)
            #expect(history.status == .ok, "\(history.text)")
            expectObject(history.json["events"]?.array.first?["data"], "history")
            let transaction = try await client.get("/v1/transactions/r-1000000", key: Keys.support)
            #expect(transaction.status == .ok, "\(transaction.text)")
            expectObject(transaction.json["facts"]?.array.first?["data"], "transaction")

            try await fixture.project()
            let changes = try await pull(client, expecting: "the purchase") { $0.contains { $0["type"]?.string == "purchased" } }
            expectObject(changes.first { $0["type"]?.string == "purchased" }?["data"], "change feed")
        }
    }
}
