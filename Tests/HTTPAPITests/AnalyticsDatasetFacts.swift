import Foundation
import JSON
import Ledger
import SubledgerAppTesting
import TestSupport

/// The facts that tell the planned subscriptions, as the app receives them.
extension AnalyticsDataset {
    enum Fact: Sendable {
        /// A body for `POST /v1/subscribers/{id}/events`.
        case post(subscriber: String, body: String)
        /// A Google Play state or void, written as the Play integration writes what it fetched.
        case play(subscriber: String, FactRequest)
        /// A support grant of `pro` for 30 days from now.
        case grant(subscriber: String)
    }

    /// A fact, the keys it makes known and those the rules need known first
    /// (a refund names a recorded sale; a billing issue, an expiry or an
    /// auto-renew change a known original).
    typealias Entry = (fact: Fact, provides: [String], requires: [String])

    static func decimal(_ micros: Int64) -> String {
        let units = micros / 1_000_000, fraction = micros % 1_000_000
        guard fraction > 0 else { return "\(units)" }
        var digits = String(fraction)
        digits = String(repeating: "0", count: 6 - digits.count) + digits
        while digits.hasSuffix("0") { digits.removeLast() }
        return "\(units).\(digits)"
    }

    static func body(_ fields: [String: JSONValue]) -> String {
        String(decoding: try! JSONEncoder().encode(JSONValue.object(fields)), as: UTF8.self)
    }

    static func entries(of subscription: PlannedSubscription) -> [Entry] {
        subscription.store == .googlePlay ? playEntries(of: subscription) : appStoreEntries(of: subscription)
    }

    static func appStoreEntries(of subscription: PlannedSubscription) -> [Entry] {
        let environment = subscription.environment, original = subscription.original, subscriber = subscription.subscriberID
        let known = "orig:\(environment):\(original)"
        var entries: [Entry] = []
        for (index, period) in subscription.periods.enumerated() {
            var fields: [String: JSONValue] = [
                "type": .string(index == 0 ? "purchase" : "renewal"), "transactionId": .string(period.transactionID),
                "productId": .string(period.productID), "purchaseDate": .string(RFC3339.format(period.start)),
                "expiresDate": .string(RFC3339.format(period.end)), "environment": .string(environment),
            ]
            if index > 0 { fields["originalTransactionId"] = .string(original) }
            if period.isTrial {
                fields["offer"] = .object(["type": .string("introductory"), "discount": .string("free_trial")])
                // Half the trials say their price, which is 0.
                if period.transactionID.count % 2 == 0 { (fields["price"], fields["currency"]) = (.string("0"), .string("USD")) }
            } else if let price = period.price, let currency = period.currency {
                (fields["price"], fields["currency"]) = (.string(decimal(price)), .string(currency))
                if let offer = period.offer { fields["offer"] = .object(["type": .string(offer.type), "discount": .string(offer.discount)]) }
            }
            if subscription.familyShared { fields["ownershipType"] = .string("FAMILY_SHARED") }
            entries.append((.post(subscriber: subscriber, body: body(fields)), ["tx:\(environment):\(period.transactionID)", known], []))
        }
        for (index, grace) in subscription.graceAfter {
            let fields: [String: JSONValue] = [
                "type": .string("billingIssue"), "originalTransactionId": .string(original), "environment": .string(environment),
                "effectiveDate": .string(RFC3339.format(subscription.periods[index].end)),
                "gracePeriodExpiresDate": .string(RFC3339.format(grace)),
            ]
            entries.append((.post(subscriber: subscriber, body: body(fields)), [], [known]))
        }
        let last = subscription.periods[subscription.periods.count - 1]
        if let refund = subscription.refund {
            var fields: [String: JSONValue] = [
                "type": .string("refund"), "transactionId": .string(last.transactionID), "environment": .string(environment),
                "revocationDate": .string(RFC3339.format(refund.date)),
            ]
            if let share = refund.share {
                (fields["revocationType"], fields["revocationPercentage"]) = (.string("REFUND_PRORATED"), .integer(Int64(share)))
            } else if last.transactionID.count % 2 == 0 {
                fields["revocationType"] = .string("REFUND_FULL")
            }
            entries.append((.post(subscriber: subscriber, body: body(fields)), [], ["tx:\(environment):\(last.transactionID)"]))
        }
        if subscription.expiryFact {
            let fields: [String: JSONValue] = [
                "type": .string("expiry"), "originalTransactionId": .string(original), "environment": .string(environment),
                "expiresDate": .string(RFC3339.format(last.end)),
            ]
            entries.append((.post(subscriber: subscriber, body: body(fields)), [], [known]))
        }
        if let off = subscription.autoRenewOffAt {
            let fields: [String: JSONValue] = [
                "type": .string("autoRenewChange"), "originalTransactionId": .string(original), "environment": .string(environment),
                "autoRenew": .bool(false), "effectiveDate": .string(RFC3339.format(off)),
            ]
            entries.append((.post(subscriber: subscriber, body: body(fields)), [], [known]))
        }
        return entries
    }

