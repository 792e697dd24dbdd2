import Foundation

// The payloads of the events about a subscription as a whole (an original
// transaction or a non-renewing group), rather than one transaction.

/// Coverage ended: reported by the store for an auto-renewable
/// (`originalTransactionID` set), or appended by Subledger when a non-renewing
/// group's coverage end passed (`originalTransactionID` nil).
public struct ExpiryFact: Sendable, Hashable, Codable {
    public var originalTransactionID: String?
    public var group: String
    public var productID: String?
    public var expiresDate: Date
    public var reason: String?
    public var environment: Environment
    public var source: String

    public init(originalTransactionID: String?, group: String, productID: String?, expiresDate: Date,
                reason: String? = nil, environment: Environment = .production, source: String = FactSource.api) {
        self.originalTransactionID = originalTransactionID
        self.group = group
        self.productID = productID
        self.expiresDate = expiresDate
        self.reason = reason
        self.environment = environment
        self.source = source
    }

    enum CodingKeys: String, CodingKey {
        case originalTransactionID = "originalTransactionId", group, productID = "productId"
        case expiresDate, reason, environment, source
    }
}

/// The subscriber turned auto-renew on or off.
public struct AutoRenewChange: Sendable, Hashable, Codable {
    public var originalTransactionID: String
    public var productID: String?
    public var autoRenew: Bool
    public var effectiveDate: Date
    public var environment: Environment
    public var source: String

    public init(originalTransactionID: String, productID: String?, autoRenew: Bool, effectiveDate: Date,
                environment: Environment = .production, source: String = FactSource.appStore) {
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.autoRenew = autoRenew
        self.effectiveDate = effectiveDate
        self.environment = environment
        self.source = source
    }

    enum CodingKeys: String, CodingKey {
        case originalTransactionID = "originalTransactionId", productID = "productId"
        case autoRenew, effectiveDate, environment, source
    }
}

/// A renewal failed to bill. With `gracePeriodExpiresDate` the subscriber keeps
/// access until then (grace); without it, billing retry without access.
public struct BillingIssue: Sendable, Hashable, Codable {
    public var originalTransactionID: String
    public var productID: String?
    public var effectiveDate: Date
    public var gracePeriodExpiresDate: Date?
    public var environment: Environment
    public var source: String

    public init(originalTransactionID: String, productID: String?, effectiveDate: Date, gracePeriodExpiresDate: Date?,
                environment: Environment = .production, source: String = FactSource.appStore) {
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.effectiveDate = effectiveDate
        self.gracePeriodExpiresDate = gracePeriodExpiresDate
        self.environment = environment
        self.source = source
    }

    enum CodingKeys: String, CodingKey {
        case originalTransactionID = "originalTransactionId", productID = "productId"
        case effectiveDate, gracePeriodExpiresDate, environment, source
    }
}
