import Foundation
import JSON
import Ledger

/// A Real-time developer notification: the JSON inside a Pub/Sub push's
/// `message.data`. It says which purchase token changed, not what it now is;
/// the service fetches that (`purchases.subscriptionsv2.get`,
/// `purchases.products.get`) and records the fetched state.
/// https://developer.android.com/google/play/billing/rtdn-reference
public struct DeveloperNotification: Sendable, Hashable {
    /// The notification's own version ("1.0"), distinct from the others.
    public var version: String
    /// The app it is for; the service applies only its own package's.
    public var packageName: String
    /// `eventTimeMillis`: when the event happened.
    public var eventTime: Date
    /// Which of Google's mutually exclusive notifications it carries.
    public var content: Content

    public enum Content: Sendable, Hashable {
        case subscription(SubscriptionNotification)
        case oneTimeProduct(OneTimeProductNotification)
        case voidedPurchase(VoidedPurchaseNotification)
        case test(TestNotification)
        /// A kind Google added after this was written (its field name, such
        /// as `pendingRefundReviewNotification`): not malformed, so the push
        /// can be answered 200 instead of being retried until it expires.
        case other(String)
    }

    /// https://developer.android.com/google/play/billing/rtdn-reference#sub
    public struct SubscriptionNotification: Sendable, Hashable {
        public var version: String
        public var notificationType: SubscriptionNotificationType
        public var purchaseToken: String
        /// Absent from newer notifications: the fetched purchase names its
        /// products (`lineItems[].productId`).
        public var subscriptionID: String?

        public init(version: String = "1.0", notificationType: SubscriptionNotificationType, purchaseToken: String,
                    subscriptionID: String? = nil) {
            self.version = version
            self.notificationType = notificationType
            self.purchaseToken = purchaseToken
            self.subscriptionID = subscriptionID
        }
    }

    /// https://developer.android.com/google/play/billing/rtdn-reference#one-time
    public struct OneTimeProductNotification: Sendable, Hashable {
        public var version: String
        public var notificationType: OneTimeProductNotificationType
        public var purchaseToken: String
        /// The product id: `purchases.products.get` needs it.
        public var sku: String

        public init(version: String = "1.0", notificationType: OneTimeProductNotificationType, purchaseToken: String, sku: String) {
            self.version = version
            self.notificationType = notificationType
            self.purchaseToken = purchaseToken
            self.sku = sku
        }
    }

    /// https://developer.android.com/google/play/billing/rtdn-reference#voided-purchase
    public struct VoidedPurchaseNotification: Sendable, Hashable {
        public var purchaseToken: String
        public var orderID: String
        public var productType: VoidedProductType
        public var refundType: VoidedRefundType

        public init(purchaseToken: String, orderID: String, productType: VoidedProductType, refundType: VoidedRefundType) {
            self.purchaseToken = purchaseToken
            self.orderID = orderID
            self.productType = productType
            self.refundType = refundType
        }
    }

    /// Sent from the Play Console to check the topic; records nothing.
    /// https://developer.android.com/google/play/billing/rtdn-reference#test
    public struct TestNotification: Sendable, Hashable {
        public var version: String

        public init(version: String = "1.0") { self.version = version }
    }

    public init(version: String = "1.0", packageName: String, eventTime: Date, content: Content) {
        self.version = version
        self.packageName = packageName
        self.eventTime = eventTime
        self.content = content
    }

    public var subscriptionNotification: SubscriptionNotification? {
        if case .subscription(let notification) = content { return notification }
        return nil
    }

    public var oneTimeProductNotification: OneTimeProductNotification? {
        if case .oneTimeProduct(let notification) = content { return notification }
        return nil
    }

    public var voidedPurchaseNotification: VoidedPurchaseNotification? {
        if case .voidedPurchase(let notification) = content { return notification }
        return nil
    }

    public var testNotification: TestNotification? {
        if case .test(let notification) = content { return notification }
        return nil
    }

    /// The purchase token it is about, if any.
    public var purchaseToken: String? {
        switch content {
        case .subscription(let notification): notification.purchaseToken
        case .oneTimeProduct(let notification): notification.purchaseToken
        case .voidedPurchase(let notification): notification.purchaseToken
        case .test, .other: nil
        }
    }

