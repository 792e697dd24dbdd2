import Foundation
import JSON
import Ledger

/// What a verified notification means for the ledger: the facts to apply,
/// whom they are about, and what orders and deduplicates them.
public struct NotificationFacts: Sendable, Hashable {
    /// Idempotency base: Apple retries a notification with the same UUID.
    public var notificationUUID: String
    public var notificationType: NotificationType
    public var subtype: NotificationSubtype?
    /// In order; empty when the notification changes no entitlement (it is
    /// still acknowledged with 200).
    public var facts: [FactRequest]
    /// The transaction's `appAccountToken`, lowercased: apps set it to the
    /// subscriber id, so it names the subscriber when present.
    public var subscriberHint: String?
    /// For finding the owner when there is no hint.
    public var originalTransactionID: String?
    public var transactionID: String?
    public var productID: String?
    public var environment: Environment
    /// When Apple signed the notification, for ordering.
    public var signedDate: Date
    /// In words, what the notification was taken to mean (for logs and support).
    public var summary: String
}

extension VerifiedNotification {
    /// The ledger facts this notification means. Pure: the same notification
    /// always gives the same facts, so a retried or replayed one decides the same.
    public var facts: NotificationFacts { notificationFacts(for: self) }
}

private func notificationFacts(for notification: VerifiedNotification) -> NotificationFacts {
    let payload = notification.payload
    let transaction = notification.transaction
    let renewal = notification.renewalInfo
    let appStoreEnvironment = payload.environment ?? transaction?.environment ?? renewal?.environment
    // Xcode and LocalTesting are not the App Store's production either.
    let environment: Environment = appStoreEnvironment.map { $0 == .production ? .production : .sandbox } ?? .production
    let token = transaction?.appAccountToken?.trimmingCharacters(in: .whitespaces).lowercased()
    let mapping = NotificationMapping(payload: payload, transaction: transaction, renewal: renewal, environment: environment)
    let (facts, summary) = mapping.facts()
    return NotificationFacts(
        notificationUUID: payload.notificationUUID,
        notificationType: payload.notificationType,
        subtype: payload.subtype,
        facts: facts,
        subscriberHint: token?.isEmpty == false ? token : nil,
        originalTransactionID: mapping.originalTransactionID,
        transactionID: transaction?.transactionID,
        productID: transaction?.productID ?? renewal?.productID ?? payload.summary?.productID,
        environment: environment,
        signedDate: payload.signedDate,
        summary: summary
    )
}

/// The per-type rules, apart so each reads as one line of the table in
/// docs/appstore.md ("What each type records").
///
/// Every notification carries Apple's latest signed transaction and renewal
/// info, whatever its type, so each one also brings the ledger to Apple's
/// view: a transaction that has begun is recorded first (a missed
/// `DID_RENEW`, a crossgrade's new transaction; a duplicate when the ledger
/// has it), then the type's own fact, then what the renewal info reports
/// (auto-renew, a grace period) when the type's fact did not say it. The
/// `Decider` answers what the ledger already knows as a duplicate.
/// https://developer.apple.com/documentation/appstoreservernotifications/responsebodyv2decodedpayload
/// https://developer.apple.com/documentation/appstoreservernotifications/data
private struct NotificationMapping {
    let payload: NotificationPayload
    let transaction: TransactionInfo?
    let renewal: RenewalInfo?
    let environment: Environment

    var originalTransactionID: String? {
        transaction.map { $0.originalTransactionID ?? $0.transactionID } ?? renewal?.originalTransactionID
    }

    private var name: String {
        payload.subtype.map { "\(payload.notificationType)/\($0)" } ?? payload.notificationType.rawValue
    }

    func facts() -> ([FactRequest], String) {
        let (own, summary) = typeFacts()
        var facts: [FactRequest] = []
        if let latest = latestTransaction(unlessRecordedBy: own) { facts.append(latest) }
        facts += own
        facts += renewalState(unlessSaidBy: own)
        return (facts, summary)
    }

    private func typeFacts() -> ([FactRequest], String) {
        switch payload.notificationType {
        case .subscribed, .oneTimeCharge:
            return recording(.purchase, "a purchase")
        case .didRenew:
            return recording(.renewal, "a renewal")
        case .renewalExtended:
            // Same transaction, later expiresDate: the ledger records it as an
            // extension effective when Apple signed it.
            return recording(.renewal, "a renewal extended by the developer", effectiveDate: payload.signedDate)
        case .offerRedeemed:
            guard let transaction else { return missingTransaction() }
            let isFirst = transaction.transactionID == (transaction.originalTransactionID ?? transaction.transactionID)
            return isFirst ? recording(.purchase, "a purchase with an offer") : recording(.renewal, "a renewal with an offer")
        case .didChangeRenewalPreference:
            // An upgrade starts a new period now (its transaction is recorded
            // first); a downgrade waits for the next renewal.
            let meaning = payload.subtype == .upgrade ? "an upgrade, effective immediately" : "renewal preference changed"
            return ([], "\(name): \(meaning) (next renewal: \(renewal?.autoRenewProductID ?? "unknown")).")
        case .didChangeRenewalStatus:
            return autoRenewChange()
        case .didFailToRenew:
            return billingIssue()
        case .gracePeriodExpired, .expired:
            return expiry()
        case .refund, .revoke:
            return refund()
        case .refundReversed:
            return refundReversal()
        case .priceIncrease, .refundDeclined, .renewalExtension, .consumptionRequest, .test:
            return ([], "\(name): acknowledged; no entitlement changes.")
        default:
            return ([], "\(name): notification type not handled; acknowledged without facts.")
        }
    }

