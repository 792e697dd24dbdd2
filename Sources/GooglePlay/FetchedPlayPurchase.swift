import Foundation
import JSON
import Ledger

/// A purchase fetched from the Play Developer API, as the ledger's fact and
/// the two things the fact does not hold: who the app said bought it, and
/// whether the service must acknowledge it.
public struct FetchedPlayPurchase: Sendable, Hashable {
    public var purchase: GooglePlayPurchase
    /// `obfuscatedExternalAccountId`: the app sets it to the subscriber id.
    /// Nil when absent, and when it is not an id the ledger accepts (then it
    /// is no subscriber's; the purchase is attributed as if it were absent
    /// rather than refused, which would leave it unrecorded for good).
    public var obfuscatedAccountID: String?
    /// Google refunds a purchase not acknowledged within three days: true
    /// when Google says it is pending acknowledgement and it is paid for
    /// (it grants); a pending payment cannot be acknowledged yet.
    public var acknowledgementPending: Bool

    public init(purchase: GooglePlayPurchase, obfuscatedAccountID: String?, acknowledgementPending: Bool) {
        self.purchase = purchase
        self.obfuscatedAccountID = obfuscatedAccountID
        self.acknowledgementPending = acknowledgementPending
    }

    // MARK: purchases.subscriptionsv2.get

    /// Reads a `SubscriptionPurchaseV2`. The product, base plan, expiry and
    /// auto-renewal come from the line item that expires last: a purchase
    /// with several items (add-ons, a deferred replacement) grants until
    /// its latest one.
    /// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.subscriptionsv2
    /// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.subscriptionsv2#SubscriptionPurchaseV2
    public static func subscription(json data: Data, purchaseToken: String, observedAt: Date)
        throws(GooglePlayParseError) -> FetchedPlayPurchase {
        let root = try FieldReader.document(data, expected: "a SubscriptionPurchaseV2 JSON object")
        let stateText = try root.require(root.string("subscriptionState", maximumBytes: 64), "subscriptionState", "a SubscriptionState")
        guard let state = GooglePlayPurchase.State(rawValue: stateText), stateText.hasPrefix("SUBSCRIPTION_STATE_") else {
            throw .invalid("subscriptionState", expected: "one of Google's SubscriptionState values (SUBSCRIPTION_STATE_ACTIVE, ...)",
                           got: "\"\(stateText)\"")
        }

        let items = try root.require(root.objects("lineItems", expected: "a SubscriptionPurchaseLineItem object"), "lineItems",
                                     "the purchase's line items")
        guard !items.isEmpty else { throw .invalid("lineItems", expected: "at least one line item", got: "an empty array") }
        var latest: (index: Int, expiry: Date?)?
        for (index, item) in items.enumerated() {
            let expiry = try item.rfc3339("expiryTime")
            if latest == nil || (expiry ?? .distantPast) > (latest?.expiry ?? .distantPast) { latest = (index, expiry) }
        }
        let chosen = items[latest?.index ?? 0]
        let productID = try chosen.require(chosen.identifier("productId"), "productId", "the purchased product's id")
        let basePlanID = try chosen.object("offerDetails")?.identifier("basePlanId")
        let autoRenew: Bool? = if let plan = try chosen.object("autoRenewingPlan") {
            // Google's JSON omits a false boolean.
            try plan.bool("autoRenewEnabled") ?? false
        } else if try chosen.object("prepaidPlan") != nil {
            false
        } else {
            nil
        }

        var orderID = try root.identifier("latestOrderId")
        if orderID == nil {
            orderID = try chosen.identifier("latestSuccessfulOrderId")
            for item in items where orderID == nil { orderID = try item.identifier("latestSuccessfulOrderId") }
        }

        // Google sets no `startTime` while the first payment is pending.
        let pending = state == .pending || state == .pendingPurchaseCanceled
        let startTime = try pending ? root.rfc3339("startTime") ?? observedAt
            : root.require(root.rfc3339("startTime"), "startTime", "when the subscription was granted, an RFC 3339 date-time")

        let acknowledgement = try root.string("acknowledgementState", maximumBytes: 64) ?? "ACKNOWLEDGEMENT_STATE_UNSPECIFIED"
        let acknowledgementStates = ["ACKNOWLEDGEMENT_STATE_UNSPECIFIED", "ACKNOWLEDGEMENT_STATE_PENDING", "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED"]
        guard acknowledgementStates.contains(acknowledgement) else {
            throw .invalid("acknowledgementState", expected: "one of " + acknowledgementStates.joined(separator: ", "),
                           got: "\"\(acknowledgement)\"")
        }
        let acknowledged = acknowledgement == "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED"

        let purchase = GooglePlayPurchase(
            kind: .subscription, purchaseToken: purchaseToken, orderID: orderID, productID: productID, basePlanID: basePlanID,
            state: state, startTime: startTime, expiryTime: latest?.expiry, autoRenew: autoRenew,
            linkedPurchaseToken: try root.token("linkedPurchaseToken"), acknowledged: acknowledged, observedAt: observedAt,
            // `testPurchase` is an empty object when present.
            environment: root.value("testPurchase") != nil ? .sandbox : .production,
            // A price Google shaped in a way not read here leaves the period
            // without an amount; it never stops the purchase being recorded.
            sale: try? sale(of: chosen, regionCode: root.string("regionCode", maximumBytes: 16)))
        let account = try root.object("externalAccountIdentifiers")
        return FetchedPlayPurchase(
            purchase: purchase, obfuscatedAccountID: accountID(account?.value("obfuscatedExternalAccountId")),
            acknowledgementPending: acknowledgement == "ACKNOWLEDGEMENT_STATE_PENDING" && state.grants)
    }

