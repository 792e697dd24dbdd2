import EventStore
import Foundation
import HTTPAPI
import Hummingbird
import HummingbirdTesting
import JSON
import Ledger
@testable import SubledgerApp
import SubledgerAppTesting
import TestSupport
import Testing

@Suite("Read-model queries")
struct ReadModelRouteTests {
    /// a: a pass in January; b: a monthly renewed once; c: a non-consumable;
    /// d: a pass refunded five days in; e: a sandbox monthly; f: a monthly
    /// active now.
    static func seed(_ client: some TestClientProtocol, _ dependencies: AppDependencies) async throws {
        let now = Date()
        let posts: [(String, String)] = [
            ("a", purchaseJSON("a1", at: "2025-01-01T00:00:00Z")),
            ("b", purchaseJSON("b1", product: "com.example.pro.monthly", at: "2025-01-10T00:00:00Z", expires: "2025-02-10T00:00:00Z")),
            ("b", #"{"type": "renewal", "transactionId": "b2", "originalTransactionId": "b1", "productId": "com.example.pro.monthly", "purchaseDate": "2025-02-10T00:00:00Z", "expiresDate": "2025-03-10T00:00:00Z"}"#),
            ("c", purchaseJSON("c1", product: "com.example.level2", at: "2025-01-05T00:00:00Z")),
            ("d", purchaseJSON("d1", at: "2025-01-20T00:00:00Z")),
            ("d", #"{"type": "refund", "transactionId": "d1", "revocationDate": "2025-01-25T00:00:00Z"}"#),
            ("e", #"{"type": "purchase", "transactionId": "e1", "productId": "com.example.pro.monthly", "purchaseDate": "2025-01-10T00:00:00Z", "expiresDate": "2025-12-31T00:00:00Z", "environment": "Sandbox"}"#),
            ("f", purchaseJSON("f1", product: "com.example.pro.monthly", at: RFC3339.format(now - 86_400), expires: RFC3339.format(now + 30 * 86_400))),
        ]
        for (subscriber, body) in posts {
            let response = try await client.post("/v1/subscribers/\(subscriber)/events", body)
            #expect(response.status == .created, "\(subscriber): \(response.text)")
        }
        try await dependencies.project(SubscriptionProjection(store: dependencies.store, catalog: dependencies.catalog.catalog))
    }

    @Test func subscriptionsAreListedWithTheirStatusAndFiltered() async throws {
        try await withApp { client, dependencies in
            try await Self.seed(client, dependencies)
            let all = try await client.get("/v1/subscriptions", key: Keys.support)
            #expect(all.status == .ok)
            let rows = all.json["subscriptions"]?.array ?? []
            #expect(rows.map { "\($0["subscriberId"]?.string ?? "")/\($0["group"]?.string ?? ""):\($0["status"]?.string ?? "")" }
                    == ["a/pass:expired", "b/pro:expired", "d/pass:revoked", "f/pro:active"])
            #expect(all.json["nextCursor"] == .null)
            let b = try #require(rows.first { $0["subscriberId"]?.string == "b" })
            #expect(b["productId"]?.string == "com.example.pro.monthly" && b["originalTransactionId"]?.string == "b1")
            #expect(b["latestTransactionId"]?.string == "b2" && b["expiresAt"]?.string == "2025-03-10T00:00:00Z")
            #expect(b["startsAt"]?.string == "2025-01-10T00:00:00Z")

            func subscribers(_ query: String) async throws -> [String] {
                let response = try await client.get("/v1/subscriptions?\(query)", key: Keys.admin)
                #expect(response.status == .ok, "\(query): \(response.text)")
                return (response.json["subscriptions"]?.array ?? []).compactMap { $0["subscriberId"]?.string }
            }
            #expect(try await subscribers("status=active") == ["f"])
            #expect(try await subscribers("status=revoked") == ["d"])
            #expect(try await subscribers("group=pass") == ["a", "d"])
            #expect(try await subscribers("productId=com.example.pro.monthly") == ["b", "f"])
            #expect(try await subscribers("entitlement=pro&status=expired") == ["a", "b"])
            #expect(try await subscribers("entitlement=level2").isEmpty)
            #expect(try await subscribers("expiresBefore=2025-03-01T00:00:00Z") == ["a"])
            #expect(try await subscribers("expiresAfter=2025-03-01T00:00:00Z&expiresBefore=2025-04-01T00:00:00Z") == ["b"])
            #expect(try await subscribers("environment=Sandbox") == ["e"])
        }
    }

    /// Keyset pages: every row exactly once, and rows written between two
    /// pages neither repeat nor hide the others.
    @Test func pagesAreStableUnderConcurrentWrites() async throws {
        try await withApp { client, dependencies in
            try await Self.seed(client, dependencies)
            let first = try await client.get("/v1/subscriptions?limit=2", key: Keys.support)
            #expect((first.json["subscriptions"]?.array ?? []).compactMap { $0["subscriberId"]?.string } == ["a", "b"])
            let cursor = try #require(first.json["nextCursor"]?.string)

            for subscriber in ["aa", "c2"] {  // one before the cursor, one after
                _ = try await client.post("/v1/subscribers/\(subscriber)/events", purchaseJSON("\(subscriber)-1", at: "2025-06-01T00:00:00Z"))
            }
            _ = try await client.post("/v1/subscribers/b/events", #"{"type": "refund", "transactionId": "b2", "revocationDate": "2025-03-01T00:00:00Z"}"#)
            try await dependencies.project(SubscriptionProjection(store: dependencies.store, catalog: dependencies.catalog.catalog))

            var seen: [String] = []
            var next: String? = cursor
            while let token = next {
                let page = try await client.get("/v1/subscriptions?limit=2&cursor=\(token)", key: Keys.support)
                #expect(page.status == .ok)
                seen += (page.json["subscriptions"]?.array ?? []).compactMap { $0["subscriberId"]?.string }
                next = page.json["nextCursor"]?.string
            }
            #expect(seen == ["c2", "d", "f"])
        }
    }

    @Test func statsCountActiveSubscribersAtAnInstant() async throws {
        try await withApp { client, dependencies in
            try await Self.seed(client, dependencies)
            let stats = try await client.get("/v1/stats?at=2025-01-22T00:00:00Z", key: Keys.support)
            #expect(stats.status == .ok, "\(stats.text)")
            func counts(_ body: JSONValue, _ list: String, _ key: String) -> [String: Int64] {
                Dictionary(uniqueKeysWithValues: (body[list]?.array ?? []).map { ($0[key]?.string ?? "", $0["active"]?.int ?? -1) })
            }
            #expect(counts(stats.json, "entitlements", "id") == ["pro": 3, "level2": 1])
            #expect(counts(stats.json, "products", "productId")
                    == ["com.example.pass.30d": 2, "com.example.pro.monthly": 1, "com.example.level2": 1])
            #expect(counts(stats.json, "types", "type") == ["non-renewing": 2, "auto-renewable": 1, "non-consumable": 1])
            #expect(stats.json["activeSubscribers"]?.int == 4)

            let afterRefund = try await client.get("/v1/stats?at=2025-01-26T00:00:00Z", key: Keys.support)
            #expect(counts(afterRefund.json, "entitlements", "id") == ["pro": 2, "level2": 1])
            let sandbox = try await client.get("/v1/stats?at=2025-01-22T00:00:00Z&environment=Sandbox", key: Keys.support)
            #expect(counts(sandbox.json, "entitlements", "id") == ["pro": 1])

            let series = try await client.get(
                "/v1/stats/active?from=2025-01-15T00:00:00Z&to=2025-03-15T00:00:00Z&interval=week&entitlement=pro", key: Keys.support)
            #expect(series.status == .ok, "\(series.text)")
            let points = (series.json["series"]?.array ?? []).map { "\($0["at"]?.string?.prefix(10) ?? ""):\($0["active"]?.int ?? -1)" }
            // a until Jan 31, b until Mar 10, d from Jan 20 until its refund on Jan 25.
            #expect(points == ["2025-01-15:2", "2025-01-22:3", "2025-01-29:2", "2025-02-05:1", "2025-02-12:1",
                               "2025-02-19:1", "2025-02-26:1", "2025-03-05:1", "2025-03-12:0"])
        }
    }

