import AppStore
import AppStoreTesting
import Foundation
import Hummingbird
import HummingbirdTesting
import Ledger
import SubledgerApp
import SubledgerAppTesting
import Testing

/// `POST /v1/subscribers/{id}/restore` with `signedTransactions`, and plain
/// restores checked with Get Transaction History (`SUBLEDGER_RESTORE_VERIFY=api`).
struct AppStoreRestoreTests {
    static func signedRestore(_ jws: [String], device: String = "alices-ipad") -> String {
        let body: [String: Any] = ["deviceId": device, "signedTransactions": jws]
        return String(decoding: try! JSONSerialization.data(withJSONObject: body), as: UTF8.self)
    }

    static func plainRestore(_ transactionID: String, product: String = "com.example.pro.monthly") -> String {
        """
        {"deviceId": "alices-ipad", "transactions": [{"transactionId": "\(transactionID)", "productId": "\(product)",
          "purchaseDate": "2025-03-01T11:59:00Z", "expiresDate": "2030-01-01T00:00:00Z"}]}
        """
    }

    /// Bob buys the subscription through the app's backend.
    static func bobBuys(_ api: AppStoreAPIApp, _ transactionID: String) async throws {
        let response = try await api.client.post("/v1/subscribers/bob/events", purchaseJSON(
            transactionID, product: "com.example.pro.monthly", at: "2025-03-01T11:59:00Z", expires: "2025-04-01T11:59:00Z"))
        #expect(response.status == .created, "\(response.text)")
    }

    static func owner(_ api: AppStoreAPIApp, _ transactionID: String) async throws -> String? {
        try await api.client.get("/v1/transactions/\(transactionID)", key: Keys.support).json["subscriberId"]?.string
    }

    @Test func aVerifiedRestoreMovesOwnership() async throws {
        try await withAppStoreAPI { api in
            try await Self.bobBuys(api, "8500000000000001")
            let signed = try api.store.sign(productionTransaction("8500000000000001", subscriber: nil))
            let response = try await api.client.post("/v1/subscribers/alice/restore", Self.signedRestore([signed]))
            #expect(response.status == .ok, "\(response.text)")
            #expect(try await Self.owner(api, "8500000000000001") == "alice")
            let bobs = try await api.client.get("/v1/subscribers/bob/history").json["events"]?.array ?? []
            #expect(bobs.contains { $0["type"]?.string == "transferred_out" })
            #expect(response.json["devices"]?.array.first?["id"]?.string == "alices-ipad")
        }
    }

    @Test func aForgedSignedTransactionIsRefusedAndNothingStored() async throws {
        try await withAppStoreAPI { api in
            try await Self.bobBuys(api, "8500000000000002")
            let before = try await api.app.counts()
            let good = try api.store.sign(productionTransaction("8500000000000002", subscriber: nil))
            let forged = try AppStoreNotificationTests.stranger.sign(productionTransaction("8500000000000002", subscriber: nil))
            let refused = try await api.client.post("/v1/subscribers/alice/restore", Self.signedRestore([good, forged]))
            #expect(refused.status == .badRequest)
            #expect(refused.error.code == "untrusted_root")
            #expect(refused.error.field == "signedTransactions[1]")

            // Apple's signature over another payload: the signature fails.
            let parts = good.split(separator: ".")
            var edited = productionTransaction("8500000000000002", subscriber: nil)
            edited.expiresDate = TestAppStore.date("2035-01-01T00:00:00Z")
            let swapped = parts[0] + "." + String(try api.store.sign(edited).split(separator: ".")[1]) + "." + parts[2]
            let tampered = try await api.client.post("/v1/subscribers/alice/restore", Self.signedRestore([swapped]))
            #expect(tampered.status == .badRequest)
            #expect(tampered.error.code == "invalid_signature")

            for body in [#"{"signedTransactions": [3]}"#, #"{"signedTransactions": []}"#, #"{"signedTransactions": ["a.b"]}"#,
                         #"{"signedTransactions": ["\#(good)"], "transactions": []}"#] {
                #expect(try await api.client.post("/v1/subscribers/alice/restore", body).status == .badRequest, "\(body.prefix(60))")
            }
            #expect(try await api.app.counts() == before)
            #expect(try await Self.owner(api, "8500000000000002") == "bob")
        }
    }

    @Test func aPlainRestoreIsCheckedWithTransactionHistory() async throws {
        try await withAppStoreAPI(configure: { $0.restoreVerification = .api }) { api in
            try await Self.bobBuys(api, "8600000000000001")
            await api.fake.script(.transactionHistory, [FakeAppStoreServerAPI.transactions([
                try api.store.sign(productionTransaction("8600000000000001", subscriber: nil)),
            ])])
            let response = try await api.client.post("/v1/subscribers/alice/restore", Self.plainRestore("8600000000000001"))
            #expect(response.status == .ok, "\(response.text)")
            #expect(try await Self.owner(api, "8600000000000001") == "alice")
            let calls = await api.fake.calls(.transactionHistory)
            #expect(calls.map(\.id) == ["8600000000000001"])
            #expect(calls.first?.query.contains("productId=com.example.pro.monthly") == true)
        }
    }

    @Test func aPlainRestoreAppleDoesNotConfirmMovesNothing() async throws {
        try await withAppStoreAPI(configure: { $0.restoreVerification = .api }) { api in
            try await Self.bobBuys(api, "8600000000000002")
            let before = try await api.app.counts()
            // Apple does not know the transaction (the fake's default: 404 TransactionIdNotFoundError).
            let unknown = try await api.client.post("/v1/subscribers/alice/restore", Self.plainRestore("8600000000000002"))
            #expect(unknown.status == .unprocessableContent)
            #expect(unknown.error.code == "restore_not_verified")
            #expect(unknown.error.field == "transactions[0].transactionId")

            // Apple knows it as another product than the client says.
            await api.fake.script(.transactionHistory, [FakeAppStoreServerAPI.transactions([
                try api.store.sign(productionTransaction("8600000000000002", subscriber: nil)),
            ])])
            let mismatch = try await api.client.post("/v1/subscribers/alice/restore",
                                                     Self.plainRestore("8600000000000002", product: "com.example.level2"))
            #expect(mismatch.status == .unprocessableContent)
            #expect(mismatch.error.code == "restore_not_verified")
            #expect(try await api.app.counts() == before)
            #expect(try await Self.owner(api, "8600000000000002") == "bob")
        }
    }

    @Test func withoutVerificationAPlainRestoreAsksNothing() async throws {
        try await withAppStoreAPI { api in
            try await Self.bobBuys(api, "8600000000000003")
            let response = try await api.client.post("/v1/subscribers/alice/restore", Self.plainRestore("8600000000000003"))
            #expect(response.status == .ok, "\(response.text)")
            #expect(await api.fake.calls(.transactionHistory).isEmpty)
        }
    }
}
