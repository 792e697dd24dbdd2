import AppStoreTesting
import AppStore
import Foundation
import Hummingbird
import HummingbirdTesting
import JSON
import Ledger
import Postgres
import HTTPAPI
import SubledgerApp
import SubledgerAppTesting
import Testing

/// Apple's subscription lifecycles as Apple documents them, each through the
/// router with signed notifications, read back with `?at=` at instants
/// inside the situation.
extension AppStoreNotificationTests {
    /// One auto-renewable period of the lifecycle tests' subscription.
    func period(_ transactionID: String, _ start: String, _ end: String, original: String = "4000000000000001",
                product: String = "com.example.pro.monthly") -> TransactionInfo {
        TestAppStore.subscription(transactionID: transactionID, originalTransactionID: original, productID: product,
                                  purchaseDate: TestAppStore.date(start), expiresDate: TestAppStore.date(end))
    }

    func renewalInfo(autoRenew: Bool = true, grace: String? = nil, original: String = "4000000000000001") -> RenewalInfo {
        TestAppStore.renewalInfo(autoRenew: autoRenew, gracePeriodExpiresDate: grace.map(TestAppStore.date),
                                 originalTransactionID: original)
    }

    func subscription(_ state: JSONValue) -> JSONValue? { state["subscriptions"]?.array.first }
    func entitlement(_ state: JSONValue, _ id: String = "pro") -> JSONValue? {
        state["entitlements"]?.array.first { $0["id"]?.string == id }
    }

    // MARK: Grace and billing retry

    /// The grace period starts at `expiresDate` and lasts to
    /// `gracePeriodExpiresDate`, whenever DID_FAIL_TO_RENEW arrives: Apple
    /// signs it after the renewal failed, often hours after the expiry.
    /// https://developer.apple.com/documentation/appstoreservernotifications/notificationtype (DID_FAIL_TO_RENEW, GRACE_PERIOD)
    /// https://developer.apple.com/documentation/appstoreservernotifications/graceperiodexpiresdate
    @Test func graceRunsFromTheExpiryWheneverTheBillingIssueArrives() async throws {
        try await withAppStore { app in
            let first = period("4000000000000001", "2025-03-01T11:59:00Z", "2025-04-01T11:59:00Z")
            _ = try await app.notify(.subscribed, .initialBuy, transaction: first, renewal: renewalInfo(),
                                     signedDate: "2025-03-01T12:00:00Z")
            _ = try await app.notify(.didFailToRenew, .gracePeriod, transaction: first,
                                     renewal: renewalInfo(grace: "2025-04-17T11:59:00Z"), signedDate: "2025-04-01T18:00:00Z")
            // Between the expiry and the notification, and after it: grace, entitled until the grace end.
            for at in ["2025-04-01T11:59:00Z", "2025-04-01T13:00:00Z", "2025-04-10T00:00:00Z", "2025-04-17T11:58:59Z"] {
                let state = try await app.state(alice, at: at)
                #expect(subscription(state)?["status"]?.string == "grace", "at \(at): \(state)")
                #expect(entitlement(state)?["active"]?.bool == true, "at \(at)")
                #expect(entitlement(state)?["expiresAt"]?.string == "2025-04-17T11:59:00Z", "at \(at)")
            }
            #expect(subscription(try await app.state(alice, at: "2025-04-01T11:58:00Z"))?["status"]?.string == "active")
            let after = try await app.state(alice, at: "2025-04-17T11:59:00Z")
            #expect(subscription(after)?["status"]?.string == "expired")
            #expect(entitlement(after)?["active"]?.bool == false)
            // A later EXPIRED/BILLING_RETRY dated at the period's end does not take the grace back.
            _ = try await app.notify(.expired, .billingRetry, transaction: first, renewal: renewalInfo(autoRenew: false),
                                     signedDate: "2025-05-31T12:00:00Z")
            #expect(subscription(try await app.state(alice, at: "2025-04-05T00:00:00Z"))?["status"]?.string == "grace")
            #expect(subscription(try await app.state(alice, at: "2025-06-01T00:00:00Z"))?["status"]?.string == "expired")
        }
    }

