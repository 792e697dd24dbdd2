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

/// The subscriber apps name in `appAccountToken` (lowercased, as the mapping does).
let alice = TestAppStore.subscriberID.lowercased()

/// `POST /v1/appstore/notifications` through the router, on a real database.
struct AppStoreNotificationTests {
    /// Trusted by the app besides the good store: chains that are wrong in one
    /// other way (no leaf marker, expired leaf) must fail for that reason.
    static let good = try! TestAppStore()
    static let leafWithoutMarker = try! TestAppStore(TestAppStore.Options(leafHasMarker: false))
    static let expiredLeaf = try! TestAppStore(TestAppStore.Options(
        leafValidity: TestAppStore.date("2020-01-01T00:00:00Z")...TestAppStore.date("2025-01-01T00:00:00Z")))
    static let stranger = try! TestAppStore()

    static var verifier: AppStoreVerifier {
        AppStoreVerifier(rootCertificates: [good.root.certificate, leafWithoutMarker.root.certificate, expiredLeaf.root.certificate],
                         bundleID: TestAppStore.bundleID)
    }

    // MARK: Accepted, one type at a time

    @Test func subscribedRecordsAPurchaseForTheAppAccountToken() async throws {
        try await withAppStore { app in
            let response = try await app.notify(.subscribed, .initialBuy, transaction: first, renewal: renewal())
            #expect(response.status == .ok)
            #expect(response.json["status"]?.string == "applied")
            #expect(response.json["duplicate"]?.bool == false)
            #expect(response.json["subscriberId"]?.string == alice)
            let state = try await app.state(alice, at: "2025-03-15T00:00:00Z")
            #expect(state["subscriptions"]?.array.first?["status"]?.string == "active")
            #expect(state["subscriptions"]?.array.first?["expiresAt"]?.string == "2025-04-01T11:59:00Z")
            #expect(state["entitlements"]?.array.first?["active"]?.bool == true)
            let history = try await app.client.get("/v1/subscribers/\(alice)/history").json["events"]?.array ?? []
            #expect(history.map { $0["type"]?.string } == ["purchased"])
            #expect(history.first?["source"]?.string == "appstore")
            #expect(history.first?["data"]?["environment"]?.string == "Sandbox")
            let row = try await app.row(response.json["notificationUUID"]?.string ?? "")
            #expect(row == ["SUBSCRIBED", "INITIAL_BUY", "Sandbox", alice, "app_account_token", "applied", "true"])
        }
    }

    @Test func didRenewExtendsTheSubscription() async throws {
        try await withAppStore { app in
            _ = try await app.notify(.subscribed, .initialBuy, transaction: first, renewal: renewal())
            let renewed = try await app.notify(.didRenew, transaction: second, renewal: renewal(), signedDate: "2025-04-01T12:00:00Z")
            #expect(renewed.json["status"]?.string == "applied")
            let state = try await app.state(alice, at: "2025-04-15T00:00:00Z")
            #expect(state["subscriptions"]?.array.first?["status"]?.string == "active")
            #expect(state["subscriptions"]?.array.first?["expiresAt"]?.string == "2025-05-01T11:59:00Z")
            #expect(state["entitlements"]?.array.first?["source"]?.string == "2000000000000002")
        }
    }

    @Test func didChangeRenewalStatusTurnsAutoRenewOffAndOn() async throws {
        try await withAppStore { app in
            _ = try await app.notify(.subscribed, .initialBuy, transaction: first, renewal: renewal())
            _ = try await app.notify(.didChangeRenewalStatus, .autoRenewDisabled, transaction: first, renewal: renewal(autoRenew: false),
                                     signedDate: "2025-03-10T00:00:00Z")
            #expect(try await app.state(alice, at: "2025-03-11T00:00:00Z")["subscriptions"]?.array.first?["autoRenew"]?.bool == false)
            _ = try await app.notify(.didChangeRenewalStatus, .autoRenewEnabled, transaction: first, renewal: renewal(),
                                     signedDate: "2025-03-12T00:00:00Z")
            #expect(try await app.state(alice, at: "2025-03-13T00:00:00Z")["subscriptions"]?.array.first?["autoRenew"]?.bool == true)
        }
    }

