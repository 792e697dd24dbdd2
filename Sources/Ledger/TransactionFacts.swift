import Foundation

// The payloads of the events about one transaction. Swift names say `ID`;
// the stored JSON keeps the contract's `Id` spelling through `CodingKeys`.

/// One App Store transaction as purchased, renewed, restored or transferred in.
///
/// `productType`, `group` and `duration` are the terms of sale copied from the
/// catalog when the fact was decided, so a later catalog edit does not
/// rewrite history; when absent, the catalog at fold time is used.
public struct TransactionFact: Sendable, Hashable, Codable {
    public var transactionID: String
    public var originalTransactionID: String
    public var productID: String
    public var productType: ProductType?
    public var group: String?
    public var duration: ISODuration?
    public var purchaseDate: Date
    /// Auto-renewable: the end the store gave this transaction.
    public var expiresDate: Date?
    public var quantity: Int
    public var autoRenew: Bool?
    public var deviceID: String?
    public var environment: Environment
    public var source: String
    /// What the store said about the sale, for support (absent when the
    /// fact's source did not say).
    public var details: AppleTransactionDetails
    /// The store that sold it. Stored facts are the App Store's (Google
    /// Play's are stored as `GooglePlayPurchase`, and only judged as
    /// transactions), so it is never encoded.
    public var store: Store = .appStore

    public init(transactionID: String, originalTransactionID: String, productID: String,
                productType: ProductType? = nil, group: String? = nil, duration: ISODuration? = nil,
                purchaseDate: Date, expiresDate: Date? = nil, quantity: Int = 1, autoRenew: Bool? = nil,
                deviceID: String? = nil, environment: Environment = .production, source: String = FactSource.api,
                details: AppleTransactionDetails = AppleTransactionDetails()) {
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.productType = productType
        self.group = group
        self.duration = duration
        self.purchaseDate = purchaseDate
        self.expiresDate = expiresDate
        self.quantity = quantity
        self.autoRenew = autoRenew
        self.deviceID = deviceID
        self.environment = environment
        self.source = source
        self.details = details
    }

    enum CodingKeys: String, CodingKey {
        case transactionID = "transactionId", originalTransactionID = "originalTransactionId", productID = "productId"
        case productType, group, duration, purchaseDate, expiresDate, quantity, autoRenew
        case deviceID = "deviceId"
        case environment, source
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        transactionID = try container.decode(String.self, forKey: .transactionID)
        originalTransactionID = try container.decode(String.self, forKey: .originalTransactionID)
        productID = try container.decode(String.self, forKey: .productID)
        productType = try container.decodeIfPresent(ProductType.self, forKey: .productType)
        group = try container.decodeIfPresent(String.self, forKey: .group)
        duration = try container.decodeIfPresent(ISODuration.self, forKey: .duration)
        purchaseDate = try container.decode(Date.self, forKey: .purchaseDate)
        expiresDate = try container.decodeIfPresent(Date.self, forKey: .expiresDate)
        quantity = try container.decode(Int.self, forKey: .quantity)
        autoRenew = try container.decodeIfPresent(Bool.self, forKey: .autoRenew)
        deviceID = try container.decodeIfPresent(String.self, forKey: .deviceID)
        environment = try container.decode(Environment.self, forKey: .environment)
        source = try container.decode(String.self, forKey: .source)
        details = try AppleTransactionDetails(from: decoder)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(transactionID, forKey: .transactionID)
        try container.encode(originalTransactionID, forKey: .originalTransactionID)
        try container.encode(productID, forKey: .productID)
        try container.encodeIfPresent(productType, forKey: .productType)
        try container.encodeIfPresent(group, forKey: .group)
        try container.encodeIfPresent(duration, forKey: .duration)
        try container.encode(purchaseDate, forKey: .purchaseDate)
        try container.encodeIfPresent(expiresDate, forKey: .expiresDate)
        try container.encode(quantity, forKey: .quantity)
        try container.encodeIfPresent(autoRenew, forKey: .autoRenew)
        try container.encodeIfPresent(deviceID, forKey: .deviceID)
        try container.encode(environment, forKey: .environment)
        try container.encode(source, forKey: .source)
        try details.encode(to: encoder)
    }
}

/// What the store says about a sale beyond its terms, kept for support and
/// counted by the analytics: who holds it (`inAppOwnershipType`), the offer
/// it was bought with, the period it pays for across restored copies
/// (`webOrderLineItemId`), and what it cost (`sale`). Stored flat in the
/// transaction's JSON (`price` as a decimal string, `currency`,
/// `offerDiscount`, `storefront`).
/// https://developer.apple.com/documentation/appstoreserverapi/jwstransactiondecodedpayload
public struct AppleTransactionDetails: Sendable, Hashable, Codable {
    /// `PURCHASED` or `FAMILY_SHARED`.
    public var ownershipType: String?
    /// 1 introductory, 2 promotional, 3 offer code, 4 win-back (`OfferKind`).
    public var offerType: Int?
    /// The subscription period this transaction pays for; a restored copy
    /// of a period carries the same one.
    public var webOrderLineItemID: String?
    /// The subscriber upgraded away from this transaction (its revocation
    /// is not a refund).
    public var isUpgraded: Bool?
    /// The price, currency, offer payment mode and storefront.
    public var sale: SaleTerms

    public init(ownershipType: String? = nil, offerType: Int? = nil, webOrderLineItemID: String? = nil, isUpgraded: Bool? = nil,
                sale: SaleTerms = SaleTerms()) {
        self.ownershipType = ownershipType
        self.offerType = offerType
        self.webOrderLineItemID = webOrderLineItemID
        self.isUpgraded = isUpgraded
        self.sale = sale
    }

