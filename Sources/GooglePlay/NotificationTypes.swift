/// The `notificationType` of a `subscriptionNotification`, with Google's
/// names. It is a hint of what changed, never the fact: the service fetches
/// the purchase and records what Google says of it. A number Google adds
/// later is kept (`unknown`), so such a push is still fetched and recorded.
/// https://developer.android.com/google/play/billing/rtdn-reference#sub
public enum SubscriptionNotificationType: Sendable, Hashable, CustomStringConvertible {
    case recovered
    case renewed
    case canceled
    case purchased
    case onHold
    case inGracePeriod
    case restarted
    /// Deprecated by Google; kept so an old push still reads.
    case priceChangeConfirmed
    case deferred
    case paused
    case pauseScheduleChanged
    case revoked
    case expired
    case itemsChanged
    case cancellationScheduled
    case priceChangeUpdated
    case pendingPurchaseCanceled
    case unknown(Int)

    /// Every type Google documents, in its order.
    public static let documented: [SubscriptionNotificationType] = [
        .recovered, .renewed, .canceled, .purchased, .onHold, .inGracePeriod, .restarted, .priceChangeConfirmed,
        .deferred, .paused, .pauseScheduleChanged, .revoked, .expired, .itemsChanged, .cancellationScheduled,
        .priceChangeUpdated, .pendingPurchaseCanceled,
    ]

    public init(rawValue: Int) {
        self = Self.documented.first { $0.rawValue == rawValue } ?? .unknown(rawValue)
    }

    public var rawValue: Int {
        switch self {
        case .recovered: 1
        case .renewed: 2
        case .canceled: 3
        case .purchased: 4
        case .onHold: 5
        case .inGracePeriod: 6
        case .restarted: 7
        case .priceChangeConfirmed: 8
        case .deferred: 9
        case .paused: 10
        case .pauseScheduleChanged: 11
        case .revoked: 12
        case .expired: 13
        case .itemsChanged: 17
        case .cancellationScheduled: 18
        case .priceChangeUpdated: 19
        case .pendingPurchaseCanceled: 20
        case .unknown(let number): number
        }
    }

    /// Google's name (`SUBSCRIPTION_RECOVERED`), or the number of one this
    /// does not know.
    public var googleName: String {
        switch self {
        case .recovered: "SUBSCRIPTION_RECOVERED"
        case .renewed: "SUBSCRIPTION_RENEWED"
        case .canceled: "SUBSCRIPTION_CANCELED"
        case .purchased: "SUBSCRIPTION_PURCHASED"
        case .onHold: "SUBSCRIPTION_ON_HOLD"
        case .inGracePeriod: "SUBSCRIPTION_IN_GRACE_PERIOD"
        case .restarted: "SUBSCRIPTION_RESTARTED"
        case .priceChangeConfirmed: "SUBSCRIPTION_PRICE_CHANGE_CONFIRMED"
        case .deferred: "SUBSCRIPTION_DEFERRED"
        case .paused: "SUBSCRIPTION_PAUSED"
        case .pauseScheduleChanged: "SUBSCRIPTION_PAUSE_SCHEDULE_CHANGED"
        case .revoked: "SUBSCRIPTION_REVOKED"
        case .expired: "SUBSCRIPTION_EXPIRED"
        case .itemsChanged: "SUBSCRIPTION_ITEMS_CHANGED"
        case .cancellationScheduled: "SUBSCRIPTION_CANCELLATION_SCHEDULED"
        case .priceChangeUpdated: "SUBSCRIPTION_PRICE_CHANGE_UPDATED"
        case .pendingPurchaseCanceled: "SUBSCRIPTION_PENDING_PURCHASE_CANCELED"
        case .unknown(let number): "UNKNOWN_\(number)"
        }
    }

    public var description: String { "\(googleName) (\(rawValue))" }
}

/// The `notificationType` of a `oneTimeProductNotification`; unknown
/// numbers are kept as for subscriptions.
/// https://developer.android.com/google/play/billing/rtdn-reference#one-time
public enum OneTimeProductNotificationType: Sendable, Hashable, CustomStringConvertible {
    case purchased
    case canceled
    case unknown(Int)

    public static let documented: [OneTimeProductNotificationType] = [.purchased, .canceled]

    public init(rawValue: Int) {
        self = Self.documented.first { $0.rawValue == rawValue } ?? .unknown(rawValue)
    }

    public var rawValue: Int {
        switch self {
        case .purchased: 1
        case .canceled: 2
        case .unknown(let number): number
        }
    }

    public var googleName: String {
        switch self {
        case .purchased: "ONE_TIME_PRODUCT_PURCHASED"
        case .canceled: "ONE_TIME_PRODUCT_CANCELED"
        case .unknown(let number): "UNKNOWN_\(number)"
        }
    }

    public var description: String { "\(googleName) (\(rawValue))" }
}

/// `productType` of a `voidedPurchaseNotification`.
/// https://developer.android.com/google/play/billing/rtdn-reference#voided-purchase
public enum VoidedProductType: Sendable, Hashable {
    /// `PRODUCT_TYPE_SUBSCRIPTION` (1).
    case subscription
    /// `PRODUCT_TYPE_ONE_TIME` (2).
    case oneTime
    case unknown(Int)

    public init(rawValue: Int) {
        self = switch rawValue {
        case 1: .subscription
        case 2: .oneTime
        default: .unknown(rawValue)
        }
    }

    public var rawValue: Int {
        switch self {
        case .subscription: 1
        case .oneTime: 2
        case .unknown(let number): number
        }
    }
}

/// `refundType` of a `voidedPurchaseNotification`.
/// https://developer.android.com/google/play/billing/rtdn-reference#voided-purchase
public enum VoidedRefundType: Sendable, Hashable {
    /// `REFUND_TYPE_FULL_REFUND` (1): the whole purchase is voided.
    case fullRefund
    /// `REFUND_TYPE_QUANTITY_BASED_PARTIAL_REFUND` (2): some units of a
    /// multi-quantity purchase are.
    case quantityBasedPartialRefund
    case unknown(Int)

    public init(rawValue: Int) {
        self = switch rawValue {
        case 1: .fullRefund
        case 2: .quantityBasedPartialRefund
        default: .unknown(rawValue)
        }
    }

    public var rawValue: Int {
        switch self {
        case .fullRefund: 1
        case .quantityBasedPartialRefund: 2
        case .unknown(let number): number
        }
    }
}
