import AppStoreTesting
import AppStore
import Foundation
import Hummingbird
import HummingbirdTesting
import Ledger
import Postgres
import HTTPAPI
import SubledgerApp
import SubledgerAppTesting
import Testing

/// Retries, order and attribution of App Store notifications.
extension AppStoreNotificationTests {
    // MARK: Retries, order, attribution

    @Test func aRetriedNotificationIsAppliedOnce() async throws {
        try await withAppStore { app in
            let signed = try Self.good.signedNotification(.subscribed, .initialBuy, transaction: first, renewal: renewal(), uuid: "retry-1")
            let once = try await app.post(signed)
            #expect(once.json["duplicate"]?.bool == false)
            let counts = try await app.counts()
            #expect(counts == Counts(events: 1, notifications: 1))
            for _ in 0..<3 {
                let again = try await app.post(signed)
                #expect(again.status == .ok)
                #expect(again.json["duplicate"]?.bool == true)
                #expect(again.json["status"]?.string == "applied")
            }
            // Concurrent copies too.
            let renewedSigned = try Self.good.signedNotification(.didRenew, transaction: second, renewal: renewal(), uuid: "retry-2")
            try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<4 { group.addTask { Int(try await app.post(renewedSigned).status.code) } }
                for try await status in group { #expect(status == 200) }
            }
            #expect(try await app.counts() == Counts(events: 2, notifications: 2))
        }
    }

    @Test func anOutOfOrderPairEndsInTheNewerState() async throws {
        try await withAppStore { app in
            // The renewal arrives before the initial purchase it follows.
            _ = try await app.notify(.didRenew, transaction: second, renewal: renewal(), signedDate: "2025-04-01T12:00:00Z")
            _ = try await app.notify(.subscribed, .initialBuy, transaction: first, renewal: renewal(), signedDate: "2025-03-01T12:00:00Z")
            let state = try await app.state(alice, at: "2025-04-15T00:00:00Z")
            #expect(state["subscriptions"]?.array.first?["expiresAt"]?.string == "2025-05-01T11:59:00Z")
            #expect(state["subscriptions"]?.array.first?["status"]?.string == "active")
            // Auto-renew turned off later, a stale "on" delivered after it.
            _ = try await app.notify(.didChangeRenewalStatus, .autoRenewDisabled, transaction: second, renewal: renewal(autoRenew: false),
                                     signedDate: "2025-04-10T00:00:00Z")
            _ = try await app.notify(.didChangeRenewalStatus, .autoRenewEnabled, transaction: second, renewal: renewal(),
                                     signedDate: "2025-04-05T00:00:00Z")
            #expect(try await app.state(alice, at: "2025-04-15T00:00:00Z")["subscriptions"]?.array.first?["autoRenew"]?.bool == false)
        }
    }