    @Test func badQueryParametersAreRefusedNamingTheField() async throws {
        try await withApp { client, _ in
            for (query, field) in [
                ("/v1/subscriptions?status=asleep", "status"), ("/v1/subscriptions?limit=0", "limit"),
                ("/v1/subscriptions?limit=1001", "limit"), ("/v1/subscriptions?cursor=not-a-cursor", "cursor"),
                ("/v1/subscriptions?expiresBefore=tomorrow", "expiresBefore"), ("/v1/subscriptions?environment=Xcode", "environment"),
                ("/v1/stats?at=noon", "at"), ("/v1/stats/active?interval=month", "interval"),
                ("/v1/stats/active?from=2025-02-01T00:00:00Z&to=2025-01-01T00:00:00Z", "from"),
                ("/v1/stats/active?from=2000-01-01T00:00:00Z&to=2025-01-01T00:00:00Z", "from"),
            ] {
                let response = try await client.get(query, key: Keys.support)
                #expect(response.status == .badRequest, "\(query): \(response.status)")
                #expect(response.error.field == field, "\(query): \(response.text)")
            }
            #expect(try await client.get("/v1/subscriptions", key: Keys.ingest).status == .forbidden)
            #expect(try await client.get("/v1/stats", key: nil).status == .unauthorized)
        }
    }
}