    /// Billing retry without a grace period: no access from `expiresDate`.
    /// https://developer.apple.com/documentation/appstoreservernotifications/notificationtype (DID_FAIL_TO_RENEW)
    @Test func billingRetryWithoutGraceEndsAccessAtTheExpiry() async throws {
        try await withAppStore { app in
            let first = period("4000000000000001", "2025-03-01T11:59:00Z", "2025-04-01T11:59:00Z")
            _ = try await app.notify(.subscribed, .initialBuy, transaction: first, renewal: renewalInfo())
            _ = try await app.notify(.didFailToRenew, transaction: first, renewal: renewalInfo(), signedDate: "2025-04-01T18:00:00Z")
            let state = try await app.state(alice, at: "2025-04-01T13:00:00Z")
            #expect(subscription(state)?["status"]?.string == "expired")
            #expect(entitlement(state)?["active"]?.bool == false)
        }
    }

    /// A renewal info in grace, on any notification, puts the subscription
    /// in grace even when DID_FAIL_TO_RENEW itself never arrived.
    /// https://developer.apple.com/documentation/appstoreservernotifications/jwsrenewalinfodecodedpayload
    @Test func aRenewalInfoInGraceOnAnotherNotificationGivesGrace() async throws {
        try await withAppStore { app in
            let first = period("4000000000000001", "2025-03-01T11:59:00Z", "2025-04-01T11:59:00Z")
            _ = try await app.notify(.subscribed, .initialBuy, transaction: first, renewal: renewalInfo())
            _ = try await app.notify(.didChangeRenewalPreference, .downgrade, transaction: first,
                                     renewal: renewalInfo(grace: "2025-04-07T11:59:00Z"), signedDate: "2025-04-02T00:00:00Z")
            #expect(subscription(try await app.state(alice, at: "2025-04-03T00:00:00Z"))?["status"]?.string == "grace")
        }
    }

    // MARK: Every notification carries the latest transaction

    /// A missed DID_RENEW: the next notification of any type carries the
    /// renewal's signed transaction, and the ledger records it first.
    /// https://developer.apple.com/documentation/appstoreservernotifications/data (signedTransactionInfo)
    @Test func aMissedRenewalIsRecordedFromTheNextNotificationOfAnyType() async throws {
        try await withAppStore { app in
            let first = period("4000000000000001", "2025-03-01T11:59:00Z", "2025-04-01T11:59:00Z")
            let second = period("4000000000000002", "2025-04-01T11:59:00Z", "2025-05-01T11:59:00Z")
            _ = try await app.notify(.subscribed, .initialBuy, transaction: first, renewal: renewalInfo())
            // DID_RENEW for `second` never arrives.
            _ = try await app.notify(.didChangeRenewalStatus, .autoRenewDisabled, transaction: second,
                                     renewal: renewalInfo(autoRenew: false), signedDate: "2025-04-10T00:00:00Z")
            let state = try await app.state(alice, at: "2025-04-15T00:00:00Z")
            #expect(subscription(state)?["status"]?.string == "active", "\(state)")
            #expect(subscription(state)?["expiresAt"]?.string == "2025-05-01T11:59:00Z")
            #expect(subscription(state)?["autoRenew"]?.bool == false)
            let history = try await app.client.get("/v1/subscribers/\(alice)/history").json["events"]?.array ?? []
            #expect(history.map { $0["type"]?.string } == ["purchased", "renewed", "auto_renew_changed"])
        }
    }

    /// EXPIRED carries the last paid transaction: a paid month whose
    /// DID_RENEW was missed is not cut short.
    /// https://developer.apple.com/documentation/appstoreservernotifications/notificationtype (EXPIRED)
    @Test func anExpiryCarryingAMissedRenewalKeepsThePaidMonth() async throws {
        try await withAppStore { app in
            let first = period("4000000000000001", "2025-03-01T11:59:00Z", "2025-04-01T11:59:00Z")
            let second = period("4000000000000002", "2025-04-01T11:59:00Z", "2025-05-01T11:59:00Z")
            _ = try await app.notify(.subscribed, .initialBuy, transaction: first, renewal: renewalInfo())
            _ = try await app.notify(.expired, .voluntary, transaction: second, renewal: renewalInfo(autoRenew: false),
                                     signedDate: "2025-05-01T12:00:00Z")
            #expect(subscription(try await app.state(alice, at: "2025-04-15T00:00:00Z"))?["status"]?.string == "active")
            #expect(subscription(try await app.state(alice, at: "2025-05-02T00:00:00Z"))?["status"]?.string == "expired")
        }
    }