    @Test func didFailToRenewWithGracePeriodKeepsAccessUntilGraceEnd() async throws {
        try await withAppStore { app in
            _ = try await app.notify(.subscribed, .initialBuy, transaction: first, renewal: renewal())
            let failed = try await app.notify(.didFailToRenew, .gracePeriod, transaction: first,
                                              renewal: renewal(grace: TestAppStore.date("2025-04-17T11:59:00Z")),
                                              signedDate: "2025-04-01T12:00:00Z")
            #expect(failed.json["status"]?.string == "applied")
            let inGrace = try await app.state(alice, at: "2025-04-10T00:00:00Z")
            #expect(inGrace["subscriptions"]?.array.first?["status"]?.string == "grace")
            #expect(inGrace["entitlements"]?.array.first?["active"]?.bool == true)
            #expect(inGrace["entitlements"]?.array.first?["expiresAt"]?.string == "2025-04-17T11:59:00Z")
            #expect(try await app.state(alice, at: "2025-04-18T00:00:00Z")["subscriptions"]?.array.first?["status"]?.string == "expired")
        }
    }

    @Test func expiredEndsTheSubscription() async throws {
        try await withAppStore { app in
            _ = try await app.notify(.subscribed, .initialBuy, transaction: first, renewal: renewal())
            let expired = try await app.notify(.expired, .voluntary, transaction: first, renewal: renewal(autoRenew: false),
                                               signedDate: "2025-04-01T12:00:00Z")
            #expect(expired.json["status"]?.string == "applied")
            let state = try await app.state(alice, at: "2025-04-02T00:00:00Z")
            #expect(state["subscriptions"]?.array.first?["status"]?.string == "expired")
            #expect(state["entitlements"]?.array.first?["active"]?.bool == false)
            let history = try await app.client.get("/v1/subscribers/\(alice)/history").json["events"]?.array ?? []
            // The renewal info it carries says auto-renew is off: the ledger learns that too.
            #expect(history.map { $0["type"]?.string } == ["purchased", "expired", "auto_renew_changed"])
        }
    }

    @Test func refundRevokesAndRefundReversedRestores() async throws {
        try await withAppStore { app in
            _ = try await app.notify(.subscribed, .initialBuy, transaction: first, renewal: renewal())
            var refunded = first
            refunded.revocationDate = TestAppStore.date("2025-03-05T00:00:00Z")
            refunded.revocationReason = 1
            _ = try await app.notify(.refund, transaction: refunded, signedDate: "2025-03-05T00:00:00Z")
            #expect(try await app.state(alice, at: "2025-03-06T00:00:00Z")["subscriptions"]?.array.first?["status"]?.string == "revoked")
            let reversed = try await app.notify(.refundReversed, transaction: first, renewal: renewal(), signedDate: "2025-03-08T00:00:00Z")
            #expect(reversed.json["status"]?.string == "applied")
            let state = try await app.state(alice, at: "2025-03-09T00:00:00Z")
            #expect(state["subscriptions"]?.array.first?["status"]?.string == "active")
            #expect(state["entitlements"]?.array.first?["active"]?.bool == true)
            // Between the refund and its reversal, access was gone.
            #expect(try await app.state(alice, at: "2025-03-06T00:00:00Z")["entitlements"]?.array.first?["active"]?.bool == false)
            let history = try await app.client.get("/v1/subscribers/\(alice)/history").json["events"]?.array ?? []
            #expect(history.map { $0["type"]?.string } == ["purchased", "refunded", "refund_reversed"])
        }
    }

    @Test func renewalExtendedMovesTheEndOfTheSameTransaction() async throws {
        try await withAppStore { app in
            _ = try await app.notify(.subscribed, .initialBuy, transaction: first, renewal: renewal())
            var extended = first
            extended.expiresDate = TestAppStore.date("2025-04-15T11:59:00Z")
            let response = try await app.notify(.renewalExtended, transaction: extended, renewal: renewal(), signedDate: "2025-03-20T00:00:00Z")
            #expect(response.json["status"]?.string == "applied")
            let state = try await app.state(alice, at: "2025-04-05T00:00:00Z")
            #expect(state["subscriptions"]?.array.first?["status"]?.string == "active")
            #expect(state["subscriptions"]?.array.first?["expiresAt"]?.string == "2025-04-15T11:59:00Z")
            let history = try await app.client.get("/v1/subscribers/\(alice)/history").json["events"]?.array ?? []
            #expect(history.map { $0["type"]?.string } == ["purchased", "renewal_extended"])
        }
    }

