import Foundation
import Hummingbird
import HummingbirdTesting
import Ledger
import NIOCore
import HTTPAPI
import SubledgerApp
import SubledgerAppTesting
import Testing

/// A stand-in for Apple's `verifyReceipt` on loopback: each endpoint answers
/// from its script in turn (the last answer repeats) and remembers what it was sent.
actor FakeAppStore {
    private var scripts: [String: [String]] = [:]
    private var requests: [String: [Data]] = [:]

    func script(_ path: String, _ answers: [String]) { scripts[path] = answers }

    func calls(_ path: String) -> Int { requests[path]?.count ?? 0 }

    func lastRequest(_ path: String) -> Data? { requests[path]?.last }

    func answer(_ path: String, body: Data) -> String {
        requests[path, default: []].append(body)
        guard var script = scripts[path], !script.isEmpty else { return #"{"status": 21199, "is-retryable": false}"# }
        let next = script.count > 1 ? script.removeFirst() : script[0]
        scripts[path] = script
        return next
    }

    /// Serves the fake on a free port for the duration of `body`.
    nonisolated func serve(_ body: @escaping @Sendable (_ baseURL: String) async throws -> Void) async throws {
        let router = Router()
        for path in ["production", "sandbox"] {
            router.post(RouterPath(path)) { request, _ -> Response in
                let data = Data(try await request.body.collect(upTo: 1 << 20).readableBytesView)
                let answer = await self.answer(path, body: data)
                return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: answer)))
            }
        }
        // Sends the request on to a collector that would answer as Apple does.
        router.post("redirect") { _, _ -> Response in
            Response(status: .temporaryRedirect, headers: [.location: "/collector"])
        }
        router.post("collector") { request, _ -> Response in
            let data = Data(try await request.body.collect(upTo: 1 << 20).readableBytesView)
            let answer = await self.answer("collector", body: data)
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: answer)))
        }
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        try await app.test(.live) { client in
            try await body("http://127.0.0.1:\(client.port!)")
        }
    }
}