    @Test func anUnattributedNotificationIsAppliedWhenItsOriginalIsClaimed() async throws {
        try await withAppStore { app in
            var renewal = TestAppStore.subscription(transactionID: "3000000000000002", originalTransactionID: "3000000000000001",
                                                    purchaseDate: TestAppStore.date("2025-04-01T11:59:00Z"),
                                                    expiresDate: TestAppStore.date("2025-05-01T11:59:00Z"))
            renewal.appAccountToken = nil
            let pending = try await app.notify(.didRenew, transaction: renewal, signedDate: "2025-04-01T12:00:00Z")
            #expect(pending.status == .ok)
            #expect(pending.json["status"]?.string == "pending")
            #expect(try await app.counts() == Counts(events: 0, notifications: 1))
            #expect(try await app.row(pending.json["notificationUUID"]?.string ?? "").dropFirst(3).prefix(3) == ["", "unattributed", "pending"])

            // The app's backend records the original purchase for bob, in the
            // notification's environment (ownership is per environment): the
            // claim applies the renewal.
            let claimed = try await app.client.post("/v1/subscribers/bob/events", purchaseJSON(
                "3000000000000001", product: "com.example.pro.monthly", at: "2025-03-01T11:59:00Z", expires: "2025-04-01T11:59:00Z",
                environment: "Sandbox"))
            #expect(claimed.status == .created)
            let history = try await app.client.get("/v1/subscribers/bob/history").json["events"]?.array ?? []
            #expect(history.map { $0["type"]?.string } == ["purchased", "renewed"])
            #expect(try await app.row(pending.json["notificationUUID"]?.string ?? "").dropFirst(3).prefix(4) == ["bob", "transaction_owner", "applied", "true"])
            #expect(try await app.state("bob", at: "2025-04-15T00:00:00Z")["subscriptions"]?.array.first?["expiresAt"]?.string
                    == "2025-05-01T11:59:00Z")

            // Later notifications about it go straight to the owner.
            var off = renewal
            off.transactionID = "3000000000000002"
            let next = try await app.notify(.didChangeRenewalStatus, .autoRenewDisabled, transaction: off,
                                            renewal: TestAppStore.renewalInfo(autoRenew: false, originalTransactionID: "3000000000000001"),
                                            signedDate: "2025-04-05T00:00:00Z")
            #expect(next.json["status"]?.string == "applied")
            #expect(next.json["subscriberId"]?.string == "bob")
        }
    }

    /// The same as above when the original arrives through `subledger import`.
    @Test func anImportThatClaimsTheOriginalAppliesTheWaitingNotification() async throws {
        try await withAppStore { app in
            var renewal = TestAppStore.subscription(transactionID: "3100000000000002", originalTransactionID: "3100000000000001",
                                                    purchaseDate: TestAppStore.date("2025-04-01T11:59:00Z"),
                                                    expiresDate: TestAppStore.date("2025-05-01T11:59:00Z"))
            renewal.appAccountToken = nil
            let pending = try await app.notify(.didRenew, transaction: renewal, signedDate: "2025-04-01T12:00:00Z")
            #expect(pending.json["status"]?.string == "pending")

            var importer = Importer(pool: app.dependencies.pool, store: app.dependencies.store,
                                    catalog: app.dependencies.catalog.catalog, restorePolicy: .transfer, logger: app.dependencies.logger)
            importer.claimObserver = AppStoreIntegration(app.dependencies).claimObserver
            let line = #"{"subscriberId": "carol", "type": "purchase", "transactionId": "3100000000000001", "productId": "com.example.pro.monthly", "purchaseDate": "2025-03-01T11:59:00Z", "expiresDate": "2025-04-01T11:59:00Z", "environment": "Sandbox"}"#
            let summary = try await importer.importLines([ImportLine(number: 1, text: Data(line.utf8))])
            #expect(summary.imported == 1)
            let history = try await app.client.get("/v1/subscribers/carol/history").json["events"]?.array ?? []
            #expect(history.map { $0["type"]?.string } == ["purchased", "renewed"])
            #expect(try await app.row(pending.json["notificationUUID"]?.string ?? "").dropFirst(3).prefix(4) == ["carol", "transaction_owner", "applied", "true"])
        }
    }

    @Test func aNotificationBeforeItsPurchaseRecordsThePurchaseItCarries() async throws {
        try await withAppStore { app in
            // Attributed by the token; the purchase it is about has not arrived
            // yet, but the notification carries its signed transaction.
            let early = try await app.notify(.didChangeRenewalStatus, .autoRenewDisabled, transaction: first,
                                             renewal: renewal(autoRenew: false), signedDate: "2025-03-10T00:00:00Z")
            #expect(early.status == .ok)
            #expect(early.json["status"]?.string == "applied")
            let late = try await app.notify(.subscribed, .initialBuy, transaction: first, renewal: renewal(), signedDate: "2025-03-01T12:00:00Z")
            #expect(late.json["status"]?.string == "applied")
            let history = try await app.client.get("/v1/subscribers/\(alice)/history").json["events"]?.array ?? []
            #expect(history.map { $0["type"]?.string } == ["purchased", "auto_renew_changed"])
            #expect(try await app.state(alice, at: "2025-03-11T00:00:00Z")["subscriptions"]?.array.first?["autoRenew"]?.bool == false)
        }
    }

    @Test func withoutRootsTheEndpointSaysWhatIsMissing() async throws {
        try await withApp { client, _ in
            let response = try await client.post("/v1/appstore/notifications", #"{"signedPayload": "x"}"#, key: nil)
            #expect(response.status == .serviceUnavailable)
            #expect(response.error.code == "appstore_not_configured")
            #expect(response.json["error"]?["message"]?.string?.contains("SUBLEDGER_APPSTORE_ROOT_CERTS") == true)
        }
    }
}
