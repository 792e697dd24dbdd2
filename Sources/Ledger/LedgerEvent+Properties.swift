import Foundation

extension LedgerEvent {
    /// When the fact took effect: purchase date, revocation date, change date...
    /// A state at an instant before it does not show it.
    public var effectiveDate: Date? {
        switch self {
        case .purchased(let fact), .renewed(let fact), .restored(let fact): fact.purchaseDate
        case .refunded(let refund): refund.revocationDate
        case .refundReversed(let reversal): reversal.date
        case .renewalExtended(let renewalExtension): renewalExtension.effectiveDate
        case .expired(let expiry): expiry.expiresDate
        case .autoRenewChanged(let change): change.effectiveDate
        case .billingIssue(let issue): issue.effectiveDate
        case .transferredOut(let transfer), .transferredIn(let transfer): transfer.date
        case .deviceSeen(let device): device.date
        case .reminderSent(let delivery), .reminderFailed(let delivery): delivery.date
        case .granted(let grant): grant.startsAt
        case .grantRevoked(let revocation): revocation.date
        case .erased(let erasure): erasure.date
        case .googlePlayPurchase(let purchase): purchase.observedAt
        case .googlePlayVoided(let void): void.voidedAt
        case .unknown: nil
        }
    }

    /// Where the fact came from (`api`, `import`, `appstore`, `subledger`).
    public var source: String? {
        switch self {
        case .purchased(let fact), .renewed(let fact), .restored(let fact): fact.source
        case .refunded(let refund): refund.source
        case .refundReversed(let reversal): reversal.source
        case .renewalExtended(let renewalExtension): renewalExtension.source
        case .expired(let expiry): expiry.source
        case .autoRenewChanged(let change): change.source
        case .billingIssue(let issue): issue.source
        case .transferredOut(let transfer), .transferredIn(let transfer): transfer.source
        case .deviceSeen(let device): device.source
        case .reminderSent(let delivery), .reminderFailed(let delivery): delivery.source
        case .granted(let grant): grant.source
        case .grantRevoked(let revocation): revocation.source
        case .erased(let erasure): erasure.source
        case .googlePlayPurchase(let purchase): purchase.source
        case .googlePlayVoided(let void): void.source
        case .unknown: nil
        }
    }

    /// The transaction the event is about, if any.
    public var transactionID: String? {
        switch self {
        case .purchased(let fact), .renewed(let fact), .restored(let fact): fact.transactionID
        case .refunded(let refund): refund.transactionID
        case .refundReversed(let reversal): reversal.transactionID
        case .renewalExtended(let renewalExtension): renewalExtension.transactionID
        case .transferredIn(let transfer): transfer.transaction?.transactionID
        case .googlePlayPurchase(let purchase): purchase.orderID ?? purchase.purchaseToken
        case .googlePlayVoided(let void): void.orderID ?? void.purchaseToken
        default: nil
        }
    }

    /// The original transaction the event is about, if any.
    public var originalTransactionID: String? {
        switch self {
        case .purchased(let fact), .renewed(let fact), .restored(let fact): fact.originalTransactionID
        case .refunded(let refund): refund.originalTransactionID
        case .refundReversed(let reversal): reversal.originalTransactionID
        case .renewalExtended(let renewalExtension): renewalExtension.originalTransactionID
        case .expired(let expiry): expiry.originalTransactionID
        case .autoRenewChanged(let change): change.originalTransactionID
        case .billingIssue(let issue): issue.originalTransactionID
        case .transferredOut(let transfer), .transferredIn(let transfer): transfer.originalTransactionID
        case .googlePlayPurchase(let purchase): purchase.purchaseToken
        case .googlePlayVoided(let void): void.purchaseToken
        default: nil
        }
    }
}

extension LedgerEvent {
    /// The store the fact came from: Google Play's own facts say so; every
    /// other fact is the App Store's or the ledger's own.
    public var store: Store {
        switch self {
        case .googlePlayPurchase, .googlePlayVoided: .googlePlay
        case .transferredOut(let transfer), .transferredIn(let transfer): transfer.store ?? .appStore
        default: .appStore
        }
    }
}