    /// A voided purchase as the ledger's fact, voided at the event's time:
    /// the notification carries no `voidedTimeMillis` of its own.
    public func voidFact(environment: Ledger.Environment = .production) -> GooglePlayVoid? {
        guard let voided = voidedPurchaseNotification else { return nil }
        return GooglePlayVoid(purchaseToken: voided.purchaseToken, orderID: voided.orderID, voidedAt: eventTime,
                              environment: environment)
    }

    // MARK: Parsing

    static let kinds = ["subscriptionNotification", "oneTimeProductNotification", "voidedPurchaseNotification", "testNotification"]

    /// Parses the decoded `message.data`; fields are named under `path`.
    public static func parse(json data: Data, path: String = "message.data") throws(GooglePlayParseError) -> DeveloperNotification {
        let root = try FieldReader.document(data, expected: "a DeveloperNotification JSON object", path: path)
        return try parse(root)
    }

    static func parse(_ root: FieldReader) throws(GooglePlayParseError) -> DeveloperNotification {
        let version = try root.require(root.string("version", maximumBytes: 64), "version", "the notification's version, a string")
        let packageName = try root.require(root.identifier("packageName"), "packageName", "the app's package name")
        let eventTime = try root.require(root.milliseconds("eventTimeMillis"), "eventTimeMillis", "milliseconds since 1970")

        let present = kinds.filter { root.value($0) != nil }
        guard present.count <= 1 else {
            throw .invalid(root.name(present[1]), expected: "the only notification of the message (Google sends exactly one)",
                           got: present.joined(separator: " and "))
        }
        let content: Content
        switch present.first {
        case "subscriptionNotification":
            let object = try root.require(root.object("subscriptionNotification"), "subscriptionNotification", "an object")
            content = .subscription(SubscriptionNotification(
                version: try object.require(object.string("version", maximumBytes: 64), "version", "a string"),
                notificationType: SubscriptionNotificationType(rawValue: try notificationType(object)),
                purchaseToken: try object.require(object.token("purchaseToken"), "purchaseToken", FieldReader.tokenExpectation),
                subscriptionID: try object.identifier("subscriptionId")))
        case "oneTimeProductNotification":
            let object = try root.require(root.object("oneTimeProductNotification"), "oneTimeProductNotification", "an object")
            content = .oneTimeProduct(OneTimeProductNotification(
                version: try object.require(object.string("version", maximumBytes: 64), "version", "a string"),
                notificationType: OneTimeProductNotificationType(rawValue: try notificationType(object)),
                purchaseToken: try object.require(object.token("purchaseToken"), "purchaseToken", FieldReader.tokenExpectation),
                sku: try object.require(object.identifier("sku"), "sku", "the product id")))
        case "voidedPurchaseNotification":
            let object = try root.require(root.object("voidedPurchaseNotification"), "voidedPurchaseNotification", "an object")
            content = .voidedPurchase(VoidedPurchaseNotification(
                purchaseToken: try object.require(object.token("purchaseToken"), "purchaseToken", FieldReader.tokenExpectation),
                orderID: try object.require(object.identifier("orderId"), "orderId", "the voided order's id"),
                productType: VoidedProductType(rawValue: try smallInteger(object, "productType")),
                refundType: VoidedRefundType(rawValue: try smallInteger(object, "refundType"))))
        case "testNotification":
            let object = try root.require(root.object("testNotification"), "testNotification", "an object")
            content = .test(TestNotification(version: try object.require(object.string("version", maximumBytes: 64), "version", "a string")))
        default:
            // A notification of a kind not known here: its field is an
            // object named `…Notification`.
            guard let other = root.fields.keys.sorted().first(where: { key in
                key.hasSuffix("Notification") && key.utf8.count <= 64 && { if case .object = root.fields[key] { true } else { false } }()
            }) else {
                throw .missing(root.name("subscriptionNotification"),
                               expected: "exactly one of " + kinds.joined(separator: ", "))
            }
            content = .other(other)
        }
        return DeveloperNotification(version: version, packageName: packageName, eventTime: eventTime, content: content)
    }

    private static func notificationType(_ object: FieldReader) throws(GooglePlayParseError) -> Int {
        try smallInteger(object, "notificationType")
    }

    /// A required code Google numbers (1, 2, ...).
    private static func smallInteger(_ object: FieldReader, _ key: String) throws(GooglePlayParseError) -> Int {
        let number = try object.require(object.integer(key), key, "a number as Google documents it")
        guard (0...1_000_000).contains(number) else {
            throw .invalid(object.name(key), expected: "a code between 0 and 1000000", got: "\(number)")
        }
        return Int(number)
    }
}