    /// A crossgrade takes effect at once with a new transaction, which
    /// DID_CHANGE_RENEWAL_PREF carries.
    /// https://developer.apple.com/documentation/appstoreservernotifications/notificationtype (DID_CHANGE_RENEWAL_PREF)
    @Test func aChangeOfPreferenceCarryingANewTransactionRecordsIt() async throws {
        try await withAppStore { app in
            let first = period("4000000000000001", "2025-03-01T11:59:00Z", "2025-04-01T11:59:00Z")
            var crossgrade = period("4000000000000003", "2025-03-10T00:00:00Z", "2025-04-10T00:00:00Z")
            crossgrade.webOrderLineItemID = "4000000000000103"
            _ = try await app.notify(.subscribed, .initialBuy, transaction: first, renewal: renewalInfo())
            _ = try await app.notify(.didChangeRenewalPreference, transaction: crossgrade, renewal: renewalInfo(),
                                     signedDate: "2025-03-10T00:00:01Z")
            let state = try await app.state(alice, at: "2025-04-05T00:00:00Z")
            #expect(subscription(state)?["status"]?.string == "active", "\(state)")
            #expect(subscription(state)?["expiresAt"]?.string == "2025-04-10T00:00:00Z")
        }
    }

    // MARK: One purchase, many copies

