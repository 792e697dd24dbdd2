import Foundation
import JSON
import Ledger
import SubledgerAppTesting
import TestSupport

/// A seeded history of subscriptions for the analytics tests, planned
/// period by period so `AnalyticsReferenceModel` can answer from the plan:
/// free trials converted or lapsed, weekly, monthly (chained, and anchored
/// to the purchase day as Apple renews), quarterly and yearly periods,
/// renewals after billing-retry gaps, grace periods recovered or lapsed,
/// price and product changes, churn, resubscriptions (a new original in the
/// same group, sometimes on Google Play), full and prorated refunds, USD,
/// EUR and JPY, prices left out, Sandbox subscribers, family-shared copies
/// and support grants (neither of which counts).
struct AnalyticsDataset {
    /// A Monday; the series cover 120 days from it.
    static let windowStart = date("2026-03-02T00:00:00Z")
    static let windowEnd = windowStart + 120 * 86_400
    /// No fact is dated later (a fact may not be dated after the server's clock):
    /// a subscription that would renew after it lapses instead.
    static let lastFactDate = date("2026-11-01T00:00:00Z")

    static let catalogJSON = """
        { "version": 1, "products": [
          {"id": "pro.weekly", "type": "auto-renewable", "group": "pro", "entitlements": ["pro"]},
          {"id": "pro.monthly", "type": "auto-renewable", "group": "pro", "entitlements": ["pro"]},
          {"id": "pro.quarterly", "type": "auto-renewable", "group": "pro", "entitlements": ["pro"]},
          {"id": "pro.yearly", "type": "auto-renewable", "group": "pro", "entitlements": ["pro"]},
          {"id": "max.monthly", "type": "auto-renewable", "group": "max", "entitlements": ["max"]},
          {"id": "pro_play", "store": "google_play", "type": "auto-renewable", "group": "pro", "entitlements": ["pro"]}
        ] }
        """

    enum Kind: CaseIterable { case weekly, monthly, anchoredMonthly, quarterly, yearly }

    var subscriptions: [PlannedSubscription] = []
    /// Subscribers given a support grant.
    var granted: [String] = []
    var random: SplitMix64
    private var nextID = 0