/// `POST /v1/subscribers/{id}/receipts` against the fake App Store.
struct AppStoreReceiptTests {
    static let entries = #"""
        "latest_receipt_info": [
          {"transaction_id": "5000000000000002", "original_transaction_id": "5000000000000001", "product_id": "com.example.pro.monthly",
           "purchase_date_ms": "1743508740000", "expires_date_ms": "1746100740000", "quantity": "1"}
        ],
        "receipt": {"bundle_id": "com.example.subledger", "in_app": [
          {"transaction_id": "5000000000000001", "original_transaction_id": "5000000000000001", "product_id": "com.example.pro.monthly",
           "purchase_date_ms": "1740830340000", "expires_date_ms": "1743508740000", "quantity": "1"},
          {"transaction_id": "5000000000000009", "original_transaction_id": "5000000000000009", "product_id": "com.example.level2",
           "purchase_date_ms": "1740830340000", "quantity": "1", "cancellation_date_ms": "1741000000000"}
        ]}
        """#
    static let valid = "{\"status\": 0, \"environment\": \"Sandbox\", \(entries)}"
    static let validProduction = "{\"status\": 0, \"environment\": \"Production\", \(entries)}"
    static let body = #"{"receiptData": "MIIT0gYJKoZIhvcNAQcCoIIT", "deviceId": "phone-1"}"#

    func withFake(_ body: @escaping @Sendable (FakeAppStore, AppStoreApp) async throws -> Void,
                  configure: @escaping @Sendable (inout SubledgerConfiguration, String) -> Void = { _, _ in }) async throws {
        let fake = FakeAppStore()
        try await fake.serve { baseURL in
            var dependencies = try await makeDependencies()
            dependencies.configuration.appStoreVerifyURL = baseURL + "/production"
            dependencies.configuration.appStoreSandboxURL = baseURL + "/sandbox"
            dependencies.configuration.appStoreSharedSecret = "shared-secret-1"
            dependencies.configuration.appStoreBundleID = "com.example.subledger"
            dependencies.configuration.appStoreReceiptRetryDelays = [.milliseconds(1), .milliseconds(2), .milliseconds(4)]
            dependencies.configuration.appStoreReceiptTimeout = .seconds(5)
            configure(&dependencies.configuration, baseURL)
            let ready = dependencies
            try await withRouter(ready) { client in try await body(fake, AppStoreApp(client: client, dependencies: ready)) }
        }
    }

    @Test func aSandboxReceiptGoesToProductionThenSandbox() async throws {
        try await withFake { fake, app in
            await fake.script("production", [#"{"status": 21007}"#])
            await fake.script("sandbox", [Self.valid])
            let response = try await app.client.post("/v1/subscribers/carol/receipts", Self.body)
            #expect(response.status == .ok, "\(response.text)")
            #expect(response.json["subscriberId"]?.string == "carol")
            #expect(await fake.calls("production") == 1)
            #expect(await fake.calls("sandbox") == 1)
            let sent = (try? JSONSerialization.jsonObject(with: await fake.lastRequest("sandbox") ?? Data())) as? [String: Any] ?? [:]
            #expect(sent["receipt-data"] as? String == "MIIT0gYJKoZIhvcNAQcCoIIT")
            #expect(sent["password"] as? String == "shared-secret-1")
            #expect(sent["exclude-old-transactions"] as? Bool == false)

            let history = try await app.client.get("/v1/subscribers/carol/history").json["events"]?.array ?? []
            #expect(history.map { $0["type"]?.string } == ["purchased", "purchased", "refunded", "renewed"])
            #expect(history.allSatisfy { $0["data"]?["environment"]?.string == "Sandbox" })
            #expect(history.allSatisfy { $0["source"]?.string == "appstore" })
            let state = try await app.state("carol", at: "2025-04-15T00:00:00Z")
            #expect(state["subscriptions"]?.array.first?["expiresAt"]?.string == "2025-05-01T11:59:00Z")
            #expect(state["subscriptions"]?.array.first?["status"]?.string == "active")
            // The cancelled non-consumable is revoked.
            #expect(state["entitlements"]?.array.first { $0["id"]?.string == "level2" }?["active"]?.bool == false)

            // The same receipt again records nothing new.
            let events = try await app.counts().events
            await fake.script("production", [#"{"status": 21007}"#])
            #expect(try await app.client.post("/v1/subscribers/carol/receipts", Self.body).status == .ok)
            #expect(try await app.counts().events == events)
            // A Production receipt naming those Sandbox transactions touches none of them.
            await fake.script("production", [Self.validProduction])
            let crossed = try await app.client.post("/v1/subscribers/carol/receipts", Self.body)
            #expect(crossed.status == .conflict, "\(crossed.text)")
            #expect(crossed.error.code == "environment_conflict")
            #expect(try await app.counts().events == events)
        }
    }

    /// `pending_renewal_info` says a failed renewal is retried in a grace
    /// period, and an upgraded transaction's cancellation is not a refund.
    /// https://developer.apple.com/documentation/appstorereceipts/responsebody/pending_renewal_info
    /// https://developer.apple.com/documentation/appstorereceipts/is_upgraded
    @Test func pendingRenewalInfoGivesGraceAndAnUpgradeIsNoRefund() async throws {
        let receipt = #"""
            {"status": 0, "environment": "Sandbox",
             "latest_receipt_info": [
               {"transaction_id": "5100000000000001", "original_transaction_id": "5100000000000001", "product_id": "com.example.pro.monthly",
                "purchase_date_ms": "1740830340000", "expires_date_ms": "1743508740000", "quantity": "1", "in_app_ownership_type": "PURCHASED"},
               {"transaction_id": "5100000000000002", "original_transaction_id": "5100000000000001", "product_id": "com.example.pro.monthly",
                "purchase_date_ms": "1743508740000", "expires_date_ms": "1746100740000", "quantity": "1",
                "is_upgraded": "true", "cancellation_date_ms": "1744286340000"}
             ],
             "pending_renewal_info": [
               {"original_transaction_id": "5100000000000001", "product_id": "com.example.pro.monthly", "auto_renew_status": "1",
                "is_in_billing_retry_period": "1", "grace_period_expires_date_ms": "1747483140000"}
             ],
             "receipt": {"bundle_id": "com.example.subledger", "in_app": []}}
            """#
        try await withFake { fake, app in
            await fake.script("production", [#"{"status": 21007}"#])
            await fake.script("sandbox", [receipt])
            let response = try await app.client.post("/v1/subscribers/gina/receipts", Self.body)
            #expect(response.status == .ok, "\(response.text)")
            let history = try await app.client.get("/v1/subscribers/gina/history").json["events"]?.array ?? []
            #expect(history.map { $0["type"]?.string } == ["purchased", "renewed", "billing_issue"])
            // Cancelled by the upgrade, not refunded: paid until its end, then in grace.
            #expect(try await app.state("gina", at: "2025-04-20T00:00:00Z")["subscriptions"]?.array.first?["status"]?.string == "active")
            let inGrace = try await app.state("gina", at: "2025-05-05T00:00:00Z")
            #expect(inGrace["subscriptions"]?.array.first?["status"]?.string == "grace", "\(inGrace)")
            #expect(inGrace["entitlements"]?.array.first?["expiresAt"]?.string == "2025-05-17T11:59:00Z")
            #expect(inGrace["storeTransactions"]?.array.first?["isUpgraded"]?.bool == true)
            // Sent again: nothing new.
            let events = try await app.counts().events
            await fake.script("production", [#"{"status": 21007}"#])
            #expect(try await app.client.post("/v1/subscribers/gina/receipts", Self.body).status == .ok)
            #expect(try await app.counts().events == events)
        }
    }

    @Test func aProductionReceiptStaysInProduction() async throws {
        try await withFake { fake, app in
            await fake.script("production", [Self.validProduction])
            #expect(try await app.client.post("/v1/subscribers/dave/receipts", Self.body).status == .ok)
            #expect(await fake.calls("sandbox") == 0)
            let history = try await app.client.get("/v1/subscribers/dave/history").json["events"]?.array ?? []
            #expect(history.first?["data"]?["environment"]?.string == "Production")
        }
    }

    @Test(arguments: [
        #"{"status": 21002}"#, #"{"status": 21005}"#, #"{"status": 21009}"#,
        #"{"status": 21100, "is-retryable": true}"#, #"{"status": 21199, "is-retryable": true}"#,
    ])
    func temporaryStatusesAreRetried(_ temporary: String) async throws {
        try await withFake { fake, app in
            await fake.script("production", [temporary, temporary, Self.validProduction])
            let response = try await app.client.post("/v1/subscribers/erin/receipts", Self.body)
            #expect(response.status == .ok, "\(response.text)")
            #expect(await fake.calls("production") == 3)
        }
    }

    @Test func retriesGiveUpWithAServiceUnavailable() async throws {
        try await withFake { fake, app in
            await fake.script("production", [#"{"status": 21005}"#])
            let response = try await app.client.post("/v1/subscribers/erin/receipts", Self.body)
            #expect(response.status == .serviceUnavailable)
            #expect(response.error.code == "appstore_unavailable")
            #expect(await fake.calls("production") == 4)  // the first try and three retries
            #expect(try await app.counts().events == 0)
        }
    }

    @Test(arguments: [
        (#"{"status": 21003}"#, "receipt_invalid"),
        (#"{"status": 21004}"#, "receipt_shared_secret_mismatch"),
        (#"{"status": 21010}"#, "receipt_account_not_found"),
        (#"{"status": 21000}"#, "receipt_malformed"),
        (#"{"status": 21150, "is-retryable": false}"#, "receipt_rejected"),
        (#"{"status": 21199}"#, "receipt_rejected"),
    ])
    func terminalStatusesAreClearErrors(_ answer: String, _ code: String) async throws {
        try await withFake { fake, app in
            await fake.script("production", [answer])
            let response = try await app.client.post("/v1/subscribers/frank/receipts", Self.body)
            #expect(response.status == .unprocessableContent)
            #expect(response.error.code == code)
            #expect(response.json["error"]?["message"]?.string?.isEmpty == false)
            #expect(await fake.calls("production") == 1)
            #expect(try await app.counts().events == 0)
        }
    }

    @Test func aSandboxAnsweringProductionIsAnEnvironmentMismatch() async throws {
        try await withFake { fake, app in
            await fake.script("production", [#"{"status": 21007}"#])
            await fake.script("sandbox", [#"{"status": 21008}"#])
            let response = try await app.client.post("/v1/subscribers/frank/receipts", Self.body)
            #expect(response.status == .unprocessableContent)
            #expect(response.error.code == "receipt_environment_mismatch")
        }
    }

    @Test func anUnreachableAppStoreIsABadGateway() async throws {
        try await withFake({ fake, app in
            let response = try await app.client.post("/v1/subscribers/gina/receipts", Self.body)
            #expect(response.status == .badGateway)
            #expect(response.error.code == "appstore_unreachable")
        }, configure: { configuration, _ in
            // A port nothing listens on (the discard port is closed on loopback here).
            configuration.appStoreVerifyURL = "http://127.0.0.1:9/verifyReceipt"
            // The HTTP client keeps retrying a refused connection until the timeout.
            configuration.appStoreReceiptTimeout = .milliseconds(300)
        })
    }

    @Test func anAppStoreAnsweringGarbageIsABadGateway() async throws {
        try await withFake({ fake, app in
            await fake.script("production", ["<html>maintenance</html>"])
            let response = try await app.client.post("/v1/subscribers/gina/receipts", Self.body)
            #expect(response.status == .badGateway)
            #expect(await fake.calls("production") == 4)
        })
    }

    /// The request carries the shared secret: a redirect must not take it elsewhere.
    @Test func aRedirectIsNotFollowed() async throws {
        try await withFake({ fake, app in
            await fake.script("collector", [Self.validProduction])
            let response = try await app.client.post("/v1/subscribers/ivan/receipts", Self.body)
            #expect(response.status == .badGateway, "\(response.text)")
            #expect(await fake.calls("collector") == 0, "the receipt and the shared secret were re-sent to the redirect's target")
        }, configure: { configuration, baseURL in
            configuration.appStoreVerifyURL = baseURL + "/redirect"
        })
    }

    @Test func badBodiesAndKeysAreRefused() async throws {
        try await withFake { fake, app in
            let missing = try await app.client.post("/v1/subscribers/hank/receipts", #"{"deviceId": "x"}"#)
            #expect(missing.status == .badRequest)
            #expect(missing.error.field == "receiptData")
            #expect(try await app.client.post("/v1/subscribers/hank/receipts", "nope").status == .badRequest)
            #expect(try await app.client.post("/v1/subscribers/hank/receipts", Self.body, key: nil).status == .unauthorized)
            #expect(try await app.client.post("/v1/subscribers/hank/receipts", Self.body, key: Keys.support).status == .forbidden)
            #expect(await fake.calls("production") == 0)
        }
    }
}
