import Foundation
import Hummingbird
import HummingbirdTesting
import Ledger
import HTTPAPI
import SubledgerApp
import SubledgerAppTesting
import Testing

@Suite("Transactions, products, invalid identifiers, OpenAPI")
struct SupportRouteTests {
    @Test func transactionsAreFoundByIdAndByOriginal() async throws {
        try await withApp { client, _ in
            _ = try await client.post("/v1/subscribers/alice/events",
                                      purchaseJSON("m1", product: "com.example.pro.monthly", expires: "2025-02-01T00:00:00Z"))
            _ = try await client.post("/v1/subscribers/alice/events", #"""
                {"type": "renewal", "transactionId": "m2", "originalTransactionId": "m1", "productId": "com.example.pro.monthly",
                 "purchaseDate": "2025-02-01T00:00:00Z", "expiresDate": "2025-03-01T00:00:00Z"}
                """#)
            let byID = try await client.get("/v1/transactions/m2", key: Keys.support)
            #expect(byID.status == .ok)
            #expect(byID.json["subscriberId"]?.string == "alice")
            #expect(byID.json["transactionId"]?.string == "m2")
            #expect(byID.json["originalTransactionId"]?.string == "m1")
            #expect(byID.json["facts"]?.array.map { $0["type"]?.string } == ["renewed"])

            let byOriginal = try await client.get("/v1/transactions/m1", key: Keys.admin)
            #expect(byOriginal.status == .ok)
            #expect(byOriginal.json["facts"]?.array.map { $0["data"]?["transactionId"]?.string } == ["m1", "m2"])
            #expect(byOriginal.json["facts"]?.array.first?["summary"]?.string?.isEmpty == false)

            let unknown = try await client.get("/v1/transactions/nope", key: Keys.support)
            #expect(unknown.status == .notFound)
            #expect(unknown.error.code == "transaction_not_found")
            #expect(try await client.get("/v1/transactions/m1", key: Keys.ingest).status == .forbidden)
            #expect(try await client.get("/v1/transactions/m1", key: nil).status == .unauthorized)
        }
    }

    @Test func productsAreCacheableAndNeedNoKey() async throws {
        try await withApp { client, _ in
            let products = try await client.get("/v1/products", key: nil)
            #expect(products.status == .ok)
            #expect(products.json.array.map(\.string) == [
                "com.example.pro.monthly", "com.example.pass.30d", "com.example.coins.100", "com.example.level2",
            ])
            let etag = try #require(products.headers[.eTag])
            #expect(etag.hasPrefix("\"") && !etag.hasPrefix("W/"))
            #expect(products.headers[.lastModified] == "Tue, 14 Nov 2023 22:13:20 GMT")

            let alias = try await client.get("/v1/products_v1.json", key: nil)
            #expect(alias.status == .ok)
            #expect(alias.text == products.text)
            #expect(alias.headers[.eTag] == etag)

            let cached = try await client.get("/v1/products", key: nil, headers: [.ifNoneMatch: etag])
            #expect(cached.status == .notModified)
            #expect(cached.body.readableBytes == 0)
            #expect(cached.headers[.eTag] == etag)
            let listed = try await client.get("/v1/products_v1.json", key: nil, headers: [.ifNoneMatch: "\"other\", \(etag)"])
            #expect(listed.status == .notModified)
            let stale = try await client.get("/v1/products", key: nil, headers: [.ifNoneMatch: "\"other\""])
            #expect(stale.status == .ok)

            let since = try await client.get("/v1/products", key: nil, headers: [.ifModifiedSince: "Tue, 14 Nov 2023 22:13:20 GMT"])
            #expect(since.status == .notModified)
            let older = try await client.get("/v1/products", key: nil, headers: [.ifModifiedSince: "Mon, 13 Nov 2023 00:00:00 GMT"])
            #expect(older.status == .ok)
            let garbage = try await client.get("/v1/products", key: nil, headers: [.ifModifiedSince: "last week"])
            #expect(garbage.status == .ok)
            // If-None-Match wins over If-Modified-Since.
            let both = try await client.get("/v1/products", key: nil, headers: [
                .ifNoneMatch: "\"other\"", .ifModifiedSince: "Tue, 14 Nov 2023 22:13:20 GMT",
            ])
            #expect(both.status == .ok)
        }
    }

    @Test func invalidIdentifiersAreStoredAndShownToSupport() async throws {
        try await withApp { client, _ in
            let reported = try await client.post("/v1/products/invalid",
                                                 #"{"identifiers": ["com.example.gone", "com.example.level2"], "deviceId": "phone"}"#)
            #expect(reported.status == .created)
            #expect(reported.json["recorded"]?.int == 2)
            _ = try await client.post("/v1/products/invalid", #"{"identifiers": ["com.example.gone"], "deviceId": "tablet"}"#, key: Keys.admin)

            let listed = try await client.get("/v1/products/invalid", key: Keys.support)
            #expect(listed.status == .ok)
            let gone = try #require(listed.json["identifiers"]?.array.first { $0["identifier"]?.string == "com.example.gone" })
            #expect(gone["reports"]?.int == 2)
            #expect(gone["devices"]?.int == 2)
            #expect(gone["inCatalog"]?.bool == false)
            let level2 = listed.json["identifiers"]?.array.first { $0["identifier"]?.string == "com.example.level2" }
            #expect(level2?["inCatalog"]?.bool == true)

            #expect(try await client.post("/v1/products/invalid", #"{"identifiers": []}"#).error.field == "identifiers")
            #expect(try await client.post("/v1/products/invalid", #"{"identifiers": ["ok", 3]}"#).error.field == "identifiers[1]")
            #expect(try await client.post("/v1/products/invalid", #"{"identifiers": ["ok"], "deviceId": 7}"#).error.field == "deviceId")
            #expect(try await client.post("/v1/products/invalid", "nope").error.code == "invalid_json")
            #expect(try await client.post("/v1/products/invalid", #"{"identifiers": ["x"]}"#, key: Keys.support).status == .forbidden)
            #expect(try await client.post("/v1/products/invalid", #"{"identifiers": ["x"]}"#, key: nil).status == .unauthorized)
            #expect(try await client.get("/v1/products/invalid", key: Keys.ingest).status == .forbidden)
            #expect(try await client.get("/v1/products/invalid", key: nil).status == .unauthorized)
        }
    }

    @Test func theOpenAPIDocumentDescribesEveryRoute() async throws {
        try await withApp { client, _ in
            let response = try await client.get("/openapi.yaml", key: nil)
            #expect(response.status == .ok)
            #expect(response.headers[.contentType] == "application/yaml")
            let text = response.text
            #expect(text.hasPrefix("openapi: 3.1.0\n"))
            for path in [
                "/v1/subscribers/{subscriberId}/events:", "/v1/subscribers/{subscriberId}/restore:",
                "/v1/subscribers/{subscriberId}:", "/v1/subscribers/{subscriberId}/history:",
                "/v1/subscribers/{subscriberId}/explain:", "/v1/transactions/{transactionId}:", "/v1/products:",
                "/v1/products_v1.json:", "/v1/products/invalid:", "/v1/reminders:", "/v1/appstore/notifications:",
                "/v1/subscribers/{subscriberId}/receipts:", "/health:", "/metrics:", "/openapi.yaml:",
            ] {
                #expect(text.contains("\n  \(path)\n"), "missing \(path)")
            }
            // Every $ref points at something defined.
            let refs = text.split(separator: "\"").filter { $0.hasPrefix("#/components/") }
            for ref in Set(refs) {
                let name = ref.split(separator: "/").last!
                #expect(text.contains("\n    \(name):\n"), "undefined \(ref)")
            }
            #expect(!text.contains("\t"))
        }
    }
}
