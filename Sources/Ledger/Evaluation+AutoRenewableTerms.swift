import Foundation

/// Where an auto-renewable stands at an instant: the store's expiries and
/// billing issues for its original, and a refund, against its latest
/// transaction.
extension Evaluation {
    /// Where an auto-renewable stands at `at`, from its latest transaction and
    /// the store's reports about its original transaction.
    struct AutoRenewableTerms {
        var status: SubscriptionStatus
        var end: Date
        var graceEnd: Date?
        var expiredByStore: Dated?
        /// The events behind it, in no order and possibly repeated (`explain`
        /// sorts them; sorting thousands on every read was a cost of its own).
        var positions: [Int64]
    }

    /// The status `autoRenewableTerms(latest: transaction(record, …)!, …)`
    /// gives, and the transaction's group; nil when `transaction` is nil.
    /// Without the `Transaction`, whose copy of the fact (a retain per
    /// string) was most of the cost: the activity timeline asks this at
    /// every instant it sweeps.
    static func autoRenewableStatus(_ record: SubscriberLedger.TransactionRecord, ledger: SubscriberLedger, catalog: Catalog,
                                    at: Date) -> (status: SubscriptionStatus, group: String)? {
        guard record.visibleFrom <= at,
              ledger.owns(record.fact.originalTransactionID, environment: record.fact.environment, at: at) else { return nil }
        let product = catalogProduct(of: record.fact, catalog: catalog, readingDuration: false)
        guard let type = record.fact.productType ?? product?.type else { return nil }
        let expiresDate = type == .autoRenewable
            ? ledger.expiresDate(ofTransaction: record.fact.transactionID, at: at) : record.fact.expiresDate
        let terms = autoRenewableTerms(original: record.fact.originalTransactionID, purchaseDate: record.fact.purchaseDate,
                                       expiresDate: expiresDate, refund: ledger.refundInEffect(for: record.fact, isSubscription: type == .autoRenewable, at: at),
                                       ledger: ledger, at: at)
        return (terms.status, record.fact.group ?? product?.group ?? record.fact.productID)
    }

    static func autoRenewableTerms(latest: Transaction, ledger: SubscriberLedger, at: Date) -> AutoRenewableTerms {
        autoRenewableTerms(original: latest.fact.originalTransactionID, purchaseDate: latest.fact.purchaseDate,
                           expiresDate: latest.fact.expiresDate, refund: latest.refund, ledger: ledger, at: at)
    }

    private static func autoRenewableTerms(original: String, purchaseDate: Date, expiresDate: Date?,
                                           refund: SubscriberLedger.Dated<RefundFact>?, ledger: SubscriberLedger,
                                           at: Date) -> AutoRenewableTerms {
        var positions: [Int64] = []
        var end = expiresDate ?? purchaseDate
        var expiredByStore: Dated?
        for expiry in ledger.storeExpiries[original] ?? [] where expiry.date <= at && expiry.date >= purchaseDate {
            positions.append(expiry.position)
            if expiry.date < end || expiredByStore == nil {
                end = min(end, expiry.date)
                expiredByStore = Dated(date: expiry.date, position: expiry.position)
            }
        }
        // Grace starts at the period's end, whenever the billing issue that
        // reports it arrives (Apple signs DID_FAIL_TO_RENEW after the renewal
        // failed, often hours later): an issue about this period counts at
        // every instant. An expiry the store dated before the period's end
        // cut it short, and no grace follows.
        // https://developer.apple.com/documentation/appstoreservernotifications/graceperiodexpiresdate
        // https://developer.apple.com/help/app-store-connect/manage-subscriptions/enable-billing-grace-period-for-auto-renewable-subscriptions
        //
        // An issue dated once the next period of the same original had begun
        // is about that period or a later one, not this one: it gives this
        // period no grace (a retry gap before a renewal is not covered by a
        // grace reported a month later).
        var graceEnd: Date?
        let cutShort = expiredByStore.map { $0.date < (expiresDate ?? purchaseDate) } ?? false
        if !cutShort, let issues = ledger.billingIssues[original], !issues.isEmpty {
            let nextPeriod = ledger.byOriginal.records[original]?.lazy.map(\.fact.purchaseDate).filter { $0 > purchaseDate }.min()
                ?? .distantFuture
            for issue in issues where issue.date >= purchaseDate && issue.date < nextPeriod {
                guard let grace = issue.value.gracePeriodExpiresDate, grace > end else { continue }
                positions.append(issue.position)
                graceEnd = max(graceEnd ?? grace, grace)
            }
        }
        let status: SubscriptionStatus
        if let refund {
            status = .revoked
            positions.append(refund.position)
        } else if at < end {
            status = .active
        } else if let graceEnd, at < graceEnd {
            status = .grace
        } else {
            status = .expired
        }
        return AutoRenewableTerms(status: status, end: end, graceEnd: graceEnd, expiredByStore: expiredByStore, positions: positions)
    }
}
