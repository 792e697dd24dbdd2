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

    public init(transactionID: String, originalTransactionID: String, productID: String,
                productType: ProductType? = nil, group: String? = nil, duration: ISODuration? = nil,
                purchaseDate: Date, expiresDate: Date? = nil, quantity: Int = 1, autoRenew: Bool? = nil,
                deviceID: String? = nil, environment: Environment = .production, source: String = FactSource.api) {
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
    }

    enum CodingKeys: String, CodingKey {
        case transactionID = "transactionId", originalTransactionID = "originalTransactionId", productID = "productId"
        case productType, group, duration, purchaseDate, expiresDate, quantity, autoRenew
        case deviceID = "deviceId"
        case environment, source
    }
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

    public init(transactionID: String, originalTransactionID: String, productID: String, revocationDate: Date,
                reason: String? = nil, environment: Environment = .production, source: String = FactSource.api) {
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.revocationDate = revocationDate
        self.reason = reason
        self.environment = environment
        self.source = source
    }

    enum CodingKeys: String, CodingKey {
        case transactionID = "transactionId", originalTransactionID = "originalTransactionId", productID = "productId"
        case revocationDate, reason, environment, source
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
