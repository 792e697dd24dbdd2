import JSON
import Foundation

/// The store a fact came from. Facts stored before there was a second store
/// say nothing, and are App Store facts.
public enum Store: String, Sendable, Hashable, Codable, CaseIterable {
    case appStore = "app_store"
    case googlePlay = "google_play"
}

/// What Google Play said about one purchase token when the service fetched
/// it (`purchases.subscriptionsv2.get` or `purchases.products.get`): the
/// fact. A notification only says when to look; what was fetched is what
/// counts, so a repeated, missed or reordered push converges on the last
/// fetched state.
/// https://developer.android.com/google/play/billing/rtdn-reference
/// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.subscriptionsv2
/// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.products
public struct GooglePlayPurchase: Sendable, Hashable, Codable {
    public enum Kind: String, Sendable, Hashable, Codable {
        case subscription, product
    }

    /// `subscriptionState` of a `SubscriptionPurchaseV2`, or for a one-time
    /// product its `purchaseState` (0 `PURCHASED`, 1 `CANCELED`, 2 `PENDING`),
    /// stored as Google spells them.
    public enum State: String, Sendable, Hashable, Codable, CaseIterable {
        case active = "SUBSCRIPTION_STATE_ACTIVE"
        case inGracePeriod = "SUBSCRIPTION_STATE_IN_GRACE_PERIOD"
        case canceled = "SUBSCRIPTION_STATE_CANCELED"
        case onHold = "SUBSCRIPTION_STATE_ON_HOLD"
        case paused = "SUBSCRIPTION_STATE_PAUSED"
        case expired = "SUBSCRIPTION_STATE_EXPIRED"
        case pending = "SUBSCRIPTION_STATE_PENDING"
        case pendingPurchaseCanceled = "SUBSCRIPTION_STATE_PENDING_PURCHASE_CANCELED"
        case unspecified = "SUBSCRIPTION_STATE_UNSPECIFIED"
        case purchased = "PURCHASED"
        case productCanceled = "CANCELED"
        case productPending = "PENDING"

        /// Whether the purchase grants until its expiry (a subscription) or
        /// for good (a one-time product): `ACTIVE`, `IN_GRACE_PERIOD` and
        /// `CANCELED` subscriptions, and products in `purchaseState` 0.
        public var grants: Bool {
            switch self {
            case .active, .inGracePeriod, .canceled, .purchased: true
            default: false
            }
        }
    }

    public var kind: Kind
    /// The purchase's identity, like an original transaction id.
    public var purchaseToken: String
    /// `latestOrderId` (a subscription) or `orderId` (a product), like a
    /// transaction id; absent for a pending purchase.
    public var orderID: String?
    /// Play's `productId`.
    public var productID: String
    /// The line item's `offerDetails.basePlanId` (subscriptions).
    public var basePlanID: String?
    public var state: State
    /// `startTime` (a subscription) or `purchaseTimeMillis` (a product).
    public var startTime: Date
    /// The line item's `expiryTime` (subscriptions).
    public var expiryTime: Date?
    /// `autoRenewingPlan.autoRenewEnabled` (subscriptions).
    public var autoRenew: Bool?
    /// The purchase this one replaces (upgrade, downgrade, resubscribe).
    public var linkedPurchaseToken: String?
    /// Whether Google had the purchase acknowledged when it was fetched.
    public var acknowledged: Bool
    /// The instant the state is of: the notification's `eventTimeMillis`,
    /// or when it was fetched (never later than that).
    public var observedAt: Date
    /// A test purchase (`testPurchase`, or `purchaseType` 0) is Sandbox.
    public var environment: Environment
    public var quantity: Int
    public var source: String
    /// What the current period cost, its offer and the region (absent when
    /// Google said none of it).
    public var sale: SaleTerms?

    public init(kind: Kind, purchaseToken: String, orderID: String?, productID: String, basePlanID: String? = nil,
                state: State, startTime: Date, expiryTime: Date? = nil, autoRenew: Bool? = nil,
                linkedPurchaseToken: String? = nil, acknowledged: Bool, observedAt: Date,
                environment: Environment = .production, quantity: Int = 1, source: String = FactSource.googlePlay,
                sale: SaleTerms? = nil) {
        self.kind = kind
        self.purchaseToken = purchaseToken
        self.orderID = orderID
        self.productID = productID
        self.basePlanID = basePlanID
        self.state = state
        self.startTime = startTime
        self.expiryTime = expiryTime
        self.autoRenew = autoRenew
        self.linkedPurchaseToken = linkedPurchaseToken
        self.acknowledged = acknowledged
        self.observedAt = observedAt
        self.environment = environment
        self.quantity = quantity
        self.source = source
        self.sale = sale
    }

