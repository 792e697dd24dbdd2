// Test support: Google Play's documents, shaped field for field as Google's
// reference pages show them, with defaults a test overrides. Not used by the
// product.
import Foundation
import GooglePlay
import JSON
import Ledger

/// Builders of what Google sends and answers: `SubscriptionPurchaseV2`,
/// `ProductPurchase`, `voidedpurchases.list` pages, `DeveloperNotification`
/// and the Pub/Sub push around it. Google's JSON writes `int64` fields as
/// strings of digits and times as RFC 3339, and omits what is unset; so do
/// these.
public enum GooglePlaySamples {
    public static let packageName = "com.example.subledger"
    public static let productID = "pro_monthly"
    public static let basePlanID = "monthly"
    public static let orderID = "GPA.3383-0411-6412-45078"
    public static let startTime = RFC3339.parse("2024-03-01T12:00:00.123Z")!
    public static let expiryTime = RFC3339.parse("2024-04-01T12:00:00.123Z")!
    public static let eventTime = RFC3339.parse("2024-03-01T12:00:05Z")!

    /// An opaque token shaped like Play's (letters, digits, dots, dashes,
    /// underscores, ~150 characters); `n` tells tokens apart.
    public static func purchaseToken(_ n: Int = 1) -> String {
        "kclnmdphgcalgpcmnmlkbhpb.AO-J1Oz\(n)Xb3nVq_5T2sJzqE8mYw7cR0fLdK1pGhUa9WvB6xNtE4iQoZsM3yF2lHj7gPwA-" + String(repeating: "x", count: 60)
    }

    public static func data(_ value: JSONValue) -> Data { CanonicalJSON.encode(value) }

    static func millis(_ date: Date) -> JSONValue { .string(String(RFC3339.milliseconds(of: date))) }

    // MARK: purchases.subscriptionsv2

    /// A `SubscriptionPurchaseLineItem`.
    /// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.subscriptionsv2#SubscriptionPurchaseLineItem
    public struct LineItem: Sendable {
        public var productID: String
        public var expiryTime: Date?
        public var basePlanID: String?
        public var offerID: String?
        /// `autoRenewingPlan.autoRenewEnabled`; nil makes a `prepaidPlan` item.
        public var autoRenewEnabled: Bool?
        public var latestSuccessfulOrderID: String?

        public init(productID: String = GooglePlaySamples.productID, expiryTime: Date? = GooglePlaySamples.expiryTime,
                    basePlanID: String? = GooglePlaySamples.basePlanID, offerID: String? = nil, autoRenewEnabled: Bool? = true,
                    latestSuccessfulOrderID: String? = GooglePlaySamples.orderID) {
            self.productID = productID
            self.expiryTime = expiryTime
            self.basePlanID = basePlanID
            self.offerID = offerID
            self.autoRenewEnabled = autoRenewEnabled
            self.latestSuccessfulOrderID = latestSuccessfulOrderID
        }

        public var json: JSONValue {
            var fields: [String: JSONValue] = ["productId": .string(productID)]
            if let expiryTime { fields["expiryTime"] = .string(RFC3339.format(expiryTime)) }
            if let autoRenewEnabled {
                var plan: [String: JSONValue] = [
                    "recurringPrice": .object(["currencyCode": .string("USD"), "units": .string("9"), "nanos": .integer(990_000_000)]),
                ]
                // Google's JSON omits a false boolean.
                if autoRenewEnabled { plan["autoRenewEnabled"] = .bool(true) }
                fields["autoRenewingPlan"] = .object(plan)
            } else {
                fields["prepaidPlan"] = .object(["allowExtendAfterTime": .string(RFC3339.format(expiryTime ?? GooglePlaySamples.expiryTime))])
            }
            if let basePlanID {
                var offer: [String: JSONValue] = ["basePlanId": .string(basePlanID), "offerTags": .array([])]
                if let offerID { offer["offerId"] = .string(offerID) }
                fields["offerDetails"] = .object(offer)
            }
            if let latestSuccessfulOrderID { fields["latestSuccessfulOrderId"] = .string(latestSuccessfulOrderID) }
            return .object(fields)
        }
    }

