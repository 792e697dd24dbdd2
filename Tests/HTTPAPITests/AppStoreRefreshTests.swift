import AppStore
import AppStoreTesting
import Foundation
import Hummingbird
import HummingbirdTesting
import Ledger
import SubledgerApp
import SubledgerAppTesting
import Testing

/// Refresh from Get All Subscription Statuses.
struct AppStoreRefreshTests {
    static func statuses(_ api: AppStoreAPIApp, latest: TransactionInfo, autoRenew: Bool, status: Int = 1) throws -> FakeAppStoreServerAPI.Answer {
        var renewal = TestAppStore.renewalInfo(autoRenew: autoRenew, originalTransactionID: latest.originalTransactionID ?? latest.transactionID)
        // Apple signs the renewal info when it answers.
        renewal.signedDate = Date()
        return FakeAppStoreServerAPI.json([
            "environment": "Production", "bundleId": TestAppStore.bundleID, "appAppleId": 1234,
            "data": [["subscriptionGroupIdentifier": "21000000", "lastTransactions": [[
                "status": status, "originalTransactionId": latest.originalTransactionID ?? latest.transactionID,
                "signedTransactionInfo": try api.store.sign(latest), "signedRenewalInfo": try api.store.sign(renewal),
            ]]]],
        ])
    }

    @Test func refreshRecordsWhatTheLedgerLacks() async throws {
        try await withAppStoreAPI { api in
            let bought = try await api.client.post("/v1/subscribers/alice/events", purchaseJSON(
                "8700000000000001", product: "com.example.pro.monthly", at: "2025-03-01T11:59:00Z", expires: "2025-04-01T11:59:00Z"))
            #expect(bought.status == .created)
            // The renewal notification never arrived; Apple knows it.
            let renewed = productionTransaction("8700000000000002", original: "8700000000000001", purchase: "2025-04-01T11:59:00Z",
                                                expires: "2025-05-01T11:59:00Z", subscriber: "alice")
            await api.fake.script(.subscriptionStatuses, [try Self.statuses(api, latest: renewed, autoRenew: false)])
            let response = try await api.client.post("/v1/subscribers/alice/appstore/refresh", "", key: Keys.admin)
            #expect(response.status == .ok, "\(response.text)")
            #expect(response.json["originalTransactionIds"]?.array.map(\.string) == ["8700000000000001"])
            #expect(response.json["recorded"]?.array.count == 1)
            #expect(await api.fake.calls(.subscriptionStatuses).map(\.id) == ["8700000000000001"])
            let state = try await api.app.state("alice", at: "2025-04-15T00:00:00Z", environment: "Production")
            #expect(state["subscriptions"]?.array.first?["expiresAt"]?.string == "2025-05-01T11:59:00Z")
            #expect(state["subscriptions"]?.array.first?["autoRenew"]?.bool == false)
            let events = try await api.app.counts().events

            // Again: nothing new.
            let again = try await api.client.post("/v1/subscribers/alice/appstore/refresh", "", key: Keys.admin)
            #expect(again.json["recorded"]?.array.isEmpty == true)
            #expect(again.json["duplicates"]?.int ?? 0 >= 1)
            #expect(try await api.app.counts().events == events)

            // The subscriber turned auto-renew back on; that notification was lost too.
            await api.fake.script(.subscriptionStatuses, [try Self.statuses(api, latest: renewed, autoRenew: true)])
            let turnedOn = try await api.client.post("/v1/subscribers/alice/appstore/refresh", "", key: Keys.admin)
            #expect(turnedOn.json["recorded"]?.array.first?.string?.contains("auto-renew on") == true)
            let now = try await api.client.get("/v1/subscribers/alice").json
            #expect(now["subscriptions"]?.array.first?["autoRenew"]?.bool == true)

            #expect(try await api.client.post("/v1/subscribers/alice/appstore/refresh", "", key: Keys.support).status == .forbidden)
            #expect(try await api.client.post("/v1/subscribers/nobody/appstore/refresh", "", key: Keys.admin).status == .notFound)
        }
    }

    /// Apple not knowing one of the subscriber's originals (a fact recorded
    /// by hand, or of another environment) is an answer about that one, not
    /// a failure of Apple's: the others are refreshed and it is listed. It
    /// used to fail the whole refresh with 502.
    @Test func anOriginalAppleDoesNotKnowIsListedAndTheOthersAreRefreshed() async throws {
        try await withAppStoreAPI { api in
            for id in ["8700000000000021", "8700000000000031"] {
                let bought = try await api.client.post("/v1/subscribers/alice/events", purchaseJSON(
                    id, product: "com.example.pro.monthly", at: "2025-03-01T11:59:00Z", expires: "2025-04-01T11:59:00Z"))
                #expect(bought.status == .created)
            }
            let renewed = productionTransaction("8700000000000032", original: "8700000000000031", purchase: "2025-04-01T11:59:00Z",
                                                expires: "2025-05-01T11:59:00Z", subscriber: "alice")
            // Asked in order of their ids: Apple knows the first not, the second so.
            await api.fake.script(.subscriptionStatuses, [
                .init(status: 404, body: #"{"errorCode": 4040010, "errorMessage": "Transaction id not found."}"#),
                try Self.statuses(api, latest: renewed, autoRenew: true),
            ])
            let response = try await api.client.post("/v1/subscribers/alice/appstore/refresh", "", key: Keys.admin)
            #expect(response.status == .ok, "\(response.text)")
            #expect(response.json["originalTransactionIds"]?.array.map(\.string) == ["8700000000000021", "8700000000000031"])
            #expect(response.json["unknownToAppStore"]?.array.map(\.string) == ["8700000000000021"])
            #expect(response.json["recorded"]?.array.count == 1)
            #expect(await api.fake.calls(.subscriptionStatuses).map(\.id) == ["8700000000000021", "8700000000000031"])
        }
    }

    @Test func aRevokedSubscriptionIsRecordedByRefresh() async throws {
        try await withAppStoreAPI { api in
            _ = try await api.client.post("/v1/subscribers/alice/events", purchaseJSON(
                "8700000000000011", product: "com.example.pro.monthly", at: "2025-03-01T11:59:00Z", expires: "2025-04-01T11:59:00Z"))
            var revoked = productionTransaction("8700000000000011", subscriber: "alice")
            revoked.revocationDate = TestAppStore.date("2025-03-10T00:00:00Z")
            revoked.revocationReason = 0
            await api.fake.script(.subscriptionStatuses, [try Self.statuses(api, latest: revoked, autoRenew: false, status: 5)])
            let report = try await api.appStore.refresh(subscriberID: "alice")
            #expect(report.recorded.contains { $0.contains("revocation") })
            let state = try await api.app.state("alice", at: "2025-03-15T00:00:00Z", environment: "Production")
            #expect(state["subscriptions"]?.array.first?["status"]?.string == "revoked")
        }
    }
}