    enum CodingKeys: String, CodingKey {
        case kind, purchaseToken, orderID = "orderId", productID = "productId", basePlanID = "basePlanId", state
        case startTime, expiryTime, autoRenew, linkedPurchaseToken, acknowledged, observedAt, environment, quantity, source, sale
    }

    /// The catalog ids this purchase may be listed under, most specific
    /// first: `productId:basePlanId`, then `productId`.
    public var catalogIDs: [String] {
        basePlanID.map { ["\(productID):\($0)", productID] } ?? [productID]
    }
}

/// A purchase Google reports voided (`purchases.voidedpurchases.list`, or a
/// `voidedPurchaseNotification`): refunded, charged back or revoked. It
/// grants nothing from `voidedAt`.
/// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.voidedpurchases
/// https://developer.android.com/google/play/billing/rtdn-reference#voided-purchase
public struct GooglePlayVoid: Sendable, Hashable, Codable {
    public var purchaseToken: String
    public var orderID: String?
    /// `voidedTimeMillis`.
    public var voidedAt: Date
    /// `voidedReason`: 0 other, 1 remorse, 2 not received, 3 defective,
    /// 4 accidental purchase, 5 fraud, 6 friendly fraud, 7 chargeback.
    public var reason: Int?
    /// `voidedSource`: 0 user, 1 developer, 2 Google.
    public var voidedSource: Int?
    public var environment: Environment
    public var source: String

    public init(purchaseToken: String, orderID: String?, voidedAt: Date, reason: Int? = nil, voidedSource: Int? = nil,
                environment: Environment = .production, source: String = FactSource.googlePlay) {
        self.purchaseToken = purchaseToken
        self.orderID = orderID
        self.voidedAt = voidedAt
        self.reason = reason
        self.voidedSource = voidedSource
        self.environment = environment
        self.source = source
    }

    enum CodingKeys: String, CodingKey {
        case purchaseToken, orderID = "orderId", voidedAt, reason, voidedSource, environment, source
    }
}

extension FactSource {
    /// Google Play: a push, a link, a refresh or the voided-purchase reconciler.
    public static let googlePlay = "googleplay"
}

extension Store {
    /// The key under which a purchase is owned: App Store ids as before
    /// (`Environment.ownershipKey`), Play tokens behind a prefix with a
    /// control character no identifier may hold (`InputLimits`), so a token
    /// never equals an App Store id of either environment.
    public func ownershipKey(_ id: String, environment: Environment) -> String {
        switch self {
        case .appStore: environment.ownershipKey(id)
        case .googlePlay: Self.googlePlayKeyPrefix + environment.ownershipKey(id)
        }
    }

    static let googlePlayKeyPrefix = "google_play\u{1F}"

    /// The store, environment and bare id of an ownership key.
    public static func parseOwnershipKey(_ key: String) -> (store: Store, environment: Environment, id: String) {
        let store: Store = key.hasPrefix(googlePlayKeyPrefix) ? .googlePlay : .appStore
        let rest = store == .googlePlay ? String(key.dropFirst(googlePlayKeyPrefix.count)) : key
        let (environment, id) = Environment.parseOwnershipKey(rest)
        return (store, environment, id)
    }
}

extension GooglePlayPurchase {
    /// A line for the history, e.g. "subscription pro_monthly:monthly
    /// (order GPA.1-2-3, token abc) SUBSCRIPTION_STATE_ACTIVE until …".
    public var summary: String {
        var text = "\(kind.rawValue) \(catalogIDs[0]) ("
        if let orderID { text += "order \(orderID), " }
        text += "token \(purchaseToken)) \(state.rawValue)"
        if let expiryTime { text += " until \(RFC3339.format(expiryTime))" }
        if let autoRenew { text += autoRenew ? ", renews" : ", auto-renew off" }
        if let linkedPurchaseToken { text += ", replaces token \(linkedPurchaseToken)" }
        if !acknowledged { text += ", not acknowledged yet" }
        if environment == .sandbox { text += " [Sandbox]" }
        return text
    }
}

extension GooglePlayVoid {
    /// `voidedReason` in words.
    /// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.voidedpurchases#VoidedPurchase
    public static func reasonName(_ reason: Int) -> String {
        switch reason {
        case 0: "other"
        case 1: "remorse"
        case 2: "not received"
        case 3: "defective"
        case 4: "accidental purchase"
        case 5: "fraud"
        case 6: "friendly fraud"
        case 7: "chargeback"
        default: "reason \(reason)"
        }
    }
}
