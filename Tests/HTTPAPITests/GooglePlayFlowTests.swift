import Foundation
import GooglePlay
import GooglePlayTesting
import HTTPAPI
import HummingbirdTesting
import JSON
import Ledger
import Logging
@testable import SubledgerApp
import SubledgerAppTesting
import Testing

/// Google Play end to end: pushes through the router, the purchase fetched
/// from a fake Google on loopback that checks the service account's
/// assertion and its access tokens as Google does, recorded in PostgreSQL,
/// acknowledged, voided. Google's pages are the authority:
/// - https://developer.android.com/google/play/billing/rtdn-reference
/// - https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.subscriptionsv2
/// - https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.products
/// - https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.voidedpurchases
/// - https://developer.android.com/google/play/billing/integrate#process (acknowledgement)
@Suite(.serialized) struct GooglePlayFlowTests {
    static let identity = try! FakeGoogleIdentity(keyIDs: ["google-key-a"])
    static let account = try! FakeServiceAccount()

    struct Flow: Sendable {
        let client: any TestClientProtocol
        let dependencies: AppDependencies
        let fake: FakeGoogle
        let integration: GooglePlayIntegration
        var messages = 0

        /// Pushes `notification` with a good token; a fresh message id each time unless given.
        func push(_ notification: GooglePlaySamples.Notification, messageID: String, eventTime: Date = Date()) async throws -> TestResponse {
            let token = "Bearer " + (try GooglePlayFlowTests.identity.idToken(issuedAt: Date()))
            return try await client.push(GooglePlaySamples.push(notification, messageID: messageID, eventTime: eventTime),
                                         authorization: token)
        }

        func state(_ subscriber: String, at: Date? = nil, environment: String? = nil) async throws -> JSONValue {
            var query: [String] = []
            if let at { query.append("at=\(RFC3339.format(at))") }
            if let environment { query.append("environment=\(environment)") }
            return try await client.get("/v1/subscribers/\(subscriber)" + (query.isEmpty ? "" : "?" + query.joined(separator: "&")),
                                        key: Keys.support).json
        }

        func entitled(_ subscriber: String, _ entitlement: String = "pro", at: Date? = nil, environment: String? = nil) async throws -> Bool {
            try await state(subscriber, at: at, environment: environment)["entitlements"]?.array
                .contains { $0["id"]?.string == entitlement && $0["active"]?.bool == true } ?? false
        }

        func playSubscription(_ subscriber: String, at: Date? = nil) async throws -> JSONValue? {
            try await state(subscriber, at: at)["subscriptions"]?.array.first { $0["store"]?.string == "google_play" }
        }
    }

    /// A fake Google serving, the app configured for it, and the Play
    /// integration's workers for the test to run by hand.
    func withFlow(_ body: @escaping @Sendable (Flow) async throws -> Void) async throws {
        let fake = FakeGoogle(serviceAccount: Self.account, identity: Self.identity)
        try await fake.serve { fake, _ in
            let key = try ServiceAccountKey(json: Self.account.json(tokenURI: await fake.tokenURI))
            var settings = GooglePlayAPITest.settings
            settings.retryDelays = [.milliseconds(5)]
            let client = GooglePlayAPIClient(serviceAccount: key, packageName: GooglePlaySamples.packageName, apiURL: await fake.baseURL,
                                             settings: settings, logger: Logger(label: "googleplay-flow-tests"))
            let dependencies = try await makePlayDependencies(source: client, identity: Self.identity)
            let integration = try GooglePlayIntegration.make(dependencies, writer: LedgerWriter(dependencies),
                                                             reader: SubscriberReader(dependencies))
            try await withApp(dependencies) { http, dependencies in
                try await body(Flow(client: http, dependencies: dependencies, fake: fake, integration: integration))
            }
        }
    }

