import Foundation

/// One fact to decide: the body of `POST /v1/subscribers/{id}/events`, one
/// line of `subledger import`, or what an App Store notification or receipt
/// means. Each type is its own command carrying exactly the fields it needs,
/// required ones non-optional.
public enum FactRequest: Sendable, Hashable {
    case purchase(Purchase)
    case renewal(Renewal)
    case restore(Restore)
    case refund(Refund)
    case expiry(Expiry)
    case autoRenewChange(AutoRenewChange)
    case billingIssue(BillingIssue)
    case refundReversal(RefundReversal)
    /// A Google Play purchase as fetched from the Play Developer API.
    case googlePlayPurchase(GooglePlayPurchase)
    case googlePlayVoid(GooglePlayVoid)

    /// The fact types by their JSON name; the first five are the HTTP
    /// contract's, the next three are produced by the App Store integration
    /// (and accepted by the API and import), the last two only by the Google
    /// Play integration (`acceptedAsJSON` is false).
    public enum FactType: String, Sendable, Hashable, CaseIterable {
        case purchase, renewal, restore, refund, expiry
        case autoRenewChange, billingIssue, refundReversal
        case googlePlayPurchase, googlePlayVoid

        /// Whether a request body or an import line may name it: Play facts
        /// are only what the service itself fetched from Google.
        public var acceptedAsJSON: Bool { self != .googlePlayPurchase && self != .googlePlayVoid }
    }

    public var type: FactType {
        switch self {
        case .purchase: .purchase
        case .renewal: .renewal
        case .restore: .restore
        case .refund: .refund
        case .expiry: .expiry
        case .autoRenewChange: .autoRenewChange
        case .billingIssue: .billingIssue
        case .refundReversal: .refundReversal
        case .googlePlayPurchase: .googlePlayPurchase
        case .googlePlayVoid: .googlePlayVoid
        }
    }

    /// The transaction the fact names, if its type names one.
    public var transactionID: String? {
        switch self {
        case .purchase(let purchase): purchase.transactionID
        case .renewal(let renewal): renewal.transactionID
        case .restore(let restore): restore.transaction.transactionID
        case .refund(let refund): refund.transactionID
        case .refundReversal(let reversal): reversal.transactionID
        case .googlePlayPurchase(let purchase): purchase.orderID
        case .googlePlayVoid(let void): void.orderID
        case .expiry, .autoRenewChange, .billingIssue: nil
        }
    }

    /// The original transaction the fact names, if any.
    public var originalTransactionID: String? {
        switch self {
        case .purchase(let purchase): purchase.originalTransactionID
        case .renewal(let renewal): renewal.originalTransactionID
        case .restore(let restore): restore.transaction.originalTransactionID
        case .refund(let refund): refund.originalTransactionID
        case .refundReversal(let reversal): reversal.originalTransactionID
        case .expiry(let expiry): expiry.originalTransactionID
        case .autoRenewChange(let change): change.originalTransactionID
        case .billingIssue(let issue): issue.originalTransactionID
        case .googlePlayPurchase(let purchase): purchase.purchaseToken
        case .googlePlayVoid(let void): void.purchaseToken
        }
    }

    /// The product the fact names, if any.
    public var productID: String? {
        switch self {
        case .purchase(let purchase): purchase.productID
        case .renewal(let renewal): renewal.productID
        case .restore(let restore): restore.transaction.productID
        case .expiry(let expiry): expiry.productID
        case .autoRenewChange(let change): change.productID
        case .billingIssue(let issue): issue.productID
        case .googlePlayPurchase(let purchase): purchase.productID
        case .refund, .refundReversal, .googlePlayVoid: nil
        }
    }

    public var environment: Environment {
        switch self {
        case .purchase(let purchase): purchase.environment
        case .renewal(let renewal): renewal.environment
        case .restore(let restore): restore.transaction.environment
        case .refund(let refund): refund.environment
        case .expiry(let expiry): expiry.environment
        case .autoRenewChange(let change): change.environment
        case .billingIssue(let issue): issue.environment
        case .refundReversal(let reversal): reversal.environment
        case .googlePlayPurchase(let purchase): purchase.environment
        case .googlePlayVoid(let void): void.environment
        }
    }

    /// The store the fact is of.
    public var store: Store {
        switch self {
        case .googlePlayPurchase, .googlePlayVoid: .googlePlay
        default: .appStore
        }
    }

    /// The ownership keys (`Environment.ownershipKey`) of the transaction
    /// and original transaction ids whose owners the decision may ask
    /// about: look these up before calling the `Decider`.
    public var referencedTransactionIDs: Set<String> {
        switch self {
        case .googlePlayPurchase(let purchase):
            // The linked purchase's owner is who a replacement belongs to.
            return Set([purchase.purchaseToken, purchase.linkedPurchaseToken].compactMap {
                $0.map { Store.googlePlay.ownershipKey($0, environment: purchase.environment) }
            })
        case .googlePlayVoid(let void):
            return [Store.googlePlay.ownershipKey(void.purchaseToken, environment: void.environment)]
        default:
            return Set([transactionID, originalTransactionID].compactMap { $0.map(environment.ownershipKey) })
        }
    }
}