    public var isEmpty: Bool { self == AppleTransactionDetails() }

    enum CodingKeys: String, CodingKey {
        case ownershipType, offerType, webOrderLineItemID = "webOrderLineItemId", isUpgraded
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        ownershipType = try container.decodeIfPresent(String.self, forKey: .ownershipType)
        offerType = try container.decodeIfPresent(Int.self, forKey: .offerType)
        webOrderLineItemID = try container.decodeIfPresent(String.self, forKey: .webOrderLineItemID)
        isUpgraded = try container.decodeIfPresent(Bool.self, forKey: .isUpgraded)
        // The sale's keys sit beside these, flat in the transaction's JSON.
        sale = try SaleTerms(from: decoder)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(ownershipType, forKey: .ownershipType)
        try container.encodeIfPresent(offerType, forKey: .offerType)
        try container.encodeIfPresent(webOrderLineItemID, forKey: .webOrderLineItemID)
        try container.encodeIfPresent(isUpgraded, forKey: .isUpgraded)
        try sale.encode(to: encoder)
    }
}

/// What Apple says about a refund or revocation: why, and how much
/// (`revocationType` `REFUND_FULL`, `REFUND_PRORATED` or `FAMILY_REVOKE`;
/// `revocationPercentage` in milliunits for a prorated refund: 50000 is 50%).
/// https://developer.apple.com/documentation/appstoreserverapi/jwstransactiondecodedpayload
public struct AppleRevocationDetails: Sendable, Hashable, Codable {
    /// 0 another reason, 1 an issue with the app.
    public var revocationReason: Int?
    public var revocationType: String?
    public var revocationPercentage: Int?

    public init(revocationReason: Int? = nil, revocationType: String? = nil, revocationPercentage: Int? = nil) {
        self.revocationReason = revocationReason
        self.revocationType = revocationType
        self.revocationPercentage = revocationPercentage
    }

    public var isEmpty: Bool { self == AppleRevocationDetails() }
}

/// A refund or revocation: what the transaction gave ends at `revocationDate`.
public struct RefundFact: Sendable, Hashable, Codable {
    public var transactionID: String
    public var originalTransactionID: String
    public var productID: String
    public var revocationDate: Date
    public var reason: String?
    public var environment: Environment
    public var source: String
    public var details: AppleRevocationDetails

    public init(transactionID: String, originalTransactionID: String, productID: String, revocationDate: Date,
                reason: String? = nil, environment: Environment = .production, source: String = FactSource.api,
                details: AppleRevocationDetails = AppleRevocationDetails()) {
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.revocationDate = revocationDate
        self.reason = reason
        self.environment = environment
        self.source = source
        self.details = details
    }

    enum CodingKeys: String, CodingKey {
        case transactionID = "transactionId", originalTransactionID = "originalTransactionId", productID = "productId"
        case revocationDate, reason, environment, source
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        transactionID = try container.decode(String.self, forKey: .transactionID)
        originalTransactionID = try container.decode(String.self, forKey: .originalTransactionID)
        productID = try container.decode(String.self, forKey: .productID)
        revocationDate = try container.decode(Date.self, forKey: .revocationDate)
        reason = try container.decodeIfPresent(String.self, forKey: .reason)
        environment = try container.decode(Environment.self, forKey: .environment)
        source = try container.decode(String.self, forKey: .source)
        details = try AppleRevocationDetails(from: decoder)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(transactionID, forKey: .transactionID)
        try container.encode(originalTransactionID, forKey: .originalTransactionID)
        try container.encode(productID, forKey: .productID)
        try container.encode(revocationDate, forKey: .revocationDate)
        try container.encodeIfPresent(reason, forKey: .reason)
        try container.encode(environment, forKey: .environment)
        try container.encode(source, forKey: .source)
        try details.encode(to: encoder)
    }
}

/// A refund or revocation undone by the store (App Store `REFUND_REVERSED`):
/// from `date` on, the transaction gives again what the refund took.
public struct RefundReversal: Sendable, Hashable, Codable {
    public var transactionID: String
    public var originalTransactionID: String
    public var productID: String
    /// When the reversal took effect (the notification's signed date).
    public var date: Date
    public var reason: String?
    public var environment: Environment
    public var source: String

    public init(transactionID: String, originalTransactionID: String, productID: String, date: Date,
                reason: String? = nil, environment: Environment = .production, source: String = FactSource.appStore) {
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.date = date
        self.reason = reason
        self.environment = environment
        self.source = source
    }

    enum CodingKeys: String, CodingKey {
        case transactionID = "transactionId", originalTransactionID = "originalTransactionId", productID = "productId"
        case date, reason, environment, source
    }
}

/// The store moved an auto-renewable transaction's end later without a new
/// transaction (App Store `RENEWAL_EXTENDED`: same `transactionId`, later
/// `expiresDate`). Effective from `effectiveDate`, so a past instant shows
/// the end that was known then.
public struct RenewalExtension: Sendable, Hashable, Codable {
    public var transactionID: String
    public var originalTransactionID: String
    public var productID: String
    public var expiresDate: Date
    public var effectiveDate: Date
    public var environment: Environment
    public var source: String

    public init(transactionID: String, originalTransactionID: String, productID: String, expiresDate: Date,
                effectiveDate: Date, environment: Environment = .production, source: String = FactSource.appStore) {
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.expiresDate = expiresDate
        self.effectiveDate = effectiveDate
        self.environment = environment
        self.source = source
    }

    enum CodingKeys: String, CodingKey {
        case transactionID = "transactionId", originalTransactionID = "originalTransactionId", productID = "productId"
        case expiresDate, effectiveDate, environment, source
    }
}
