import AppStore
import AppStoreTesting
import Foundation
import Hummingbird
import HummingbirdTesting
import Ledger
import SubledgerApp
import SubledgerAppTesting
import Testing

/// `GET /v1/orders/{orderId}` (Look Up Order ID, then the owners in the ledger).
struct AppStoreOrderTests {
    static func lookUp(_ signed: [String], status: Int = 0) -> FakeAppStoreServerAPI.Answer {
        FakeAppStoreServerAPI.json(["status": status, "signedTransactions": signed])
    }

    @Test func orderLookupFindsTheOwner() async throws {
        try await withAppStoreAPI { api in
            let bought = try await api.client.post("/v1/subscribers/alice/events", purchaseJSON(
                "7000000000000001", product: "com.example.pro.monthly", at: "2025-03-01T11:59:00Z", expires: "2025-04-01T11:59:00Z"))
            #expect(bought.status == .created, "\(bought.text)")
            await api.fake.script(.lookUpOrder, [Self.lookUp([
                try api.store.sign(productionTransaction("7000000000000001")),
                try api.store.sign(productionTransaction("7000000000000009", product: "com.example.level2", expires: nil)),
            ])])
            let response = try await api.client.get("/v1/orders/MK5TTTVWJH", key: Keys.support)
            #expect(response.status == .ok, "\(response.text)")
            #expect(response.json["orderId"]?.string == "MK5TTTVWJH")
            let transactions = response.json["transactions"]?.array ?? []
            #expect(transactions.count == 2)
            #expect(transactions.first?["transactionId"]?.string == "7000000000000001")
            #expect(transactions.first?["subscriberId"]?.string == "alice")
            #expect(transactions.first?["productId"]?.string == "com.example.pro.monthly")
            #expect(transactions.last?["subscriberId"] == .null)

            await api.fake.script(.lookUpOrder, [Self.lookUp([], status: 1)])
            let unknown = try await api.client.get("/v1/orders/NOSUCHORDER", key: Keys.support)
            #expect(unknown.status == .notFound)
            #expect(unknown.error.code == "order_not_found")
            #expect(try await api.client.get("/v1/orders/MK5TTTVWJH", key: Keys.ingest).status == .forbidden)
            #expect(try await api.client.get("/v1/orders/MK5TTTVWJH", key: nil).status == .unauthorized)
            #expect(try await api.client.get("/v1/orders/MK5TTTVWJH?environment=Staging", key: Keys.support).status == .badRequest)
        }
    }

    static func sandboxTransaction(_ id: String) -> TransactionInfo {
        var transaction = productionTransaction(id)
        transaction.environment = .sandbox
        return transaction
    }

    /// Without `environment`, a deployment that accepts only Sandbox asks Sandbox.
    @Test func aSandboxOnlyDeploymentAsksSandbox() async throws {
        try await withAppStoreAPI(configure: { $0.appStoreEnvironments = [.sandbox] }) { api in
            await api.fake.script(.lookUpOrder, environment: "sandbox", [Self.lookUp([try api.store.sign(Self.sandboxTransaction("7000000000000101"))])])
            let response = try await api.client.get("/v1/orders/MK5TTTVWJH", key: Keys.support)
            #expect(response.status == .ok, "\(response.text)")
            #expect(response.json["environment"]?.string == "Sandbox")
            #expect(response.json["transactions"]?.array.first?["environment"]?.string == "Sandbox")
            #expect(await api.fake.calls(.lookUpOrder).isEmpty)
            #expect(await api.fake.calls(.lookUpOrder, environment: "sandbox").count == 1)
        }
    }

    /// Without `environment`, the accepted environments are asked in turn,
    /// Production first; the first that knows the order answers.
    @Test func withoutAnEnvironmentProductionIsAskedFirstThenSandbox() async throws {
        try await withAppStoreAPI { api in
            await api.fake.script(.lookUpOrder, [Self.lookUp([], status: 1)])
            await api.fake.script(.lookUpOrder, environment: "sandbox", [Self.lookUp([try api.store.sign(Self.sandboxTransaction("7000000000000102"))])])
            let sandbox = try await api.client.get("/v1/orders/SANDBOXORDER", key: Keys.support)
            #expect(sandbox.status == .ok, "\(sandbox.text)")
            #expect(sandbox.json["environment"]?.string == "Sandbox")
            #expect(await api.fake.calls(.lookUpOrder).count == 1)
            #expect(await api.fake.calls(.lookUpOrder, environment: "sandbox").count == 1)

            await api.fake.script(.lookUpOrder, [Self.lookUp([try api.store.sign(productionTransaction("7000000000000103"))])])
            let production = try await api.client.get("/v1/orders/PRODUCTIONORDER", key: Keys.support)
            #expect(production.status == .ok, "\(production.text)")
            #expect(production.json["environment"]?.string == "Production")
            #expect(await api.fake.calls(.lookUpOrder, environment: "sandbox").count == 1)

            // Asked for one environment, only that one answers.
            await api.fake.script(.lookUpOrder, [Self.lookUp([], status: 1)])
            let asked = try await api.client.get("/v1/orders/SANDBOXORDER?environment=Production", key: Keys.support)
            #expect(asked.status == .notFound)
            #expect(await api.fake.calls(.lookUpOrder, environment: "sandbox").count == 1)

            await api.fake.script(.lookUpOrder, environment: "sandbox", [Self.lookUp([], status: 1)])
            let nowhere = try await api.client.get("/v1/orders/NOSUCHORDER", key: Keys.support)
            #expect(nowhere.status == .notFound)
            #expect(nowhere.error.code == "order_not_found")
        }
    }

    @Test func withoutTheAPIConfiguredOrdersAnswer503() async throws {
        try await withApp { client, _ in
            let response = try await client.get("/v1/orders/MK5TTTVWJH", key: Keys.support)
            #expect(response.status == .serviceUnavailable)
            #expect(response.error.code == "appstore_api_not_configured")
        }
    }

    @Test func appleFailuresAreNotServerErrors() async throws {
        try await withAppStoreAPI { api in
            await api.fake.script(.lookUpOrder, [FakeAppStoreServerAPI.Answer(status: 401, body: "Unauthenticated")])
            let unauthorized = try await api.client.get("/v1/orders/MK5TTTVWJH", key: Keys.support)
            #expect(unauthorized.status == .serviceUnavailable)
            #expect(unauthorized.error.code == "appstore_api_unauthorized")
            #expect(unauthorized.json["error"]?["message"]?.string?.contains("SUBLEDGER_APPSTORE_KEY_ID") == true)

            let forged = try AppStoreNotificationTests.stranger.sign(productionTransaction("7000000000000001"))
            await api.fake.script(.lookUpOrder, [Self.lookUp([forged])])
            let refused = try await api.client.get("/v1/orders/MK5TTTVWJH", key: Keys.support)
            #expect(refused.status == .badGateway)
            #expect(refused.error.code == "appstore_api_unverified_answer")

            await api.fake.script(.lookUpOrder, [FakeAppStoreServerAPI.rateLimited(retryAt: Date().addingTimeInterval(3600))])
            let limited = try await api.client.get("/v1/orders/MK5TTTVWJH", key: Keys.support)
            #expect(limited.status == .serviceUnavailable)
            #expect(limited.error.code == "appstore_api_rate_limited")
        }
    }
}