    /// A StoreKit 1 restore gives a non-consumable a new transaction id with
    /// the same original: a refund of the purchase revokes every copy.
    /// https://developer.apple.com/documentation/storekit/transaction/originalid
    /// https://developer.apple.com/documentation/appstoreservernotifications/notificationtype (REFUND)
    @Test func aRefundRevokesEveryRestoredCopyOfThePurchase() async throws {
        try await withAppStore { app in
            #expect(try await app.client.post("/v1/subscribers/carol/events", purchaseJSON(
                "7000000000000001", product: "com.example.level2", at: "2025-03-01T00:00:00Z")).status == .created)
            let restore = """
                {"deviceId": "ipad", "transactions": [{"transactionId": "7000000000000002", "originalTransactionId": "7000000000000001",
                 "productId": "com.example.level2", "purchaseDate": "2025-03-05T00:00:00Z"}]}
                """
            #expect(try await app.client.post("/v1/subscribers/carol/restore", restore).status == .ok)
            var refunded = TestAppStore.subscription(transactionID: "7000000000000001", originalTransactionID: "7000000000000001",
                                                     productID: "com.example.level2", revocationDate: TestAppStore.date("2025-03-10T00:00:00Z"),
                                                     revocationReason: 0)
            refunded.type = .nonConsumable
            refunded.expiresDate = nil
            refunded.appAccountToken = nil
            refunded.environment = .production
            let response = try await app.post(try Self.good.signedNotification(.refund, transaction: refunded, environment: .production,
                                                                               signedDate: TestAppStore.date("2025-03-10T00:00:01Z")))
            #expect(response.json["status"]?.string == "applied", "\(response.text)")
            let state = try await app.state("carol", at: "2025-03-11T00:00:00Z", environment: "Production")
            #expect(entitlement(state, "level2")?["active"]?.bool == false, "\(state)")
            #expect(state["purchases"]?.array.allSatisfy { $0["revokedAt"]?.string == "2025-03-10T00:00:00Z" } == true)
            #expect(entitlement(try await app.state("carol", at: "2025-03-09T00:00:00Z", environment: "Production"), "level2")?["active"]?.bool
                    == true)
        }
    }

    /// A refund naming the original of a purchase the ledger knows only
    /// through a restored copy applies to the copy.
    @Test func aRefundOfAnOriginalKnownOnlyThroughCopiesApplies() async throws {
        try await withAppStore { app in
            let restore = """
                {"deviceId": "ipad", "transactions": [{"transactionId": "7100000000000002", "originalTransactionId": "7100000000000001",
                 "productId": "com.example.level2", "purchaseDate": "2025-03-05T00:00:00Z"}]}
                """
            #expect(try await app.client.post("/v1/subscribers/dave/restore", restore).status == .ok)
            let refund = #"{"type": "refund", "transactionId": "7100000000000001", "originalTransactionId": "7100000000000001", "revocationDate": "2025-03-10T00:00:00Z"}"#
            let response = try await app.client.post("/v1/subscribers/dave/events", refund)
            #expect(response.status == .created, "\(response.text)")
            let state = try await app.state("dave", at: "2025-03-11T00:00:00Z", environment: "Production")
            #expect(entitlement(state, "level2")?["active"]?.bool == false, "\(state)")
        }
    }

    // MARK: Refunds follow ownership

    /// After a restore moved a purchase to another subscriber, Apple's REFUND
    /// still carries the buyer's `appAccountToken`: it applies to the owner.
    /// https://developer.apple.com/documentation/appstoreservernotifications/appaccounttoken
    @Test func aRefundAfterATransferAppliesToTheNewOwner() async throws {
        try await withAppStore { app in
            let first = period("4000000000000001", "2025-03-01T11:59:00Z", "2025-04-01T11:59:00Z")
            _ = try await app.notify(.subscribed, .initialBuy, transaction: first, renewal: renewalInfo())
            let restore = """
                {"deviceId": "bobs-phone", "environment": "Sandbox", "transactions": [{"transactionId": "4000000000000001",
                 "originalTransactionId": "4000000000000001", "productId": "com.example.pro.monthly",
                 "purchaseDate": "2025-03-01T11:59:00Z", "expiresDate": "2025-04-01T11:59:00Z"}]}
                """
            #expect(try await app.client.post("/v1/subscribers/bob/restore", restore).status == .ok)
            var refunded = first
            refunded.revocationDate = TestAppStore.date("2025-03-15T00:00:00Z")
            refunded.revocationReason = 1
            let response = try await app.notify(.refund, transaction: refunded, renewal: renewalInfo(autoRenew: false),
                                                signedDate: "2025-03-15T00:00:01Z")
            #expect(response.json["status"]?.string == "applied", "\(response.text)")
            #expect(response.json["subscriberId"]?.string == "bob")
            // The transfer is dated when the restore was made (now); the refund applies to bob from then on.
            let bob = try await app.state("bob", at: "2030-01-01T00:00:00Z")
            #expect(subscription(bob)?["status"]?.string == "revoked", "\(bob)")
            #expect(entitlement(bob)?["active"]?.bool == false)
            #expect(try await app.row(response.json["notificationUUID"]?.string ?? "")[3...5] == ["bob", "transaction_owner", "applied"])
        }
    }

    // MARK: Refund idempotency is per refund

    /// Refund, reversal, refund again: access ends again.
    /// https://developer.apple.com/documentation/appstoreservernotifications/notificationtype (REFUND_REVERSED)
    @Test func aSecondRefundAfterAReversalEndsAccessAgain() async throws {
        try await withAppStore { app in
            #expect(try await app.client.post("/v1/subscribers/erin/events", purchaseJSON(
                "7200000000000001", product: "com.example.level2", at: "2025-03-01T00:00:00Z")).status == .created)
            var sale = TestAppStore.subscription(transactionID: "7200000000000001", originalTransactionID: "7200000000000001",
                                                 productID: "com.example.level2")
            sale.type = .nonConsumable
            sale.expiresDate = nil
            sale.appAccountToken = "erin"
            sale.environment = .production
            func send(_ type: NotificationType, revoked: String?, signed: String) async throws {
                var transaction = sale
                transaction.revocationDate = revoked.map(TestAppStore.date)
                let response = try await app.post(try Self.good.signedNotification(type, transaction: transaction, environment: .production,
                                                                                   signedDate: TestAppStore.date(signed)))
                #expect(response.json["status"]?.string == "applied", "\(type): \(response.text)")
            }
            try await send(.refund, revoked: "2025-03-10T00:00:00Z", signed: "2025-03-10T00:00:01Z")
            try await send(.refundReversed, revoked: nil, signed: "2025-03-12T00:00:00Z")
            try await send(.refund, revoked: "2025-03-20T00:00:00Z", signed: "2025-03-20T00:00:01Z")
            func active(_ at: String) async throws -> Bool? {
                entitlement(try await app.state("erin", at: at, environment: "Production"), "level2")?["active"]?.bool
            }
            #expect(try await active("2025-03-11T00:00:00Z") == false)
            #expect(try await active("2025-03-15T00:00:00Z") == true)
            #expect(try await active("2025-03-21T00:00:00Z") == false)
        }
    }

    // MARK: Expiry without a date

    /// An expiry without a date ends at the latest end the ledger knows for
    /// the original, the developer's extension included.
    /// https://developer.apple.com/documentation/appstoreservernotifications/notificationtype (RENEWAL_EXTENDED)
    @Test func anUndatedExpiryEndsAtTheExtendedEnd() async throws {
        try await withAppStore { app in
            let first = period("4000000000000001", "2025-03-01T11:59:00Z", "2025-04-01T11:59:00Z")
            _ = try await app.notify(.subscribed, .initialBuy, transaction: first, renewal: renewalInfo())
            let extended = period("4000000000000001", "2025-03-01T11:59:00Z", "2025-04-15T11:59:00Z")
            _ = try await app.notify(.renewalExtended, transaction: extended, renewal: renewalInfo(), signedDate: "2025-03-20T00:00:00Z")
            let expiry = #"{"type": "expiry", "originalTransactionId": "4000000000000001", "environment": "Sandbox"}"#
            let response = try await app.client.post("/v1/subscribers/\(alice)/events", expiry)
            #expect(response.status == .created, "\(response.text)")
            let history = try await app.client.get("/v1/subscribers/\(alice)/history").json["events"]?.array ?? []
            #expect(history.last?["type"]?.string == "expired")
            #expect(history.last?["data"]?["expiresDate"]?.string == "2025-04-15T11:59:00Z")
            #expect(subscription(try await app.state(alice, at: "2025-04-10T00:00:00Z"))?["status"]?.string == "active")
        }
    }

    // MARK: Ownership is per environment

    /// Sandbox (and Xcode, local testing) never touches a Production
    /// purchase: restores, purchases and notifications naming a Production
    /// original transaction from the Sandbox claim nothing of it.
    /// https://developer.apple.com/documentation/appstoreservernotifications/environment
    @Test func sandboxNeverTakesAProductionPurchase() async throws {
        try await withAppStore { app in
            #expect(try await app.client.post("/v1/subscribers/paying/events", purchaseJSON(
                "7300000000000001", product: "com.example.level2", at: "2025-03-01T00:00:00Z")).status == .created)
            func payingHasIt() async throws -> Bool? {
                entitlement(try await app.state("paying", at: "2025-03-20T00:00:00Z", environment: "Production"), "level2")?["active"]?.bool
            }
            let restore = """
                {"deviceId": "attacker", "environment": "Sandbox", "transactions": [{"transactionId": "7300000000000001",
                 "originalTransactionId": "7300000000000001", "productId": "com.example.level2", "purchaseDate": "2025-03-02T00:00:00Z"}]}
                """
            #expect(try await app.client.post("/v1/subscribers/mallory/restore", restore).status == .ok)
            #expect(try await payingHasIt() == true)
            let purchase = #"{"type": "purchase", "transactionId": "7300000000000009", "originalTransactionId": "7300000000000001", "productId": "com.example.level2", "purchaseDate": "2025-03-03T00:00:00Z", "environment": "Sandbox"}"#
            #expect(try await app.client.post("/v1/subscribers/mallory/events", purchase).status == .created)
            #expect(try await payingHasIt() == true)
            // A Sandbox notification about it, naming mallory.
            var sandboxed = TestAppStore.subscription(transactionID: "7300000000000001", originalTransactionID: "7300000000000001",
                                                      productID: "com.example.level2", revocationDate: TestAppStore.date("2025-03-05T00:00:00Z"))
            sandboxed.type = .nonConsumable
            sandboxed.expiresDate = nil
            sandboxed.appAccountToken = "mallory"
            _ = try await app.post(try Self.good.signedNotification(.refund, transaction: sandboxed, environment: .sandbox,
                                                                    signedDate: TestAppStore.date("2025-03-05T00:00:01Z")))
            #expect(try await payingHasIt() == true)
            let owner = try await app.client.get("/v1/transactions/7300000000000001", key: Keys.support)
            #expect(owner.json["subscriberId"]?.string == "paying", "\(owner.text)")
            // Mallory has a Sandbox copy only.
            #expect(entitlement(try await app.state("mallory", at: "2025-03-04T00:00:00Z", environment: "Production"), "level2") == nil)
            let paying = try await app.client.get("/v1/subscribers/paying/history").json["events"]?.array ?? []
            #expect(paying.map { $0["type"]?.string } == ["purchased"])
        }
    }

    /// `subledger import` follows the same rule: a Sandbox line naming a
    /// Production original claims nothing of it.
    @Test func anImportedSandboxLineNeverTakesAProductionPurchase() async throws {
        try await withAppStore { app in
            #expect(try await app.client.post("/v1/subscribers/paying/events", purchaseJSON(
                "7400000000000001", product: "com.example.level2", at: "2025-03-01T00:00:00Z")).status == .created)
            let importer = Importer(pool: app.dependencies.pool, store: app.dependencies.store,
                                    catalog: app.dependencies.catalog.catalog, restorePolicy: .transfer, logger: app.dependencies.logger)
            let line = #"{"subscriberId": "mallory", "type": "restore", "transactionId": "7400000000000001", "originalTransactionId": "7400000000000001", "productId": "com.example.level2", "purchaseDate": "2025-03-02T00:00:00Z", "environment": "Sandbox"}"#
            let summary = try await importer.importLines([ImportLine(number: 1, text: Data(line.utf8))])
            #expect(summary.imported == 1)
            let paying = try await app.state("paying", at: "2025-03-20T00:00:00Z", environment: "Production")
            #expect(entitlement(paying, "level2")?["active"]?.bool == true, "\(paying)")
            let owner = try await app.client.get("/v1/transactions/7400000000000001", key: Keys.support)
            #expect(owner.json["subscriberId"]?.string == "paying", "\(owner.text)")
            let mallory = try await app.state("mallory", at: "2025-03-20T00:00:00Z", environment: "Sandbox")
            #expect(entitlement(mallory, "level2")?["active"]?.bool == true)
        }
    }

    // MARK: What support sees

    /// Family sharing, the offer, and a prorated refund's share, in state,
    /// explain and history.
    /// https://developer.apple.com/documentation/appstoreserverapi/inappownershiptype
    /// https://developer.apple.com/documentation/appstoreserverapi/revocationtype
    /// https://developer.apple.com/documentation/appstoreserverapi/revocationpercentage
    @Test func supportSeesFamilySharingOffersAndPartialRefunds() async throws {
        try await withAppStore { app in
            var first = period("4000000000000001", "2025-03-01T11:59:00Z", "2025-04-01T11:59:00Z")
            first.inAppOwnershipType = "FAMILY_SHARED"
            first.offerType = 1
            first.webOrderLineItemID = "4000000000000101"
            _ = try await app.notify(.subscribed, .initialBuy, transaction: first, renewal: renewalInfo())
            var refunded = first
            refunded.revocationDate = TestAppStore.date("2025-03-15T00:00:00Z")
            refunded.revocationReason = 1
            refunded.revocationType = "REFUND_PRORATED"
            refunded.revocationPercentage = 50000
            _ = try await app.notify(.refund, transaction: refunded, renewal: renewalInfo(autoRenew: false), signedDate: "2025-03-15T00:00:01Z")
            let state = try await app.state(alice, at: "2025-03-16T00:00:00Z")
            let store = state["storeTransactions"]?.array.first
            #expect(store?["ownershipType"]?.string == "FAMILY_SHARED", "\(state)")
            #expect(store?["offerType"]?.int == 1)
            #expect(store?["revocationType"]?.string == "REFUND_PRORATED")
            #expect(store?["revocationPercentage"]?.int == 50000)
            #expect(store?["revocationReason"]?.int == 1)
            let explain = try await app.client.get("/v1/subscribers/\(alice)/explain?at=2025-03-16T00:00:00Z&environment=Sandbox").text
            #expect(explain.contains("Family Sharing"), "\(explain)")
            #expect(explain.contains("prorated refund (50% refunded)"))
            #expect(explain.contains("introductory offer"))
            let history = try await app.client.get("/v1/subscribers/\(alice)/history").json["events"]?.array ?? []
            #expect(history.first?["data"]?["ownershipType"]?.string == "FAMILY_SHARED")
            let refundEvent = history.first { $0["type"]?.string == "refunded" }
            #expect(refundEvent?["data"]?["revocationType"]?.string == "REFUND_PRORATED")
            #expect(refundEvent?["summary"]?.string?.contains("prorated refund") == true)
        }
    }
}