    @Test func oneTimeChargeRecordsNonConsumablesAndNonRenewingPasses() async throws {
        try await withAppStore { app in
            let level = oneTime("4000000000000001", product: "com.example.level2", type: .nonConsumable, at: "2025-03-01T10:00:00Z")
            #expect(try await app.notify(.oneTimeCharge, transaction: level).json["status"]?.string == "applied")
            let pass = oneTime("4000000000000002", product: "com.example.pass.30d", type: .nonRenewing, at: "2025-03-01T10:00:00Z")
            #expect(try await app.notify(.oneTimeCharge, transaction: pass).json["status"]?.string == "applied")
            let coins = oneTime("4000000000000003", product: "com.example.coins.100", type: .consumable, at: "2025-03-01T10:00:00Z")
            #expect(try await app.notify(.oneTimeCharge, transaction: coins).json["status"]?.string == "applied")
            let state = try await app.state(alice, at: "2025-03-02T00:00:00Z")
            // The pass's period is computed by our rules: 30 days from the purchase.
            #expect(state["nonRenewingPeriods"]?.array.first?["end"]?.string == "2025-03-31T10:00:00Z")
            #expect(Set(state["entitlements"]?.array.compactMap { $0["id"]?.string } ?? []) == ["level2", "pro"])
            #expect(state["purchases"]?.array.count == 2)
        }
    }

    @Test func testAndUnknownTypesAreStoredAndAcknowledged() async throws {
        try await withAppStore { app in
            let test = try await app.notify(.test)
            #expect(test.status == .ok)
            #expect(test.json["status"]?.string == "acknowledged")
            // A type this build does not know still carries Apple's latest
            // transaction, which the ledger records.
            let unknown = try await app.notify(NotificationType(rawValue: "SOMETHING_APPLE_ADDS_LATER"), transaction: first)
            #expect(unknown.status == .ok)
            #expect(unknown.json["status"]?.string == "applied")
            let row = try await app.row(unknown.json["notificationUUID"]?.string ?? "")
            #expect(row.first == "SOMETHING_APPLE_ADDS_LATER")
            #expect(try await app.counts() == Counts(events: 1, notifications: 2))
        }
    }

    /// A body with members besides `signedPayload` still stores the payload
    /// exactly as sent (it used to store an empty string).
    @Test func aBodyWithExtraMembersStoresItsSignedPayload() async throws {
        try await withAppStore { app in
            let signed = try app.store.signedNotification(.test, nil, transaction: nil, renewal: nil,
                                                          signedDate: TestAppStore.date("2025-03-01T12:00:00Z"))
            let body = #"{"signedPayload": "\#(signed)", "deliveredBy": {"proxy": 1}, "tries": 2}"#
            let response = try await app.client.post("/v1/appstore/notifications", body, key: nil)
            #expect(response.status == .ok, "\(response.text)")
            let rows = try await app.dependencies.pool.query("SELECT signed_payload FROM appstore_notifications")
            #expect(try rows.first?.decode(String.self, at: 0) == signed)
        }
    }

    // MARK: Rejected, nothing stored

    enum Forgery: String, CaseIterable, Sendable {
        case tamperedPayload, tamperedNestedTransaction, unknownRoot, twoCertificates, algorithmNone, algorithmHS256
        case leafWithoutMarker, anotherBundleID, certificateExpiredAtSignedDate
    }