    static func subscription(_ state: GooglePlayPurchase.State, start: Date, expiry: Date, order: String = "GPA.1111-2222-3333-44444",
                             basePlan: String = "monthly", autoRenew: Bool = true, subscriber: String? = "ann",
                             linked: String? = nil, acknowledged: Bool = true, test: Bool = false) -> JSONValue {
        GooglePlaySamples.subscriptionPurchaseV2(
            state: state, lineItems: [.init(productID: "pro_monthly", expiryTime: expiry, basePlanID: basePlan,
                                            autoRenewEnabled: autoRenew, latestSuccessfulOrderID: order)],
            startTime: start, latestOrderID: order, linkedPurchaseToken: linked,
            acknowledgementState: acknowledged ? "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED" : "ACKNOWLEDGEMENT_STATE_PENDING",
            testPurchase: test, obfuscatedExternalAccountID: subscriber)
    }

    @Test func aPurchaseRenewalGraceHoldAndRecoveryFollowWhatGoogleSays() async throws {
        try await withFlow { flow in
            let now = Date()
            let start = now - 86_400, paid = now + 29 * 86_400
            flow.fake.putSubscription(Self.subscription(.active, start: start, expiry: paid), token: "tok-1")
            let bought = try await flow.push(.subscription(.purchased, purchaseToken: "tok-1"), messageID: "m1", eventTime: start)
            #expect(bought.json["status"]?.string == "applied", "\(bought.text)")
            #expect(bought.json["subscriberId"]?.string == "ann")
            #expect(try await flow.entitled("ann"))
            let shown = try #require(try await flow.playSubscription("ann"))
            #expect(shown["originalTransactionId"]?.string == "tok-1" && shown["productId"]?.string == "pro_monthly")
            // Renewed: a new order and a later expiry.
            flow.fake.putSubscription(Self.subscription(.active, start: start, expiry: paid + 30 * 86_400,
                                                              order: "GPA.1111-2222-3333-44444..0"), token: "tok-1")
            _ = try await flow.push(.subscription(.renewed, purchaseToken: "tok-1"), messageID: "m2", eventTime: now)
            #expect(try await flow.entitled("ann", at: paid + 86_400))
            // Billing fails: grace, then hold, then recovery.
            flow.fake.putSubscription(Self.subscription(.inGracePeriod, start: start, expiry: now + 3 * 86_400), token: "tok-1")
            _ = try await flow.push(.subscription(.inGracePeriod, purchaseToken: "tok-1"), messageID: "m3", eventTime: now + 1)
            #expect(try await flow.playSubscription("ann")?["status"]?.string == "grace")
            flow.fake.putSubscription(Self.subscription(.onHold, start: start, expiry: now + 2), token: "tok-1")
            _ = try await flow.push(.subscription(.onHold, purchaseToken: "tok-1"), messageID: "m4", eventTime: now + 2)
            #expect(try await flow.playSubscription("ann")?["status"]?.string == "on_hold")
            #expect(try await !flow.entitled("ann"))
            // The listing says so too (not "expired"), under its store.
            try await flow.dependencies.project(SubscriptionProjection(store: flow.dependencies.store, catalog: flow.dependencies.catalog.catalog))
            let held = try await flow.client.get("/v1/subscriptions?status=on_hold&store=google_play", key: Keys.support)
                .json["subscriptions"]?.array ?? []
            #expect(held.map { $0["originalTransactionId"]?.string } == ["tok-1"] && held.first?["store"]?.string == "google_play",
                    "\(held)")
            flow.fake.putSubscription(Self.subscription(.active, start: start, expiry: now + 31 * 86_400, order: "GPA.1111-2222-3333-44444..1"),
                                            token: "tok-1")
            _ = try await flow.push(.subscription(.recovered, purchaseToken: "tok-1"), messageID: "m5", eventTime: now + 3)
            #expect(try await flow.entitled("ann"))
            // The history says what Google said, store by store.
            let history = try await flow.client.get("/v1/subscribers/ann/history", key: Keys.support).json["events"]?.array ?? []
            #expect(history.filter { $0["type"]?.string == "google_play_purchase" }.count == 5)
            #expect(history.allSatisfy { ($0["summary"]?.string ?? "").hasPrefix("Google Play:") })
        }
    }

    @Test func aRepeatedMessageRecordsNothingNewAndAPlayFailureIs503ThenTheRetryRecordsIt() async throws {
        try await withFlow { flow in
            let now = Date()
            flow.fake.putSubscription(Self.subscription(.active, start: now - 60, expiry: now + 86_400), token: "tok-2")
            // The client's own retries (two attempts here) all fail.
            await flow.fake.failNext(.subscriptionsV2Get, 2, status: 503)
            let failed = try await flow.push(.subscription(.purchased, purchaseToken: "tok-2"), messageID: "m10")
            #expect(failed.status == .serviceUnavailable, "\(failed.text)")
            #expect(failed.error.code == "googleplay_api_unavailable")
            #expect(try await !flow.entitled("ann"), "nothing is stored for a push answered 503")
            let retried = try await flow.push(.subscription(.purchased, purchaseToken: "tok-2"), messageID: "m10")
            #expect(retried.status == .ok && retried.json["status"]?.string == "applied", "\(retried.text)")
            let events = try await flow.client.get("/v1/subscribers/ann/history", key: Keys.support).json["events"]?.array.count
            let repeated = try await flow.push(.subscription(.purchased, purchaseToken: "tok-2"), messageID: "m10")
            #expect(repeated.json["duplicate"]?.bool == true)
            #expect(try await flow.client.get("/v1/subscribers/ann/history", key: Keys.support).json["events"]?.array.count == events)
        }
    }

    @Test func aPendingAcknowledgementIsMadeAndRetriedAfterGoogleFailsOnce() async throws {
        try await withFlow { flow in
            let now = Date()
            flow.fake.putSubscription(Self.subscription(.active, start: now - 60, expiry: now + 86_400, acknowledged: false),
                                            token: "tok-3")
            _ = try await flow.push(.subscription(.purchased, purchaseToken: "tok-3"), messageID: "m20")
            let acknowledger = try #require(flow.integration.acknowledger)
            // Every attempt of the first round fails (the client tries twice here).
            await flow.fake.failNext(.subscriptionsAcknowledge, 2, status: 500)
            #expect(try await acknowledger.acknowledgeDue() == 0)
            #expect(await flow.fake.acknowledgementCount(token: "tok-3") == 0)
            let row = try await flow.dependencies.pool.query(
                "SELECT status, attempts, last_error IS NOT NULL FROM googleplay_acknowledgements WHERE purchase_token = 'tok-3'").first
            #expect(try row?.decode(String.self, at: 0) == "pending" && row?.decode(Int64.self, at: 1) == 1)
            // Due again (the test does not wait out the backoff).
            try await flow.dependencies.pool.query("UPDATE googleplay_acknowledgements SET next_attempt_at = now()")
            #expect(try await acknowledger.acknowledgeDue() == 1)
            #expect(await flow.fake.acknowledgementCount(token: "tok-3") == 1)
            #expect(try await acknowledger.acknowledgeDue() == 0, "acknowledged once")
        }
    }

    /// A backlog larger than a batch is drained in one go, not one batch per
    /// interval; a round Google fails stops the draining until the next.
    @Test func theAcknowledgerDrainsABacklogBatchAfterBatchAndStopsAtAFailure() async throws {
        try await withFlow { flow in
            let now = Date()
            for index in 0..<7 {
                flow.fake.putSubscription(Self.subscription(.active, start: now - 60, expiry: now + 86_400, order: "GPA.7-\(index)",
                                                            subscriber: "backlog-\(index)", acknowledged: false), token: "tok-b\(index)")
                let pushed = try await flow.push(.subscription(.purchased, purchaseToken: "tok-b\(index)"), messageID: "mb\(index)")
                #expect(pushed.json["status"]?.string == "applied", "\(pushed.text)")
            }
            var acknowledger = try #require(flow.integration.acknowledger)
            acknowledger.batchSize = 3
            #expect(try await acknowledger.acknowledgeBacklog() == 7, "three batches in one call")
            #expect(await flow.fake.callCount(.subscriptionsAcknowledge) == 7)
            try await flow.dependencies.pool.query("UPDATE googleplay_acknowledgements SET status = 'pending', next_attempt_at = now()")
            // The first purchase of the first batch fails (both of the client's attempts).
            await flow.fake.failNext(.subscriptionsAcknowledge, 2, status: 500)
            #expect(try await acknowledger.acknowledgeBacklog() == 2, "the first batch had a failure: no second batch")
        }
    }

    @Test func anUpgradeThroughTheLinkedTokenBelongsToTheOldOwnerAndReplacesIt() async throws {
        try await withFlow { flow in
            let now = Date()
            flow.fake.putSubscription(Self.subscription(.active, start: now - 10 * 86_400, expiry: now + 20 * 86_400), token: "old")
            _ = try await flow.push(.subscription(.purchased, purchaseToken: "old"), messageID: "m30", eventTime: now - 10 * 86_400)
            // The new purchase names no account: its linked token's holder gets it.
            flow.fake.putSubscription(Self.subscription(.active, start: now - 60, expiry: now + 365 * 86_400, order: "GPA.9-9-9",
                                                              basePlan: "yearly", subscriber: nil, linked: "old"), token: "new")
            let upgraded = try await flow.push(.subscription(.purchased, purchaseToken: "new"), messageID: "m31")
            #expect(upgraded.json["subscriberId"]?.string == "ann", "\(upgraded.text)")
            let subscriptions = try await flow.state("ann")["subscriptions"]?.array ?? []
            #expect(subscriptions.first { $0["originalTransactionId"]?.string == "old" }?["status"]?.string == "expired")
            #expect(subscriptions.first { $0["originalTransactionId"]?.string == "new" }?["productId"]?.string == "pro_monthly:yearly")
            #expect(try await flow.entitled("ann", at: now + 100 * 86_400))
            // The token is found by GET /v1/transactions, and so is its order id.
            let found = try await flow.client.get("/v1/transactions/new", key: Keys.support)
            #expect(found.status == .ok && found.json["subscriberId"]?.string == "ann", "\(found.text)")
            #expect(try await flow.client.get("/v1/transactions/GPA.9-9-9", key: Keys.support).json["subscriberId"]?.string == "ann")
        }
    }

    @Test func aVoidedPurchaseIsRevokedFromItsVoidingByPushAndByTheWalk() async throws {
        try await withFlow { flow in
            let now = Date()
            for token in ["tok-v1", "tok-v2", "tok-v3"] {
                flow.fake.putSubscription(Self.subscription(.active, start: now - 5 * 86_400, expiry: now + 25 * 86_400), token: token)
                _ = try await flow.push(.subscription(.purchased, purchaseToken: token), messageID: "m-\(token)", eventTime: now - 5 * 86_400)
            }
            let voided = try await flow.push(.voidedPurchase(purchaseToken: "tok-v1"), messageID: "m40", eventTime: now - 86_400)
            #expect(voided.json["status"]?.string == "applied", "\(voided.text)")
            #expect(try await flow.playSubscription("ann")?["status"]?.string != nil)
            let subscriptions = try await flow.state("ann")["subscriptions"]?.array ?? []
            #expect(subscriptions.first { $0["originalTransactionId"]?.string == "tok-v1" }?["status"]?.string == "revoked")
            let before = try await flow.state("ann", at: now - 2 * 86_400)["subscriptions"]?.array ?? []
            #expect(before.first { $0["originalTransactionId"]?.string == "tok-v1" }?["status"]?.string == "active",
                    "?at= before the voiding still shows it")
            // The walk: two pages, one malformed item between them; it goes on past it.
            await flow.fake.addVoided(GooglePlaySamples.voidedPurchase(purchaseToken: "tok-v2", voidedTime: now - 3600))
            await flow.fake.addVoided(.object(["purchaseToken": .string("tok-bad"), "voidedTimeMillis": .string("soon")]))
            await flow.fake.addVoided(GooglePlaySamples.voidedPurchase(purchaseToken: "tok-v3", voidedTime: now - 1800))
            await flow.fake.addVoided(GooglePlaySamples.voidedPurchase(purchaseToken: "nobody-holds-it", voidedTime: now - 900))
            var reconciler = try #require(flow.integration.reconciler)
            reconciler.pageSize = 2
            let report = try await reconciler.reconcile(since: now - 86_400 * 2)
            #expect(report.revoked == 2 && report.failed == 1 && report.notHeld == 1 && report.pages >= 2, "\(report)")
            let after = try await flow.state("ann")["subscriptions"]?.array ?? []
            #expect(after.filter { $0["status"]?.string == "revoked" }.count == 3)
            #expect(try await reconciler.reconcile(since: now - 86_400 * 2).revoked == 0, "a second walk changes nothing")
            // One walk at a time across instances: while another session
            // holds the walk's lock, a walk reads no page.
            let pagesBefore = await flow.fake.calls(.voidedPurchasesList).count
            try await flow.dependencies.pool.withConnection { other in
                #expect(try await other.tryLock(.googlePlayVoidedWalk))
                let skipped = try await reconciler.reconcile(since: now - 86_400 * 2)
                #expect(skipped.anotherWalkRunning && skipped.pages == 0, "\(skipped)")
                try await other.unlock(.googlePlayVoidedWalk)
            }
            #expect(await flow.fake.calls(.voidedPurchasesList).count == pagesBefore)
        }
    }

    @Test func aOneTimeProductATestPurchaseAndBothStoresAtOnce() async throws {
        try await withFlow { flow in
            let now = Date()
            await flow.fake.putProduct(GooglePlaySamples.productPurchase(purchaseTime: now - 60, obfuscatedExternalAccountID: "ann"),
                                       productID: "level_pack", token: "tok-p")
            let product = try await flow.push(.oneTimeProduct(.purchased, purchaseToken: "tok-p", sku: "level_pack"), messageID: "m50")
            #expect(product.json["status"]?.string == "applied", "\(product.text)")
            #expect(try await flow.entitled("ann", "level2"))
            // A licence tester's purchase is Sandbox: not in the Production view.
            flow.fake.putSubscription(Self.subscription(.active, start: now - 60, expiry: now + 86_400, subscriber: "bob", test: true),
                                            token: "tok-t")
            _ = try await flow.push(.subscription(.purchased, purchaseToken: "tok-t"), messageID: "m51")
            #expect(try await !flow.entitled("bob"))
            #expect(try await flow.entitled("bob", environment: "Sandbox"))
            // Entitled through both stores at once.
            let apple = try await flow.client.post("/v1/subscribers/ann/events", purchaseJSON(
                "2000000001", product: "com.example.pro.monthly", at: RFC3339.format(now - 60), expires: RFC3339.format(now + 86_400)))
            #expect(apple.status == .created, "\(apple.text)")
            flow.fake.putSubscription(Self.subscription(.active, start: now - 60, expiry: now + 40 * 86_400), token: "tok-both")
            _ = try await flow.push(.subscription(.purchased, purchaseToken: "tok-both"), messageID: "m52")
            let stores = Set((try await flow.state("ann")["subscriptions"]?.array ?? []).compactMap { $0["store"]?.string })
            #expect(stores == ["app_store", "google_play"])
            #expect(try await flow.entitled("ann", at: now + 20 * 86_400), "Play keeps it after the App Store's month")
        }
    }

    @Test func linkingRecordsFetchesAndAcknowledgesAndAnUnattributedPushWaitsForIt() async throws {
        try await withFlow { flow in
            let now = Date()
            flow.fake.putSubscription(Self.subscription(.active, start: now - 60, expiry: now + 86_400, subscriber: nil, acknowledged: false),
                                            token: "tok-l")
            let unattributed = try await flow.push(.subscription(.purchased, purchaseToken: "tok-l"), messageID: "m60")
            #expect(unattributed.json["status"]?.string == "unattributed", "\(unattributed.text)")
            let linked = try await flow.client.post("/v1/subscribers/carol/googleplay/purchases",
                                                    #"{"purchaseToken": "tok-l", "productId": "pro_monthly", "type": "subscription"}"#)
            #expect(linked.status == .ok, "\(linked.text)")
            #expect(linked.json["entitlements"]?.array.contains { $0["id"]?.string == "pro" && $0["active"]?.bool == true } == true)
            #expect(await flow.fake.acknowledgementCount(token: "tok-l") == 1, "acknowledged right after the link")
            // A token is never held by two subscribers: another link is a transfer under the default policy.
            let bad = try await flow.client.post("/v1/subscribers/carol/googleplay/purchases",
                                                 #"{"purchaseToken": "tok l", "productId": "pro_monthly", "type": "subscription"}"#)
            #expect(bad.status == .badRequest && bad.error.field == "purchaseToken")
            let missing = try await flow.client.post("/v1/subscribers/carol/googleplay/purchases",
                                                     #"{"purchaseToken": "tok-l", "type": "subscription"}"#)
            #expect(missing.status == .badRequest && missing.error.field == "productId")
        }
    }

    @Test func playSubscriptionsGetRemindersAndChanges() async throws {
        try await withFlow { flow in
            let now = Date()
            flow.fake.putSubscription(Self.subscription(.canceled, start: now - 60, expiry: now + 10 * 86_400, autoRenew: false),
                                            token: "tok-r")
            _ = try await flow.push(.subscription(.canceled, purchaseToken: "tok-r"), messageID: "m70")
            try await flow.dependencies.project(ReminderProjection(store: flow.dependencies.store, catalog: flow.dependencies.catalog.catalog))
            let reminders = try await flow.dependencies.pool.query(
                "SELECT count(*) FROM reminders WHERE status = 'pending'").first!.decode(Int64.self, at: 0)
            #expect(reminders >= 1, "a canceled Play subscription gets its renewal reminder and expiry prompt")
            // The read models list it (store and all), and the change feed carries its entitlement.
            let catalog = flow.dependencies.catalog.catalog
            try await flow.dependencies.project(SubscriptionProjection(store: flow.dependencies.store, catalog: catalog))
            let listed = try await flow.client.get("/v1/subscriptions?productId=pro_monthly&limit=100", key: Keys.support).json["subscriptions"]?.array ?? []
            #expect(listed.contains { $0["originalTransactionId"]?.string == "tok-r" && $0["status"]?.string == "active"
                && $0["store"]?.string == "google_play" }, "\(listed)")
            let appStoreOnly = try await flow.client.get("/v1/subscriptions?store=app_store", key: Keys.support).json["subscriptions"]?.array
            #expect(appStoreOnly?.isEmpty == true, "\(String(describing: appStoreOnly))")
            let badStore = try await flow.client.get("/v1/subscriptions?store=play_store", key: Keys.support)
            #expect(badStore.status == .badRequest && badStore.text.contains("store"), "\(badStore.text)")
            let state = try await flow.client.get("/v1/subscribers/ann", key: Keys.support).json
            #expect(state["entitlements"]?.array.first?["store"]?.string == "google_play", "\(state)")
            let stats = try await flow.client.get("/v1/stats", key: Keys.support)
            #expect(stats.status == .ok && stats.text.contains("pro"), "\(stats.text)")
            try await flow.dependencies.project(ChangeFeedConsumer(catalog: catalog))
            // Every change of this Play purchase says its store: the fact's and the entitlement's.
            let changes = try await pull(flow.client, query: "&subscriberId=ann", limit: 100,
                                         expecting: "the purchase and the entitlement gained") { changes in
                Set(changes.compactMap { $0["type"]?.string }).isSuperset(of: ["google_play_purchase", "entitlement_gained"])
            }
            #expect(changes.contains { $0["type"]?.string == "google_play_purchase" && $0["store"]?.string == "google_play" }, "\(changes)")
            #expect(changes.contains { $0["type"]?.string == "entitlement_gained" && $0["store"]?.string == "google_play" }, "\(changes)")
            #expect(changes.allSatisfy { $0["store"]?.string == "google_play" }, "\(changes)")
        }
    }
}