    /// A `SubscriptionPurchaseV2`, as `purchases.subscriptionsv2.get` answers.
    /// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.subscriptionsv2#SubscriptionPurchaseV2
    public static func subscriptionPurchaseV2(
        state: GooglePlayPurchase.State = .active, lineItems: [LineItem] = [LineItem()], startTime: Date? = startTime,
        latestOrderID: String? = orderID, linkedPurchaseToken: String? = nil,
        acknowledgementState: String = "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED", testPurchase: Bool = false,
        obfuscatedExternalAccountID: String? = nil, extra: [String: JSONValue] = [:]
    ) -> JSONValue {
        var fields: [String: JSONValue] = [
            "kind": .string("androidpublisher#subscriptionPurchaseV2"),
            "regionCode": .string("US"),
            "subscriptionState": .string(state.rawValue),
            "lineItems": .array(lineItems.map(\.json)),
            "acknowledgementState": .string(acknowledgementState),
        ]
        if let startTime { fields["startTime"] = .string(RFC3339.format(startTime)) }
        if let latestOrderID { fields["latestOrderId"] = .string(latestOrderID) }
        if let linkedPurchaseToken { fields["linkedPurchaseToken"] = .string(linkedPurchaseToken) }
        if testPurchase { fields["testPurchase"] = .object([:]) }
        if let obfuscatedExternalAccountID {
            fields["externalAccountIdentifiers"] = .object(["obfuscatedExternalAccountId": .string(obfuscatedExternalAccountID)])
        }
        switch state {
        case .canceled:
            fields["canceledStateContext"] = .object(["userInitiatedCancellation": .object([
                "cancelTime": .string(RFC3339.format(GooglePlaySamples.startTime + 86_400)),
                "cancelSurveyResult": .object(["reason": .string("CANCEL_SURVEY_REASON_NOT_ENOUGH_USAGE")]),
            ])])
        case .paused:
            fields["pausedStateContext"] = .object(["autoResumeTime": .string(RFC3339.format(GooglePlaySamples.expiryTime + 30 * 86_400))])
        default: break
        }
        fields.merge(extra) { _, new in new }
        return .object(fields)
    }

    // MARK: purchases.products

    /// A `ProductPurchase`, as `purchases.products.get` answers; a real
    /// purchase has no `purchaseType`, a licence tester's is 0.
    /// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.products#ProductPurchase
    public static func productPurchase(
        purchaseState: Int = 0, purchaseTime: Date = startTime, orderID: String? = orderID, quantity: Int? = nil,
        purchaseType: Int? = nil, acknowledgementState: Int = 1, consumptionState: Int = 0,
        obfuscatedExternalAccountID: String? = nil, productID: String? = nil, purchaseToken: String? = nil
    ) -> JSONValue {
        var fields: [String: JSONValue] = [
            "kind": .string("androidpublisher#productPurchase"),
            "purchaseTimeMillis": millis(purchaseTime),
            "purchaseState": .integer(Int64(purchaseState)),
            "consumptionState": .integer(Int64(consumptionState)),
            "developerPayload": .string(""),
            "acknowledgementState": .integer(Int64(acknowledgementState)),
            "regionCode": .string("US"),
        ]
        if let orderID { fields["orderId"] = .string(orderID) }
        if let quantity { fields["quantity"] = .integer(Int64(quantity)) }
        if let purchaseType { fields["purchaseType"] = .integer(Int64(purchaseType)) }
        if let obfuscatedExternalAccountID { fields["obfuscatedExternalAccountId"] = .string(obfuscatedExternalAccountID) }
        if let productID { fields["productId"] = .string(productID) }
        if let purchaseToken { fields["purchaseToken"] = .string(purchaseToken) }
        return .object(fields)
    }

    // MARK: purchases.voidedpurchases

    /// A `VoidedPurchase`.
    /// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.voidedpurchases#VoidedPurchase
    public static func voidedPurchase(purchaseToken: String = purchaseToken(), orderID: String? = orderID,
                                      purchaseTime: Date = startTime, voidedTime: Date = startTime + 7 * 86_400,
                                      voidedReason: Int? = 1, voidedSource: Int? = 0, voidedQuantity: Int? = nil) -> JSONValue {
        var fields: [String: JSONValue] = [
            "kind": .string("androidpublisher#voidedPurchase"),
            "purchaseToken": .string(purchaseToken),
            "purchaseTimeMillis": millis(purchaseTime),
            "voidedTimeMillis": millis(voidedTime),
        ]
        if let orderID { fields["orderId"] = .string(orderID) }
        if let voidedReason { fields["voidedReason"] = .integer(Int64(voidedReason)) }
        if let voidedSource { fields["voidedSource"] = .integer(Int64(voidedSource)) }
        if let voidedQuantity { fields["voidedQuantity"] = .integer(Int64(voidedQuantity)) }
        return .object(fields)
    }