    /// A Play token: a state fetched at each order's start (the first order
    /// a free trial or paid), an account hold before a renewal after a gap,
    /// an expired state after the last, a void.
    static func playEntries(of subscription: PlannedSubscription) -> [Entry] {
        let token = subscription.original, subscriber = subscription.subscriberID
        let start = subscription.periods[0].start
        func state(_ period: PlannedPeriod, _ state: GooglePlayPurchase.State, observed: Date) -> Entry {
            let sale = period.isTrial ? SaleTerms(price: .zero, currency: "USD", offerDiscount: .freeTrial)
                : SaleTerms(price: period.price.map(Amount.init(micros:)), currency: period.currency)
            let purchase = GooglePlayPurchase(kind: .subscription, purchaseToken: token, orderID: period.transactionID,
                                              productID: period.productID, state: state, startTime: start, expiryTime: period.end,
                                              autoRenew: state == .active, acknowledged: true, observedAt: observed, sale: sale)
            return (.play(subscriber: subscriber, .googlePlayPurchase(purchase)), ["tok:\(token)"], [])
        }
        var entries = subscription.periods.map { state($0, .active, observed: $0.start) }
        // A renewal after a gap: Google reports the account hold at the expiry.
        for (period, next) in zip(subscription.periods, subscription.periods.dropFirst()) where next.start > period.end {
            entries.append(state(period, .onHold, observed: period.end))
        }
        let last = subscription.periods[subscription.periods.count - 1]
        entries.append(state(last, .expired, observed: last.end + 3_600))
        if let refund = subscription.refund {
            let void = GooglePlayVoid(purchaseToken: token, orderID: last.transactionID, voidedAt: refund.date)
            entries.append((.play(subscriber: subscriber, .googlePlayVoid(void)), [], ["tok:\(token)"]))
        }
        return entries
    }

    /// Every fact and grant in a seeded random order, except that a fact
    /// waits for those the rules need recorded before it.
    mutating func shuffledFacts() -> [Fact] {
        var entries = subscriptions.flatMap(Self.entries(of:))
        entries += granted.map { (.grant(subscriber: $0), [], []) }
        entries.shuffle(using: &random)
        var known: Set<String> = []
        var ordered: [Fact] = []
        var waiting: [Entry] = []
        for entry in entries {
            waiting.append(entry)
            var progress = true
            while progress {
                progress = false
                for (index, candidate) in waiting.enumerated() where candidate.requires.allSatisfy(known.contains) {
                    ordered.append(candidate.fact)
                    known.formUnion(candidate.provides)
                    waiting.remove(at: index)
                    progress = true
                    break
                }
            }
        }
        precondition(waiting.isEmpty, "facts whose prerequisites never came")
        return ordered
    }
}
