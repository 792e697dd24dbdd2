import Foundation
import GooglePlay
import GooglePlayTesting
import JSON
import Ledger
import Testing

private let token = GooglePlaySamples.purchaseToken()
private let observedAt = Fixtures.observedAt

private func subscription(_ json: JSONValue) throws -> FetchedPlayPurchase {
    try FetchedPlayPurchase.subscription(json: json.data, purchaseToken: token, observedAt: observedAt)
}

private func product(_ json: JSONValue, productID: String = "coins_100") throws -> FetchedPlayPurchase {
    try FetchedPlayPurchase.product(json: json.data, purchaseToken: token, productID: productID, observedAt: observedAt)
}

@Suite struct SubscriptionPurchaseTests {
    // https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.subscriptionsv2#SubscriptionPurchaseV2
    @Test func anActiveSubscriptionBecomesTheFact() throws {
        let fetched = try subscription(GooglePlaySamples.subscriptionPurchaseV2(obfuscatedExternalAccountID: "subscriber-42"))
        #expect(fetched.purchase == GooglePlayPurchase(
            kind: .subscription, purchaseToken: token, orderID: GooglePlaySamples.orderID, productID: "pro_monthly",
            basePlanID: "monthly", state: .active, startTime: RFC3339.parse("2024-03-01T12:00:00.123Z")!,
            expiryTime: RFC3339.parse("2024-04-01T12:00:00.123Z")!, autoRenew: true, acknowledged: true,
            observedAt: observedAt, environment: .production,
            sale: SaleTerms(price: Amount(decimal: "9.99"), currency: "USD", storefront: "US")))
        #expect(fetched.obfuscatedAccountID == "subscriber-42")
        #expect(!fetched.acknowledgementPending)
        #expect(fetched.purchase.catalogIDs == ["pro_monthly:monthly", "pro_monthly"])
    }

    /// The line item's `offerPhase` says what the current period costs:
    /// the recurring price in a base-price phase, nothing in a free trial,
    /// no amount (Google gives none) in an introductory phase; a `Money`
    /// Google shaped otherwise leaves no amount and still records the purchase.
    /// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.subscriptionsv2#OfferPhase
    /// https://developers.google.com/android-publisher/api-ref/rest/v3/Money
    @Test(arguments: [
        (#"{"basePrice": {}}"#, nil, SaleTerms(price: Amount(decimal: "9.99"), currency: "USD", storefront: "US")),
        (#"{"freeTrial": {}}"#, nil, SaleTerms(offerDiscount: .freeTrial, storefront: "US")),
        (#"{"introductoryPrice": {}}"#, nil, SaleTerms(offerDiscount: .payAsYouGo, storefront: "US")),
        (#"{"prorationPeriod": {}}"#, nil, SaleTerms(storefront: "US")),
        (#"{"basePrice": {}}"#, #"{"currencyCode": "JPY", "units": "1200"}"#, SaleTerms(price: Amount(decimal: "1200"), currency: "JPY", storefront: "US")),
        (#"{"basePrice": {}}"#, #"{"currencyCode": "EUR", "units": "4", "nanos": 500000000}"#,
         SaleTerms(price: Amount(decimal: "4.5"), currency: "EUR", storefront: "US")),
        (#"{"basePrice": {}}"#, #"{"currencyCode": "EUR", "units": "-4"}"#, nil),
        (#"{"basePrice": {}}"#, #"{"currencyCode": "ZZZ", "units": "4"}"#, SaleTerms(storefront: "US")),
        (#"{"basePrice": {}}"#, #"{"currencyCode": "EUR", "units": 4.5}"#, nil),
    ] as [(String, String?, SaleTerms?)])
    func theOfferPhaseDecidesWhatThePeriodCost(phase: String, money: String?, expected: SaleTerms?) throws {
        guard case .object(var root) = GooglePlaySamples.subscriptionPurchaseV2(), case .array(var items)? = root["lineItems"],
              case .object(var item) = items[0], case .object(var plan)? = item["autoRenewingPlan"] else {
            Issue.record("the sample's shape changed")
            return
        }
        item["offerPhase"] = try JSONValue.parse(Data(phase.utf8)).get()
        if let money { plan["recurringPrice"] = try JSONValue.parse(Data(money.utf8)).get() }
        item["autoRenewingPlan"] = .object(plan)
        items[0] = .object(item)
        root["lineItems"] = .array(items)
        let fetched = try subscription(.object(root))
        #expect(fetched.purchase.sale == expected)
        #expect(fetched.purchase.state == .active, "recorded whatever the price")
    }

    // https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.subscriptionsv2#SubscriptionState
    @Test("Each subscriptionState becomes the fact's state; ACTIVE, IN_GRACE_PERIOD and CANCELED grant",
          arguments: [
              ("SUBSCRIPTION_STATE_ACTIVE", true), ("SUBSCRIPTION_STATE_IN_GRACE_PERIOD", true), ("SUBSCRIPTION_STATE_CANCELED", true),
              ("SUBSCRIPTION_STATE_ON_HOLD", false), ("SUBSCRIPTION_STATE_PAUSED", false), ("SUBSCRIPTION_STATE_EXPIRED", false),
              ("SUBSCRIPTION_STATE_PENDING", false), ("SUBSCRIPTION_STATE_PENDING_PURCHASE_CANCELED", false),
              ("SUBSCRIPTION_STATE_UNSPECIFIED", false),
          ])
    func eachState(state: String, grants: Bool) throws {
        let json = GooglePlaySamples.subscriptionPurchaseV2(acknowledgementState: "ACKNOWLEDGEMENT_STATE_PENDING")
            .setting("subscriptionState", .string(state))
        let fetched = try subscription(json)
        #expect(fetched.purchase.state.rawValue == state)
        #expect(fetched.purchase.state.grants == grants)
        // Only what is paid for and grants is to be acknowledged.
        #expect(fetched.acknowledgementPending == grants)
        #expect(!fetched.purchase.acknowledged)
    }

    // https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.subscriptionsv2#SubscriptionPurchaseV2 — startTime "Not set for pending subscriptions".
    @Test func aPendingSubscriptionWithoutStartTimeStartsWhenObserved() throws {
        let fetched = try subscription(GooglePlaySamples.subscriptionPurchaseV2(state: .pending, startTime: nil, latestOrderID: nil))
        #expect(fetched.purchase.startTime == observedAt)
        #expect(fetched.purchase.state == .pending)
        // No latestOrderId: the line item's latestSuccessfulOrderId.
        #expect(fetched.purchase.orderID == GooglePlaySamples.orderID)
        // An active one must have a startTime.
        let error = #expect(throws: GooglePlayParseError.self) {
            _ = try subscription(GooglePlaySamples.subscriptionPurchaseV2(state: .active, startTime: nil))
        }
        #expect(error?.field == "startTime")
        #expect(error?.code == .missingField)
    }

    // https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.subscriptionsv2#SubscriptionPurchaseV2 — Timestamps in RFC 3339 "with nanosecond resolution and up to nine fractional digits".
    @Test func timesWithNanosecondsParse() throws {
        let json = """
        {"kind":"androidpublisher#subscriptionPurchaseV2","startTime":"2024-01-01T00:00:00.123456789Z",
         "subscriptionState":"SUBSCRIPTION_STATE_ACTIVE","latestOrderId":"GPA.1111-2222-3333-44444",
         "acknowledgementState":"ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED",
         "lineItems":[{"productId":"pro_yearly","expiryTime":"2025-01-01T00:00:00.5Z","autoRenewingPlan":{}}]}
        """
        let fetched = try FetchedPlayPurchase.subscription(json: Data(json.utf8), purchaseToken: token, observedAt: observedAt)
        #expect(fetched.purchase.startTime == RFC3339.parse("2024-01-01T00:00:00.123Z"))
        #expect(fetched.purchase.expiryTime == RFC3339.parse("2025-01-01T00:00:00.500Z"))
        // An autoRenewingPlan without autoRenewEnabled: Google omits false.
        #expect(fetched.purchase.autoRenew == false)
        #expect(fetched.purchase.basePlanID == nil)
    }

    // https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.subscriptionsv2#SubscriptionPurchaseLineItem
    @Test func theLineItemThatExpiresLastDecides() throws {
        let items = [
            GooglePlaySamples.LineItem(productID: "addon_storage", expiryTime: RFC3339.parse("2024-03-20T00:00:00Z"), basePlanID: "storage",
                                       autoRenewEnabled: true, latestSuccessfulOrderID: "GPA.0000-0000-0000-00001"),
            GooglePlaySamples.LineItem(productID: "pro_yearly", expiryTime: RFC3339.parse("2025-03-01T00:00:00Z"), basePlanID: "yearly",
                                       autoRenewEnabled: false, latestSuccessfulOrderID: nil),
            GooglePlaySamples.LineItem(productID: "no_expiry", expiryTime: nil, basePlanID: nil, autoRenewEnabled: nil,
                                       latestSuccessfulOrderID: "GPA.0000-0000-0000-00003"),
        ]
        let fetched = try subscription(GooglePlaySamples.subscriptionPurchaseV2(lineItems: items, latestOrderID: nil))
        #expect(fetched.purchase.productID == "pro_yearly")
        #expect(fetched.purchase.basePlanID == "yearly")
        #expect(fetched.purchase.expiryTime == RFC3339.parse("2025-03-01T00:00:00Z"))
        #expect(fetched.purchase.autoRenew == false)
        // The chosen item has no latestSuccessfulOrderId: the first item that has one.
        #expect(fetched.purchase.orderID == "GPA.0000-0000-0000-00001")
        // latestOrderId, when present, wins.
        let withLatest = try subscription(GooglePlaySamples.subscriptionPurchaseV2(lineItems: items, latestOrderID: "GPA.9999-9999-9999-99999"))
        #expect(withLatest.purchase.orderID == "GPA.9999-9999-9999-99999")
    }

    // https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.subscriptionsv2#PrepaidPlan — a prepaid plan does not renew.
    @Test func aPrepaidPlanDoesNotAutoRenew() throws {
        let fetched = try subscription(GooglePlaySamples.subscriptionPurchaseV2(lineItems: [.init(autoRenewEnabled: nil)]))
        #expect(fetched.purchase.autoRenew == false)
    }

    // https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.subscriptionsv2#SubscriptionPurchaseV2 — testPurchase "Only present if this subscription purchase is a test purchase".
    @Test func aTestPurchaseIsSandbox() throws {
        #expect(try subscription(GooglePlaySamples.subscriptionPurchaseV2(testPurchase: true)).purchase.environment == .sandbox)
        #expect(try subscription(GooglePlaySamples.subscriptionPurchaseV2(testPurchase: false)).purchase.environment == .production)
    }

    // https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.subscriptionsv2#SubscriptionPurchaseV2 — linkedPurchaseToken and externalAccountIdentifiers.
    @Test func theLinkedTokenAndAccountAreRead() throws {
        let old = GooglePlaySamples.purchaseToken(2)
        let fetched = try subscription(GooglePlaySamples.subscriptionPurchaseV2(linkedPurchaseToken: old,
                                                                                acknowledgementState: "ACKNOWLEDGEMENT_STATE_PENDING",
                                                                                obfuscatedExternalAccountID: "user\u{7}bell"))
        #expect(fetched.purchase.linkedPurchaseToken == old)
        #expect(fetched.acknowledgementPending)
        // An account id the ledger could not hold belongs to no subscriber: absent, not a refusal.
        #expect(fetched.obfuscatedAccountID == nil)
    }

    // https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.subscriptionsv2#SubscriptionPurchaseV2 — what Google does not document is refused, naming the field.
    @Test func malformedSubscriptionsNameTheField() throws {
        func field(_ json: JSONValue) -> String? {
            (#expect(throws: GooglePlayParseError.self) { _ = try subscription(json) })?.field
        }
        let sample = GooglePlaySamples.subscriptionPurchaseV2()
        #expect(field(sample.setting("subscriptionState", .string("SUBSCRIPTION_STATE_SUSPENDED"))) == "subscriptionState")
        #expect(field(sample.setting("subscriptionState", .string("PURCHASED"))) == "subscriptionState")
        #expect(field(sample.setting("subscriptionState", nil)) == "subscriptionState")
        #expect(field(sample.setting("lineItems", nil)) == "lineItems")
        #expect(field(sample.setting("lineItems", .array([]))) == "lineItems")
        #expect(field(sample.setting("lineItems", .array([.string("x")]))) == "lineItems[0]")
        let badExpiry = GooglePlaySamples.LineItem().json.setting("expiryTime", .string("next month"))
        #expect(field(sample.setting("lineItems", .array([GooglePlaySamples.LineItem().json, badExpiry]))) == "lineItems[1].expiryTime")
        #expect(field(sample.setting("lineItems", .array([GooglePlaySamples.LineItem().json.setting("productId", nil)]))) == "lineItems[0].productId")
        #expect(field(sample.setting("acknowledgementState", .string("ACKNOWLEDGED"))) == "acknowledgementState")
        #expect(field(sample.setting("linkedPurchaseToken", .integer(1))) == "linkedPurchaseToken")
        #expect(field(.array([])) == "")
    }
}

@Suite struct ProductPurchaseTests {
    // https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.products#ProductPurchase
    @Test func aPurchasedProductBecomesTheFact() throws {
        let fetched = try product(GooglePlaySamples.productPurchase(obfuscatedExternalAccountID: "subscriber-7"))
        #expect(fetched.purchase == GooglePlayPurchase(
            kind: .product, purchaseToken: token, orderID: GooglePlaySamples.orderID, productID: "coins_100", state: .purchased,
            startTime: RFC3339.parse("2024-03-01T12:00:00.123Z")!, acknowledged: true, observedAt: observedAt,
            environment: .production, quantity: 1))
        #expect(fetched.obfuscatedAccountID == "subscriber-7")
        #expect(!fetched.acknowledgementPending)
    }

    // https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.products#ProductPurchase — purchaseState 0 Purchased, 1 Canceled, 2 Pending.
    @Test("purchaseState 0/1/2 is PURCHASED/CANCELED/PENDING; only 0 grants",
          arguments: [(0, GooglePlayPurchase.State.purchased), (1, .productCanceled), (2, .productPending)])
    func eachPurchaseState(purchaseState: Int, state: GooglePlayPurchase.State) throws {
        let fetched = try product(GooglePlaySamples.productPurchase(purchaseState: purchaseState, acknowledgementState: 0))
        #expect(fetched.purchase.state == state)
        #expect(fetched.purchase.state.grants == (purchaseState == 0))
        #expect(fetched.acknowledgementPending == (purchaseState == 0))
        #expect(!fetched.purchase.acknowledged)
    }

    // https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.products#ProductPurchase — purchaseType 0 Test, 1 Promo, 2 Rewarded; absent for a real purchase.
    @Test("purchaseType 0 (a licence tester's purchase) is Sandbox; promo, rewarded and real ones are Production",
          arguments: [(Optional(0), Environment.sandbox), (1, .production), (2, .production), (nil, .production)])
    func purchaseTypeDecidesTheEnvironment(purchaseType: Int?, environment: Environment) throws {
        #expect(try product(GooglePlaySamples.productPurchase(purchaseType: purchaseType)).purchase.environment == environment)
    }

    // https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.products#ProductPurchase — quantity "If not present, the quantity is 1".
    @Test func quantityDefaultsToOne() throws {
        #expect(try product(GooglePlaySamples.productPurchase(quantity: nil)).purchase.quantity == 1)
        #expect(try product(GooglePlaySamples.productPurchase(quantity: 3)).purchase.quantity == 3)
        let error = #expect(throws: GooglePlayParseError.self) { _ = try product(GooglePlaySamples.productPurchase(quantity: 0)) }
        #expect(error?.field == "quantity")
    }

    // https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.products#ProductPurchase — what Google does not document is refused, naming the field.
    @Test func malformedProductsNameTheField() throws {
        func field(_ json: JSONValue, productID: String = "coins_100") -> String? {
            (#expect(throws: GooglePlayParseError.self) { _ = try product(json, productID: productID) })?.field
        }
        let sample = GooglePlaySamples.productPurchase()
        #expect(field(sample.setting("purchaseState", .integer(3))) == "purchaseState")
        #expect(field(sample.setting("purchaseState", nil)) == "purchaseState")
        #expect(field(sample.setting("purchaseTimeMillis", .string("1.5e12"))) == "purchaseTimeMillis")
        #expect(field(sample.setting("purchaseTimeMillis", nil)) == "purchaseTimeMillis")
        #expect(field(sample.setting("acknowledgementState", .integer(2))) == "acknowledgementState")
        // products.get may omit productId; when it names one, it is the one asked for.
        #expect(field(GooglePlaySamples.productPurchase(productID: "gems_5")) == "productId")
        #expect(try product(GooglePlaySamples.productPurchase(productID: "coins_100")).purchase.productID == "coins_100")
    }
}
