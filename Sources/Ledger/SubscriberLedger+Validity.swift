import Foundation

extension SubscriberLedger {
    /// The first instant after `at` at which `state(at:catalog:)` may differ
    /// from the state at `at` (other than in `at` itself); nil when nothing
    /// is ever due to change. Until then a computed state can be served again
    /// as it is: the state changes only when an instant passes a date of the
    /// ledger (a fact taking effect, an end, a grace end, a transfer, a device
    /// first seen) or a boundary of the periods stacked at `at`.
    public func nextChange(after at: Date, catalog: Catalog) -> Date? {
        nextChange(after: at, evaluation: Evaluation(ledger: self, catalog: catalog, at: at, includingGrants: false))
    }

    /// `nextChange(after:catalog:)` for the states of several environments:
    /// the non-renewing periods are each environment's own (a Sandbox pass's
    /// end is not among the Production instants), the other dates are the
    /// same for all.
    public func nextChange(after at: Date, catalog: Catalog, environments: [Environment]) -> Date? {
        var next = nextChange(after: at, catalog: catalog)
        for environment in environments where environment != .production {
            for group in Evaluation(ledger: self, catalog: catalog, at: at, environment: environment, includingGrants: false).nonRenewingGroups {
                for period in group.periods {
                    for date in [period.start, period.end] where date > at && (next == nil || date < next!) {
                        next = date
                    }
                }
            }
        }
        return next
    }

    /// The state at `at` and how long it holds (`nextChange(after:catalog:)`),
    /// from one evaluation of the ledger.
    public func stateAndNextChange(at: Date, catalog: Catalog) -> (state: SubscriberState, nextChange: Date?) {
        let evaluation = Evaluation(ledger: self, catalog: catalog, at: at)
        return (SubscriberState(subscriberID: subscriberID, evaluation: evaluation, ledger: self),
                nextChange(after: at, evaluation: evaluation))
    }

    private func nextChange(after at: Date, evaluation: Evaluation) -> Date? {
        var next: Date?
        func consider(_ date: Date?) {
            guard let date, date > at else { return }
            if next == nil || date < next! { next = date }
        }
        for record in transactions.values {
            consider(record.visibleFrom)
            consider(record.fact.purchaseDate)
            consider(record.fact.expiresDate)
        }
        for refund in refunds.values.joined() { consider(refund.date) }
        for reversal in refundReversals.values.joined() { consider(reversal.date) }
        for dated in extensions.values.joined() {
            consider(dated.date)
            consider(dated.value)
        }
        for dated in ownership.values.joined() { consider(dated.date) }
        for dated in autoRenewChanges.values.joined() { consider(dated.date) }
        for issue in billingIssues.values.joined() {
            consider(issue.date)
            consider(issue.value.gracePeriodExpiresDate)
        }
        for expiry in storeExpiries.values.joined() { consider(expiry.date) }
        for device in devices.values { consider(device.date) }
        for grant in supportGrants.values {
            consider(grant.value.startsAt)
            consider(grant.value.endsAt)
        }
        for revocation in grantRevocations.values { consider(revocation.date) }
        for group in evaluation.nonRenewingGroups {
            for period in group.periods {
                consider(period.start)
                consider(period.end)
            }
        }
        return next
    }
}