    init(seed: UInt64, subscribers: Int = 320) {
        random = SplitMix64(seed: seed)
        for index in 0..<subscribers { addSubscriber("an\(index)", index: index) }
        for index in 0..<4 {
            var family = makeSubscription("fam\(index)", group: "pro", at: Self.windowStart + Double(index) * 9 * 86_400,
                                          firstLife: false, store: .appStore, environment: "Production")
            family.familyShared = true
            subscriptions.append(family)
        }
        granted = ["an1", "an2", "an3", "grant-only"]
    }

    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }
    mutating func chance(_ percent: Int) -> Bool { int(1...100) <= percent }
    mutating func pick<T>(_ items: [T]) -> T { items[int(0...items.count - 1)] }
    mutating func newID(_ prefix: String) -> String {
        nextID += 1
        return "\(prefix)\(nextID)"
    }

    static let calendar: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()

    static func adding(months: Int, to date: Date) -> Date { calendar.date(byAdding: .month, value: months, to: date)! }

    private mutating func addSubscriber(_ subscriber: String, index: Int) {
        let environment = index % 13 == 6 ? "Sandbox" : "Production"
        // A third of the lives begin exactly at midnight, where a day's end and the next day meet.
        var at = Self.windowStart + Double(int(-45...110)) * 86_400 + (chance(33) ? 0 : Double(int(1...86_399)))
        var store: PlannedSubscription.Store = environment == "Production" && index % 20 == 9 ? .googlePlay : .appStore
        for life in 0..<3 {
            guard at < Self.lastFactDate - 40 * 86_400 else { break }
            guard life == 0 || chance(life == 1 ? 35 : 20) || (index % 37 == 17 && life == 1) else { break }
            if index % 37 == 17, life == 1 { store = .googlePlay }
            let subscription = makeSubscription(subscriber, group: "pro", at: at, firstLife: life == 0, store: store, environment: environment)
            subscriptions.append(subscription)
            let accessEnd = subscription.pieces.map(\.to).max()!
            // Back at the same instant, within hours, or weeks later.
            at = accessEnd + (chance(12) ? 0 : chance(30) ? Double(int(3_600...72_000)) : Double(int(1...40)) * 86_400 + Double(int(0...86_399)))
            if index % 37 == 17 { at = accessEnd + Double(int(0...3)) * 86_400 }
            store = .appStore
        }
        if chance(15) {
            let start = Self.windowStart + Double(int(-30...100)) * 86_400 + Double(int(0...86_399))
            subscriptions.append(makeSubscription(subscriber, group: "max", at: start, firstLife: true, store: .appStore,
                                                  environment: environment))
        }
    }

    static func price(_ kind: Kind, _ currency: String) -> Int64 {
        let units: [String: Int64] = switch kind {
        case .weekly: ["USD": 2_990_000, "EUR": 2_490_000, "JPY": 400_000_000]
        case .monthly, .anchoredMonthly: ["USD": 9_990_000, "EUR": 8_990_000, "JPY": 1_200_000_000]
        case .quarterly: ["USD": 24_990_000, "EUR": 22_990_000, "JPY": 3_000_000_000]
        case .yearly: ["USD": 99_990_000, "EUR": 89_990_000, "JPY": 12_000_000_000]
        }
        return units[currency]!
    }

    /// `micros` × `numerator` ÷ `denominator`, down to the currency's minor unit.
    static func scaled(_ micros: Int64, _ numerator: Int64, _ denominator: Int64, _ currency: String) -> Int64 {
        let unit: Int64 = currency == "JPY" ? 1_000_000 : 10_000
        return micros * numerator / denominator / unit * unit
    }

    static func productID(_ kind: Kind, group: String, store: PlannedSubscription.Store) -> String {
        if store == .googlePlay { return "pro_play" }
        if group == "max" { return "max.monthly" }
        return switch kind {
        case .weekly: "pro.weekly"
        case .monthly, .anchoredMonthly: "pro.monthly"
        case .quarterly: "pro.quarterly"
        case .yearly: "pro.yearly"
        }
    }

    mutating func makeSubscription(_ subscriber: String, group: String, at start: Date, firstLife: Bool,
                                   store: PlannedSubscription.Store, environment: String) -> PlannedSubscription {
        let original = newID(store == .googlePlay ? "tok" : "o")
        var kind: Kind = group == "max" || store == .googlePlay ? .monthly
            : pick([.weekly, .weekly, .monthly, .monthly, .monthly, .monthly, .anchoredMonthly, .anchoredMonthly, .quarterly, .yearly, .yearly])
        let currency = pick(["USD", "USD", "USD", "EUR", "EUR", "JPY"])
        var price: Int64? = chance(5) ? nil : Self.price(kind, currency)
        var subscription = PlannedSubscription(subscriberID: subscriber, original: original, store: store, environment: environment,
                                               group: group, periods: [])
        func period(_ start: Date, _ end: Date, trial: Bool, price: Int64?, offer: (String, String)? = nil) -> PlannedPeriod {
            let index = subscription.periods.count
            let id = store == .googlePlay ? "GPA.\(original)..\(index)" : index == 0 ? original : "\(original)-\(index)"
            return PlannedPeriod(transactionID: id, productID: Self.productID(kind, group: group, store: store), start: start, end: end,
                                 isTrial: trial, price: trial ? nil : price, currency: trial || price == nil ? nil : currency,
                                 offer: offer.map { (type: $0.0, discount: $0.1) })
        }
        var at = start
        if firstLife, chance(35) {
            let end = at + (kind == .weekly || chance(50) ? 3 : 7) * 86_400
            subscription.periods.append(period(at, end, trial: true, price: nil))
            at = end
            guard chance(65) else { return subscription }  // the trial lapses
        }
        let count = switch kind {
        case .weekly: int(1...14)
        case .monthly: int(1...6)
        case .anchoredMonthly: int(2...6)
        case .quarterly: int(1...3)
        case .yearly: 1
        }
        var anchor = at, sinceAnchor = 0
        let winBack = !firstLife && price != nil && chance(30)
        for index in 0..<count {
            guard at <= Self.lastFactDate - 86_400 else { break }
            sinceAnchor += 1
            let end: Date = switch kind {
            case .weekly: at + 7 * 86_400
            case .monthly: Self.adding(months: 1, to: at)
            case .anchoredMonthly: Self.adding(months: sinceAnchor, to: anchor)
            case .quarterly: Self.adding(months: 3, to: at)
            case .yearly: Self.calendar.date(byAdding: .year, value: 1, to: at)!
            }
            // Google Play's last state is observed after the period's end.
            guard store == .appStore || end <= Self.lastFactDate else { break }
            if winBack, index == 0 {
                subscription.periods.append(period(at, end, trial: false, price: Self.scaled(price!, 1, 2, currency),
                                                   offer: ("win_back", "pay_as_you_go")))
            } else {
                subscription.periods.append(period(at, end, trial: false, price: price))
            }
            at = end
            guard index < count - 1, kind != .yearly else { break }
            let roll = int(1...100)
            if roll <= (store == .googlePlay ? 15 : 7) {
                // Billing retry without grace (on Google Play, an account hold): no access until the renewal.
                at = end + Double(int(1...5)) * 86_400 + Double(int(0...86_399))
                (anchor, sinceAnchor) = (at, 0)
            } else if roll <= 13, store == .appStore, end < Self.lastFactDate - 20 * 86_400 {
                // A billing issue with grace, after a retry gap too: its grace
                // covers its own period only, not the earlier gap.
                let grace = end + Double(int(3...16)) * 86_400
                subscription.graceAfter[subscription.periods.count - 1] = grace
                guard chance(55) else { break }  // the grace period runs out
                at = end + Double(int(3_600...Int(grace.timeIntervalSince(end)) - 3_600))
                (anchor, sinceAnchor) = (at, 0)
            } else if roll <= 18, price != nil, kind != .weekly {
                price = Self.scaled(price!, 13, 10, currency)
            } else if roll <= 21, kind == .monthly, store == .appStore, group == "pro" {
                kind = .yearly
                price = price.map { _ in Self.price(.yearly, currency) }
            }
        }
        let last = subscription.periods.count - 1
        if subscription.graceAfter[last] == nil, chance(18) {
            let period = subscription.periods[last]
            let span = Int(period.end.timeIntervalSince(period.start))
            let late = period.end + 20 * 86_400 < Self.lastFactDate && chance(30)
            let date = late ? period.end + Double(int(1...20)) * 86_400
                : period.start + Double(int(3_600...min(span, Int(Self.lastFactDate.timeIntervalSince(period.start))) - 3_600))
            subscription.refund = (date, store == .appStore && chance(45) ? pick([25_000, 50_000, 33_333, 75_000, 12_345, 99_999]) : nil)
        } else if store == .appStore {
            subscription.expiryFact = subscription.graceAfter[last] == nil && subscription.periods[last].end < Self.lastFactDate && chance(40)
            let period = subscription.periods[last]
            if chance(30), period.end.timeIntervalSince(period.start) > 2 * 86_400 { subscription.autoRenewOffAt = period.start + 86_400 }
        }
        return subscription
    }
}