    private func missingTransaction() -> ([FactRequest], String) {
        ([], "\(name): no signedTransactionInfo; acknowledged without facts.")
    }

    private enum Recorded { case purchase, renewal }

    private var details: AppleTransactionDetails { transaction?.details ?? AppleTransactionDetails() }

    /// The notification's transaction, to record before the type's own fact:
    /// nil when the type's fact records it, when it has not begun when Apple
    /// signed the notification, or when the subscriber upgraded away from it.
    private func latestTransaction(unlessRecordedBy own: [FactRequest]) -> FactRequest? {
        guard let transaction, transaction.purchaseDate <= payload.signedDate, transaction.isUpgraded != true else { return nil }
        let recordsIt = own.contains {
            switch $0 {
            case .purchase, .renewal: $0.transactionID == transaction.transactionID
            default: false
            }
        }
        guard !recordsIt else { return nil }
        let original = transaction.originalTransactionID ?? transaction.transactionID
        let isRenewal = transaction.type == .autoRenewable && transaction.transactionID != original
        return recording(isRenewal ? .renewal : .purchase, "").0.first
    }

    /// What the renewal info says that the type's own fact did not: whether
    /// auto-renew is on, and a billing grace period. Reported states: the
    /// `Decider` records them only when they differ from what it knows.
    /// https://developer.apple.com/documentation/appstoreservernotifications/jwsrenewalinfodecodedpayload
    private func renewalState(unlessSaidBy own: [FactRequest]) -> [FactRequest] {
        guard let renewal, let original = originalTransactionID else { return [] }
        var facts: [FactRequest] = []
        let productID = transaction?.productID ?? renewal.productID
        let saysAutoRenew = own.contains { if case .autoRenewChange = $0 { true } else { false } }
        if !saysAutoRenew, let autoRenew = renewal.autoRenew {
            facts.append(.autoRenewChange(FactRequest.AutoRenewChange(
                originalTransactionID: original, autoRenew: autoRenew, productID: productID, effectiveDate: payload.signedDate,
                environment: environment, isReportedState: true)))
        }
        // GRACE_PERIOD_EXPIRED, too, proves the grace it ends.
        let saysGrace = own.contains { if case .billingIssue = $0 { true } else { false } }
        if !saysGrace, renewal.isInBillingRetryPeriod == true, let grace = renewal.gracePeriodExpiresDate {
            facts.append(.billingIssue(FactRequest.BillingIssue(
                originalTransactionID: original, productID: productID, gracePeriodExpiresDate: grace,
                effectiveDate: payload.signedDate, environment: environment, isReportedState: true)))
        }
        return facts
    }

    private func recording(_ kind: Recorded, _ meaning: String, effectiveDate: Date? = nil) -> ([FactRequest], String) {
        guard let transaction else { return missingTransaction() }
        let original = transaction.originalTransactionID ?? transaction.transactionID
        let autoRenew = transaction.type == .autoRenewable ? renewal?.autoRenew : nil
        let quantity = transaction.quantity.flatMap { $0 >= 1 ? $0 : nil } ?? 1
        let fact: FactRequest
        switch kind {
        case .purchase:
            fact = .purchase(FactRequest.Purchase(
                transactionID: transaction.transactionID, originalTransactionID: original, productID: transaction.productID,
                purchaseDate: transaction.purchaseDate, expiresDate: transaction.expiresDate, autoRenew: autoRenew,
                quantity: quantity, environment: environment, details: details))
        case .renewal:
            guard let expiresDate = transaction.expiresDate else {
                return ([], "\(name): \(meaning) of \(transaction.productID) without an expiresDate; acknowledged without facts.")
            }
            fact = .renewal(FactRequest.Renewal(
                transactionID: transaction.transactionID, originalTransactionID: original, productID: transaction.productID,
                purchaseDate: transaction.purchaseDate, expiresDate: expiresDate, autoRenew: autoRenew, quantity: quantity,
                effectiveDate: effectiveDate, environment: environment, details: details))
        }
        return ([fact], "\(name): \(meaning) of \(transaction.productID), transaction \(transaction.transactionID).")
    }

