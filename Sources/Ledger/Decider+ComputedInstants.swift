import Foundation

// The input limits (docs/api.md): a computed instant outside 1970…9999 is refused
// like a given one. A transaction computes two kinds: non-renewing period
// ends (start + duration, stacked behind the group's other periods) and
// reminder due times (end − lead). They are refused as 400 `invalid_field`
// naming the date they are computed from (`purchaseDate` for a period,
// `expiresDate` for an auto-renewable's reminders), not as a 422: the
// contract refuses computed instants "the same way" as given ones, and that
// date is what the caller would have to change.
extension Decider {
    func checkComputedInstants(of fact: TransactionFact, product: Product, ledger: SubscriberLedger,
                               fieldPrefix: String) throws(LedgerError) {
        switch product.type {
        case .nonRenewing:
            try checkStackedPeriods(with: fact, group: product.group, ledger: ledger, field: fieldPrefix + "purchaseDate")
        case .autoRenewable:
            if let end = fact.expiresDate { try checkReminders(before: end, leads: product.reminders, field: fieldPrefix + "expiresDate") }
        case .consumable, .nonConsumable, .free:
            break
        }
    }

    /// An auto-renewable's end moved by the store (`RENEWAL_EXTENDED`).
    func checkComputedInstants(ofExtendedEnd end: Date, productID: String) throws(LedgerError) {
        try checkReminders(before: end, leads: catalog.product(id: productID)?.reminders ?? [], field: "expiresDate")
    }

    /// Stacks the group's periods with `fact` added as if none were refunded
    /// (a refund only moves later periods earlier), so every end is the
    /// latest it can ever be.
    private func checkStackedPeriods(with fact: TransactionFact, group: String, ledger: SubscriberLedger,
                                     field: String) throws(LedgerError) {
        var purchases: [(date: Date, position: Int64, duration: ISODuration, productID: String)] = []
        for record in ledger.transactions.values {
            let product = catalog.product(id: record.fact.productID)
            guard (record.fact.productType ?? product?.type) == .nonRenewing,
                  (record.fact.group ?? product?.group ?? record.fact.productID) == group,
                  let duration = record.fact.duration ?? product?.duration
            else { continue }
            purchases.append((record.fact.purchaseDate, record.position, duration, record.fact.productID))
        }
        if let duration = fact.duration { purchases.append((fact.purchaseDate, .max, duration, fact.productID)) }
        purchases.sort { ($0.date, $0.position) < ($1.date, $1.position) }
        var previousEnd: Date?
        for purchase in purchases {
            let end = purchase.duration.added(to: max(purchase.date, previousEnd ?? purchase.date))
            guard end <= InputLimits.latestInstant else {
                throw .invalidField(field, expected: "a date whose non-renewing period (stacked in group '\(group)') ends by 9999-12-31T23:59:59Z",
                                    got: "a period ending after it")
            }
            try checkReminders(before: end, leads: catalog.product(id: purchase.productID)?.reminders ?? [], field: field)
            previousEnd = end
        }
    }

    private func checkReminders(before end: Date, leads: [ISODuration], field: String) throws(LedgerError) {
        for lead in leads where lead.subtracted(from: end) < InputLimits.earliestInstant {
            throw .invalidField(field, expected: "a date whose reminders (\(lead) before the end) fall after 1970-01-01T00:00:00Z",
                                got: "a reminder due before it")
        }
    }
}