    /// A `voidedpurchases.list` answer; the last page has no `nextPageToken`.
    /// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.voidedpurchases/list#response-body
    public static func voidedPurchasesPage(_ items: [JSONValue], nextPageToken: String? = nil) -> JSONValue {
        var fields: [String: JSONValue] = ["pageInfo": .object(["totalResults": .integer(Int64(items.count)),
                                                                "resultPerPage": .integer(1000), "startIndex": .integer(0)])]
        if !items.isEmpty { fields["voidedPurchases"] = .array(items) }
        if let nextPageToken { fields["tokenPagination"] = .object(["nextPageToken": .string(nextPageToken)]) }
        return .object(fields)
    }

    // MARK: Real-time developer notifications

    /// Which notification a `DeveloperNotification` carries.
    public enum Notification: Sendable {
        case subscription(SubscriptionNotificationType, purchaseToken: String = GooglePlaySamples.purchaseToken(),
                          subscriptionID: String? = nil)
        case oneTimeProduct(OneTimeProductNotificationType, purchaseToken: String = GooglePlaySamples.purchaseToken(),
                            sku: String = "coins_100")
        case voidedPurchase(purchaseToken: String = GooglePlaySamples.purchaseToken(), orderID: String = GooglePlaySamples.orderID,
                            productType: Int = 1, refundType: Int = 1)
        case test

        var field: (name: String, value: JSONValue) {
            switch self {
            case .subscription(let type, let token, let subscriptionID):
                var fields: [String: JSONValue] = ["version": .string("1.0"), "notificationType": .integer(Int64(type.rawValue)),
                                                   "purchaseToken": .string(token)]
                if let subscriptionID { fields["subscriptionId"] = .string(subscriptionID) }
                return ("subscriptionNotification", .object(fields))
            case .oneTimeProduct(let type, let token, let sku):
                return ("oneTimeProductNotification", .object(["version": .string("1.0"), "notificationType": .integer(Int64(type.rawValue)),
                                                               "purchaseToken": .string(token), "sku": .string(sku)]))
            case .voidedPurchase(let token, let orderID, let productType, let refundType):
                return ("voidedPurchaseNotification", .object(["purchaseToken": .string(token), "orderId": .string(orderID),
                                                               "productType": .integer(Int64(productType)),
                                                               "refundType": .integer(Int64(refundType))]))
            case .test:
                return ("testNotification", .object(["version": .string("1.0")]))
            }
        }
    }

    /// A `DeveloperNotification`; `eventTimeMillis` is a string of digits.
    /// https://developer.android.com/google/play/billing/rtdn-reference#encoding
    public static func developerNotification(_ notification: Notification, packageName: String = packageName,
                                             eventTime: Date = eventTime) -> JSONValue {
        let field = notification.field
        return .object(["version": .string("1.0"), "packageName": .string(packageName), "eventTimeMillis": millis(eventTime),
                        field.name: field.value])
    }

    /// The Pub/Sub push carrying `data` (a `DeveloperNotification`'s JSON),
    /// base64 as Pub/Sub sends it, with both spellings of the message id
    /// and publish time, as Pub/Sub writes them.
    /// https://cloud.google.com/pubsub/docs/push#receive_push
    public static func pushEnvelope(data: Data, messageID: String = "136969346945",
                                    publishTime: String = "2024-03-01T12:00:06.123456789Z",
                                    subscription: String = "projects/example-project/subscriptions/play-rtdn",
                                    attributes: [String: String] = [:]) -> JSONValue {
        .object([
            "message": .object([
                "attributes": .object(attributes.mapValues(JSONValue.string)),
                "data": .string(data.base64EncodedString()),
                "messageId": .string(messageID), "message_id": .string(messageID),
                "publishTime": .string(publishTime), "publish_time": .string(publishTime),
            ]),
            "subscription": .string(subscription),
        ])
    }

    /// A whole push body for `notification`.
    public static func push(_ notification: Notification, messageID: String = "136969346945", packageName: String = packageName,
                            eventTime: Date = eventTime) -> Data {
        data(pushEnvelope(data: data(developerNotification(notification, packageName: packageName, eventTime: eventTime)),
                          messageID: messageID))
    }
}