    private func refundReversal() -> ([FactRequest], String) {
        guard let transaction else { return missingTransaction() }
        let fact = FactRequest.refundReversal(FactRequest.RefundReversal(
            transactionID: transaction.transactionID,
            originalTransactionID: transaction.originalTransactionID ?? transaction.transactionID,
            effectiveDate: payload.signedDate, reason: "refund reversed", environment: environment))
        return ([fact], "\(name): the refund of transaction \(transaction.transactionID) was reversed; access restored.")
    }

    private func autoRenewChange() -> ([FactRequest], String) {
        let autoRenew: Bool? = switch payload.subtype {
        case .autoRenewEnabled?: true
        case .autoRenewDisabled?: false
        default: renewal?.autoRenew
        }
        guard let original = originalTransactionID, let autoRenew else {
            return ([], "\(name): neither the subtype nor the renewal info says whether auto-renew is on; acknowledged without facts.")
        }
        let fact = FactRequest.autoRenewChange(FactRequest.AutoRenewChange(
            originalTransactionID: original, autoRenew: autoRenew, productID: transaction?.productID ?? renewal?.productID,
            effectiveDate: payload.signedDate, environment: environment))
        return ([fact], "\(name): auto-renew turned \(autoRenew ? "on" : "off") for \(original).")
    }

    private func billingIssue() -> ([FactRequest], String) {
        guard let original = originalTransactionID else { return missingTransaction() }
        // Only the GRACE_PERIOD subtype keeps access; otherwise billing retry without access.
        let graceEnd = payload.subtype == .gracePeriod ? renewal?.gracePeriodExpiresDate : nil
        let fact = FactRequest.billingIssue(FactRequest.BillingIssue(
            originalTransactionID: original, productID: transaction?.productID ?? renewal?.productID,
            gracePeriodExpiresDate: graceEnd, effectiveDate: payload.signedDate, environment: environment))
        let access = graceEnd.map { "grace from the period's end until \(RFC3339.format($0))" } ?? "billing retry without access"
        return ([fact], "\(name): renewal of \(original) failed to bill; \(access).")
    }

    private func expiry() -> ([FactRequest], String) {
        guard let original = originalTransactionID else { return missingTransaction() }
        let end = payload.notificationType == .gracePeriodExpired
            ? renewal?.gracePeriodExpiresDate ?? transaction?.expiresDate
            : transaction?.expiresDate
        let reason = (payload.subtype?.rawValue ?? payload.notificationType.rawValue).lowercased()
        let fact = FactRequest.expiry(FactRequest.Expiry(.subscription(originalTransactionID: original, end: end),
                                                         reason: reason, environment: environment))
        return ([fact], "\(name): \(original) expired (\(reason)).")
    }

    private func refund() -> ([FactRequest], String) {
        guard let transaction else { return missingTransaction() }
        let reason = switch (payload.notificationType, transaction.revocationReason) {
        case (.revoke, _): "revoked: family sharing ended"
        case (_, 1?): "refunded: an issue with the app"
        case (_, 0?): "refunded: another reason"
        default: "refunded"
        }
        let fact = FactRequest.refund(FactRequest.Refund(
            transactionID: transaction.transactionID,
            originalTransactionID: transaction.originalTransactionID ?? transaction.transactionID,
            revocationDate: transaction.revocationDate ?? payload.signedDate, reason: reason, environment: environment,
            details: AppleRevocationDetails(revocationReason: transaction.revocationReason,
                                            revocationType: transaction.revocationType,
                                            revocationPercentage: transaction.revocationPercentage)))
        return ([fact], "\(name): transaction \(transaction.transactionID) \(reason).")
    }
}

extension TransactionInfo {
    /// What the signed transaction says beyond the terms: for support, and
    /// the sale for the analytics (`price` in milliunits, `currency`,
    /// `offerDiscountType`, `storefront`). A currency this build does not
    /// know as ISO 4217 leaves the sale without an amount rather than
    /// refusing what Apple signed.
    /// https://developer.apple.com/documentation/appstoreserverapi/jwstransactiondecodedpayload
    public var details: AppleTransactionDetails {
        var sale = SaleTerms(offerDiscount: offerDiscountType.flatMap(OfferDiscount.init(apple:)), storefront: storefront)
        if let price, price >= 0, let currency, Currency.minorUnit(currency) != nil, price <= Amount.maximum.micros / 1000 {
            sale.price = Amount(milliunits: price)
            sale.currency = currency
        }
        return AppleTransactionDetails(ownershipType: inAppOwnershipType, offerType: offerType,
                                       webOrderLineItemID: webOrderLineItemID, isUpgraded: isUpgraded, sale: sale)
    }
}