extension AnalyticsDataset {
    /// How many of each case the dataset holds: a test expects every one, so
    /// a change of the generator cannot quietly drop a case.
    var cases: [String: Int] {
        var cases: [String: Int] = [:]
        func count(_ name: String, _ condition: Bool) { cases[name, default: 0] += condition ? 1 : 0 }
        let counted = subscriptions.filter { !$0.familyShared }
        for subscription in counted {
            let periods = subscription.periods, play = subscription.store == .googlePlay
            let paid = periods.filter { !$0.isTrial }
            count("free trial converted", periods.first?.isTrial == true && !paid.isEmpty)
            count("free trial lapsed", periods.first?.isTrial == true && paid.isEmpty)
            for kind in ["weekly", "monthly", "quarterly", "yearly"] { count(kind, paid.contains { $0.productID.hasSuffix(kind) }) }
            count("monthly then yearly", paid.contains { $0.productID == "pro.monthly" } && paid.contains { $0.productID == "pro.yearly" })
            count("price change", Set(paid.compactMap(\.price)).count > 1)
            count("win-back offer", paid.contains { $0.offer != nil })
            count("no price", paid.contains { $0.price == nil })
            count("a period of neither a week nor whole months", paid.contains { period in
                ![7, 28, 29, 30, 31, 90, 91, 92, 365, 366].contains(Int(period.end.timeIntervalSince(period.start) / 86_400))
                    || (Self.adding(months: 1, to: period.start) != period.end && period.productID.hasSuffix("monthly")
                        && period.end.timeIntervalSince(period.start) > 27 * 86_400 && period.end.timeIntervalSince(period.start) < 32 * 86_400)
            })
            let gap = zip(periods, periods.dropFirst()).contains { $0.1.start > $0.0.end && subscription.graceAfter.isEmpty }
            count(play ? "Google Play renewal after an account hold" : "renewal after a billing-retry gap", gap)
            count("grace period recovered", subscription.graceAfter.keys.contains { $0 < periods.count - 1 })
            count("grace period lapsed", subscription.graceAfter.keys.contains(periods.count - 1))
            count(play ? "Google Play void" : "full refund", subscription.refund != nil && subscription.refund?.share == nil)
            count("prorated refund", subscription.refund?.share != nil)
            count("refund after the period's end", subscription.refund.map { $0.date >= periods.last!.end } ?? false)
            count("Google Play", play)
            count("Sandbox", subscription.environment == "Sandbox")
            count("begins at midnight", periods[0].start.timeIntervalSince1970.truncatingRemainder(dividingBy: 86_400) == 0)
            for currency in ["USD", "EUR", "JPY"] { count(currency, paid.contains { $0.currency == currency }) }
            count("store's expiry", subscription.expiryFact)
            count("auto-renew off", subscription.autoRenewOffAt != nil)
            count("resubscription", counted.contains { other in
                other.subscriberID == subscription.subscriberID && other.group == subscription.group && other.original != subscription.original
                    && other.periods[0].start >= (subscription.pieces.last?.to ?? .distantFuture)
            })
            count("resubscription on another store", counted.contains { other in
                other.subscriberID == subscription.subscriberID && other.group == subscription.group && other.store != subscription.store
            })
        }
        cases["family-shared"] = subscriptions.count - counted.count
        cases["support grant"] = granted.count
        return cases
    }
}