    /// What the line item's current period costs: `autoRenewingPlan.recurringPrice`
    /// (a `Money`: `currencyCode`, `units`, `nanos`) in a base-price phase
    /// (or when Google gives no `offerPhase`), 0 in a free trial, no amount
    /// in an introductory or proration phase (Google gives its price nowhere
    /// in the purchase). Nil when there is nothing to say.
    /// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.subscriptionsv2#SubscriptionPurchaseLineItem
    static func sale(of item: FieldReader, regionCode: String?) throws(GooglePlayParseError) -> SaleTerms? {
        var sale = SaleTerms(storefront: regionCode)
        let phase = try item.object("offerPhase")
        var basePrice = phase == nil
        if let phase, try phase.object("basePrice") != nil { basePrice = true }
        if try phase?.object("freeTrial") != nil {
            sale.offerDiscount = .freeTrial
        } else if try phase?.object("introductoryPrice") != nil {
            sale.offerDiscount = .payAsYouGo
        } else if basePrice,
                  let money = try item.object("autoRenewingPlan")?.object("recurringPrice"),
                  let currency = try money.string("currencyCode", maximumBytes: 8), Currency.minorUnit(currency) != nil {
            let units = try money.int64("units") ?? 0
            let nanos = try money.integer("nanos") ?? 0
            guard units >= 0, units < 1_000_000_000_000, (0..<1_000_000_000).contains(nanos) else { return nil }
            sale.price = Amount(micros: units * 1_000_000 + nanos / 1000)
            sale.currency = currency
        }
        return sale.isEmpty ? nil : sale
    }

    // MARK: purchases.products.get

    /// Reads a `ProductPurchase`. `productID` is the caller's: the one it
    /// asked `products.get` for, which the answer may omit.
    /// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.products#ProductPurchase
    public static func product(json data: Data, purchaseToken: String, productID: String, observedAt: Date)
        throws(GooglePlayParseError) -> FetchedPlayPurchase {
        let root = try FieldReader.document(data, expected: "a ProductPurchase JSON object")
        if let named = try root.identifier("productId"), named != productID {
            throw .invalid("productId", expected: "the product asked for (\"\(productID)\")", got: "\"\(named)\"")
        }
        let purchaseState = try root.require(root.integer("purchaseState"), "purchaseState", "0 (purchased), 1 (canceled) or 2 (pending)")
        let state: GooglePlayPurchase.State
        switch purchaseState {
        case 0: state = .purchased
        case 1: state = .productCanceled
        case 2: state = .productPending
        default: throw .invalid("purchaseState", expected: "0 (purchased), 1 (canceled) or 2 (pending)", got: "\(purchaseState)")
        }
        let purchaseTime = try root.require(root.milliseconds("purchaseTimeMillis"), "purchaseTimeMillis", "milliseconds since 1970")
        let quantity = try root.integer("quantity") ?? 1
        guard InputLimits.quantities.contains(Int(clamping: quantity)) else {
            throw .invalid("quantity", expected: "a quantity between 1 and \(InputLimits.quantities.upperBound)", got: "\(quantity)")
        }
        // 0 Test (licence testing), 1 Promo, 2 Rewarded; absent for a real purchase.
        let purchaseType = try root.integer("purchaseType")
        // 0 yet to be acknowledged, 1 acknowledged; read as 0 when absent,
        // since acknowledging an acknowledged purchase is harmless.
        let acknowledgementState = try root.integer("acknowledgementState") ?? 0
        guard acknowledgementState == 0 || acknowledgementState == 1 else {
            throw .invalid("acknowledgementState", expected: "0 (yet to be acknowledged) or 1 (acknowledged)", got: "\(acknowledgementState)")
        }
        let purchase = GooglePlayPurchase(
            kind: .product, purchaseToken: purchaseToken, orderID: try root.identifier("orderId"), productID: productID,
            state: state, startTime: purchaseTime, acknowledged: acknowledgementState == 1, observedAt: observedAt,
            environment: purchaseType == 0 ? .sandbox : .production, quantity: Int(quantity))
        return FetchedPlayPurchase(purchase: purchase, obfuscatedAccountID: accountID(root.value("obfuscatedExternalAccountId")),
                                   acknowledgementPending: acknowledgementState == 0 && state == .purchased)
    }

    /// The account id when it is one the ledger could hold.
    private static func accountID(_ value: JSONValue?) -> String? {
        guard case .string(let text) = value else { return nil }
        return try? InputLimits.identifier(text, field: "obfuscatedExternalAccountId")
    }
}