    @Test(arguments: Forgery.allCases)
    func forgedNotificationsAreRefusedAndStoreNothing(_ forgery: Forgery) async throws {
        try await withAppStore { app in
            let good = Self.good
            let signed: String
            let code: String
            switch forgery {
            case .tamperedPayload:
                let valid = try good.signedNotification(.subscribed, .initialBuy, transaction: first)
                let parts = valid.split(separator: ".")
                var payload = try JSONSerialization.jsonObject(with: TestAppStore.decodeBase64URL(parts[1])) as! [String: Any]
                payload["notificationType"] = "REFUND"
                let forged = TestAppStore.base64URL(try JSONSerialization.data(withJSONObject: payload))
                signed = [String(parts[0]), forged, String(parts[2])].joined(separator: ".")
                code = "invalid_signature"
            case .tamperedNestedTransaction:
                let genuine = try good.sign(first)
                let parts = genuine.split(separator: ".")
                var payload = try JSONSerialization.jsonObject(with: TestAppStore.decodeBase64URL(parts[1])) as! [String: Any]
                payload["expiresDate"] = 4_102_444_800_000  // 2100
                let forged = [String(parts[0]), TestAppStore.base64URL(try JSONSerialization.data(withJSONObject: payload)), String(parts[2])]
                    .joined(separator: ".")
                let data = NotificationData(bundleID: TestAppStore.bundleID, environment: .sandbox, signedTransactionInfo: forged)
                signed = try good.sign(NotificationPayload(notificationType: .didRenew, notificationUUID: UUID().uuidString,
                                                           signedDate: TestAppStore.signedDate, data: data))
                code = "invalid_signature"
            case .unknownRoot:
                signed = try Self.stranger.signedNotification(.subscribed, .initialBuy, transaction: first)
                code = "untrusted_root"
            case .twoCertificates:
                let payload = try TestAppStore.encoder.encode(NotificationPayload(
                    notificationType: .test, notificationUUID: UUID().uuidString, signedDate: TestAppStore.signedDate,
                    data: NotificationData(bundleID: TestAppStore.bundleID, environment: .sandbox)))
                signed = try good.sign(payload: payload, header: ["alg": "ES256", "x5c": Array(try good.x5c.prefix(2))])
                code = "invalid_certificate_chain"
            case .algorithmNone, .algorithmHS256:
                let payload = try TestAppStore.encoder.encode(NotificationPayload(
                    notificationType: .test, notificationUUID: UUID().uuidString, signedDate: TestAppStore.signedDate,
                    data: NotificationData(bundleID: TestAppStore.bundleID, environment: .sandbox)))
                signed = try good.sign(payload: payload, header: ["alg": forgery == .algorithmNone ? "none" : "HS256", "x5c": try good.x5c])
                code = "unsupported_algorithm"
            case .leafWithoutMarker:
                signed = try Self.leafWithoutMarker.signedNotification(.subscribed, .initialBuy, transaction: first)
                code = "missing_apple_oid"
            case .anotherBundleID:
                signed = try good.signedNotification(.subscribed, .initialBuy, transaction: first, bundleID: "com.example.other")
                code = "bundle_id_mismatch"
            case .certificateExpiredAtSignedDate:
                signed = try Self.expiredLeaf.signedNotification(.subscribed, .initialBuy, transaction: first)
                code = "certificate_expired"
            }
            let response = try await app.post(signed)
            #expect(response.status == .badRequest)
            #expect(response.error.code == code)
            #expect(try await app.counts() == Counts(events: 0, notifications: 0))
        }
    }

    @Test func malformedBodiesAreRefused() async throws {
        try await withAppStore { app in
            for body in ["", "{}", #"{"signedPayload": 3}"#, #"{"signedPayload": "a.b"}"#, "[1]"] {
                let response = try await app.client.post("/v1/appstore/notifications", body, key: nil)
                #expect(response.status == .badRequest, "\(body)")
            }
            #expect(try await app.counts() == Counts(events: 0, notifications: 0))
        }
    }

    // MARK: Fixtures

    let first = TestAppStore.subscription(transactionID: "2000000000000001", originalTransactionID: "2000000000000001",
                                          purchaseDate: TestAppStore.date("2025-03-01T11:59:00Z"),
                                          expiresDate: TestAppStore.date("2025-04-01T11:59:00Z"))
    let second = TestAppStore.subscription(transactionID: "2000000000000002", originalTransactionID: "2000000000000001",
                                           purchaseDate: TestAppStore.date("2025-04-01T11:59:00Z"),
                                           expiresDate: TestAppStore.date("2025-05-01T11:59:00Z"))

    func renewal(autoRenew: Bool = true, grace: Date? = nil) -> RenewalInfo {
        TestAppStore.renewalInfo(autoRenew: autoRenew, gracePeriodExpiresDate: grace)
    }

    func oneTime(_ id: String, product: String, type: TransactionInfo.ProductType, at purchase: String) -> TransactionInfo {
        TransactionInfo(transactionID: id, originalTransactionID: id, bundleID: TestAppStore.bundleID, productID: product,
                        purchaseDate: TestAppStore.date(purchase), quantity: 1, type: type, appAccountToken: TestAppStore.subscriberID,
                        signedDate: TestAppStore.signedDate, environment: .sandbox)
    }

    func withAppStore(_ body: @escaping @Sendable (AppStoreApp) async throws -> Void) async throws {
        var dependencies = try await makeDependencies()
        dependencies.appStoreVerifier = Self.verifier
        let ready = dependencies
        try await withRouter(ready) { client in try await body(AppStoreApp(client: client, dependencies: ready)) }
    }
}
