import AppStore
import AppStoreTesting
import Foundation
import HTTPAPI
import Hummingbird
import HummingbirdTesting
import JSON
import Ledger
import SubledgerApp
import SubledgerAppTesting
import Testing

/// Sandbox never grants production: state is computed per store environment.
@Suite struct EnvironmentTests {
    @Test func aSandboxPurchaseShowsOnlyInTheSandboxView() async throws {
        try await withApp { client, _ in
            let body = #"{"type": "purchase", "transactionId": "sb1", "productId": "com.example.level2", "purchaseDate": "2025-01-01T00:00:00Z", "environment": "Sandbox"}"#
            let recorded = try await client.post("/v1/subscribers/sally/events", body)
            #expect(recorded.status == .created)
            // The write answers in its fact's environment.
            #expect(recorded.json["subscriber"]?["environment"]?.string == "Sandbox")
            #expect(recorded.json["subscriber"]?["entitlements"]?.array.first?["active"]?.bool == true)

            let production = try await client.get("/v1/subscribers/sally").json
            #expect(production["environment"]?.string == "Production")
            #expect(production["entitlements"]?.array.isEmpty == true, "a sandbox purchase grants nothing in production")
            #expect(production["purchases"]?.array.isEmpty == true)
            let sandbox = try await client.get("/v1/subscribers/sally?environment=Sandbox").json
            #expect(sandbox["entitlements"]?.array.first?["id"]?.string == "level2")
            let explained = try await client.get("/v1/subscribers/sally/explain").json
            #expect(explained["entitlements"]?.array.isEmpty == true)
            // History shows both environments, each event marked.
            let history = try await client.get("/v1/subscribers/sally/history").json["events"]?.array ?? []
            #expect(history.first?["data"]?["environment"]?.string == "Sandbox")
            #expect(try await client.get("/v1/subscribers/sally?environment=Staging").error.field == "environment")
        }
    }

    @Test func aSandboxPassGetsSandboxRemindersAndDoesNotStackOnProduction() async throws {
        try await withApp { client, _ in
            let now = Date()
            let day: TimeInterval = 86_400
            func pass(_ id: String, _ environment: String, at date: Date) -> String {
                #"{"type": "purchase", "transactionId": "\#(id)", "productId": "com.example.pass.30d", "purchaseDate": "\#(RFC3339.format(date))", "environment": "\#(environment)"}"#
            }
            #expect(try await client.post("/v1/subscribers/sid/events", pass("pp1", "Production", at: now - 10 * day)).status == .created)
            #expect(try await client.post("/v1/subscribers/sid/events", pass("sp1", "Sandbox", at: now - 5 * day)).status == .created)
            let production = try await client.get("/v1/subscribers/sid").json
            #expect(production["nonRenewingPeriods"]?.array.count == 1, "the sandbox pass does not stack on production's")
            let sandbox = try await client.get("/v1/subscribers/sid?environment=Sandbox").json
            #expect(sandbox["nonRenewingPeriods"]?.array.first?["start"]?.string == RFC3339.format(now - 5 * day))
        }
    }

    @Test func aSandboxNotificationIsRefusedWhenOnlyProductionIsAccepted() async throws {
        let store = AppStoreNotificationTests.good
        var dependencies = try await makeDependencies()
        var verifier = store.verifier
        verifier.environments = [.production]
        dependencies.appStoreVerifier = verifier
        let ready = dependencies
        try await withRouter(ready) { client in
            let app = AppStoreApp(client: client, dependencies: ready)
            let signed = try store.signedNotification(.subscribed, .initialBuy, transaction: AppStoreNotificationTests().first,
                                                      renewal: TestAppStore.renewalInfo())
            let response = try await app.post(signed)
            #expect(response.status == .badRequest)
            #expect(response.error.code == "environment_not_accepted")
            #expect(try await app.counts() == Counts(events: 0, notifications: 0))
        }
    }

    @Test func aNotificationForAnotherAppAppleIDIsRefused() async throws {
        let store = AppStoreNotificationTests.good
        var dependencies = try await makeDependencies()
        var verifier = store.verifier
        verifier.appAppleID = 999  // the test store signs 1234
        dependencies.appStoreVerifier = verifier
        let ready = dependencies
        try await withRouter(ready) { client in
            let app = AppStoreApp(client: client, dependencies: ready)
            let response = try await app.post(try store.signedNotification(.test))
            #expect(response.status == .badRequest)
            #expect(response.error.code == "app_apple_id_mismatch")
            #expect(try await app.counts() == Counts(events: 0, notifications: 0))
        }
    }

    @Test func aNestedTransactionOfAnotherEnvironmentIsRefused() async throws {
        let store = AppStoreNotificationTests.good
        var dependencies = try await makeDependencies()
        dependencies.appStoreVerifier = store.verifier
        let ready = dependencies
        try await withRouter(ready) { client in
            let app = AppStoreApp(client: client, dependencies: ready)
            // A production notification carrying a sandbox transaction.
            let signed = try store.signedNotification(.subscribed, .initialBuy, transaction: AppStoreNotificationTests().first,
                                                      environment: .production)
            let response = try await app.post(signed)
            #expect(response.status == .badRequest)
            #expect(response.error.code == "environment_mismatch")
            #expect(try await app.counts() == Counts(events: 0, notifications: 0))
        }
    }
}
