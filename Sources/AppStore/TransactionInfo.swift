import Foundation

/// A decoded `signedTransactionInfo` (Apple's `JWSTransactionDecodedPayload`).
/// Swift names say `ID`; the JSON keys are Apple's (`transactionId`).
public struct TransactionInfo: Sendable, Hashable, Codable {
    public var transactionID: String
    public var originalTransactionID: String?
    public var webOrderLineItemID: String?
    public var bundleID: String?
    public var productID: String
    public var subscriptionGroupIdentifier: String?
    public var purchaseDate: Date
    public var originalPurchaseDate: Date?
    public var expiresDate: Date?
    public var quantity: Int?
    public var type: ProductType?
    /// The UUID the app set at purchase; Subledger apps set it to the subscriber id.
    public var appAccountToken: String?
    public var inAppOwnershipType: String?
    public var signedDate: Date
    public var revocationReason: Int?
    public var revocationDate: Date?
    /// `REFUND_FULL`, `REFUND_PRORATED` or `FAMILY_REVOKE`.
    public var revocationType: String?
    /// A prorated refund's share, in thousandths.
    public var revocationPercentage: Int?
    public var isUpgraded: Bool?
    public var offerType: Int?
    public var offerIdentifier: String?
    public var environment: AppStoreEnvironment?
    public var storefront: String?
    public var transactionReason: String?
    public var currency: String?
    /// In milliunits of `currency` (9990 is 9.99).
    public var price: Int64?
    /// `FREE_TRIAL`, `PAY_AS_YOU_GO`, `PAY_UP_FRONT` or `ONE_TIME`.
    public var offerDiscountType: String?

    public init(transactionID: String, originalTransactionID: String? = nil, bundleID: String?, productID: String,
                purchaseDate: Date, originalPurchaseDate: Date? = nil, expiresDate: Date? = nil, quantity: Int? = 1,
                type: ProductType?, appAccountToken: String? = nil, signedDate: Date, revocationReason: Int? = nil,
                revocationDate: Date? = nil, offerType: Int? = nil, environment: AppStoreEnvironment?) {
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.bundleID = bundleID
        self.productID = productID
        self.purchaseDate = purchaseDate
        self.originalPurchaseDate = originalPurchaseDate
        self.expiresDate = expiresDate
        self.quantity = quantity
        self.type = type
        self.appAccountToken = appAccountToken
        self.signedDate = signedDate
        self.revocationReason = revocationReason
        self.revocationDate = revocationDate
        self.offerType = offerType
        self.environment = environment
    }

    enum CodingKeys: String, CodingKey {
        case transactionID = "transactionId", originalTransactionID = "originalTransactionId"
        case webOrderLineItemID = "webOrderLineItemId", bundleID = "bundleId", productID = "productId"
        case subscriptionGroupIdentifier, purchaseDate, originalPurchaseDate, expiresDate, quantity, type, appAccountToken
        case inAppOwnershipType, signedDate, revocationReason, revocationDate, revocationType, revocationPercentage
        case isUpgraded, offerType, offerIdentifier
        case environment, storefront, transactionReason, currency, price, offerDiscountType
    }

    /// Apple's `type` of the product bought.
    public struct ProductType: AppleStringValue {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        public static let autoRenewable = ProductType(rawValue: "Auto-Renewable Subscription")
        public static let nonConsumable = ProductType(rawValue: "Non-Consumable")
        public static let consumable = ProductType(rawValue: "Consumable")
        public static let nonRenewing = ProductType(rawValue: "Non-Renewing Subscription")
    }
}

/// A decoded `signedRenewalInfo` (Apple's `JWSRenewalInfoDecodedPayload`).
/// It carries no bundle id; the notification around it does.
public struct RenewalInfo: Sendable, Hashable, Codable {
    public var originalTransactionID: String?
    public var productID: String?
    public var autoRenewProductID: String?
    /// 1 on, 0 off.
    public var autoRenewStatus: Int?
    public var expirationIntent: Int?
    public var gracePeriodExpiresDate: Date?
    public var isInBillingRetryPeriod: Bool?
    public var offerType: Int?
    public var offerIdentifier: String?
    public var priceIncreaseStatus: Int?
    public var renewalDate: Date?
    public var recentSubscriptionStartDate: Date?
    public var signedDate: Date
    public var environment: AppStoreEnvironment?

    public init(originalTransactionID: String?, productID: String? = nil, autoRenewProductID: String? = nil,
                autoRenewStatus: Int? = 1, expirationIntent: Int? = nil, gracePeriodExpiresDate: Date? = nil,
                isInBillingRetryPeriod: Bool? = nil, renewalDate: Date? = nil, signedDate: Date,
                environment: AppStoreEnvironment?) {
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.autoRenewProductID = autoRenewProductID
        self.autoRenewStatus = autoRenewStatus
        self.expirationIntent = expirationIntent
        self.gracePeriodExpiresDate = gracePeriodExpiresDate
        self.isInBillingRetryPeriod = isInBillingRetryPeriod
        self.renewalDate = renewalDate
        self.signedDate = signedDate
        self.environment = environment
    }

    enum CodingKeys: String, CodingKey {
        case originalTransactionID = "originalTransactionId", productID = "productId"
        case autoRenewProductID = "autoRenewProductId"
        case autoRenewStatus, expirationIntent, gracePeriodExpiresDate, isInBillingRetryPeriod, offerType, offerIdentifier
        case priceIncreaseStatus, renewalDate, recentSubscriptionStartDate, signedDate, environment
    }

    /// `autoRenewStatus` as a flag, when present.
    public var autoRenew: Bool? { autoRenewStatus.map { $0 == 1 } }
}
