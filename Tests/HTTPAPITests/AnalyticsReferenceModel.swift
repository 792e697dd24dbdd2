import Foundation
import JSON
import SubledgerAppTesting

// A reference model of the subscription analytics, written from the
// definitions (the analytics contract in docs/analytics.md) and nothing
// else: it knows each subscription's periods as planned and answers every
// metric for any [start, end) directly, rounding half-even to the
// currency's minor unit only when answering. It shares no code with the
// projection.

/// One period of a planned subscription: a free trial or a paid period.
struct PlannedPeriod: Sendable {
    var transactionID: String
    var productID: String
    var start: Date
    var end: Date
    var isTrial: Bool
    /// Micros of `currency`; nil when the fact says no price.
    var price: Int64?
    var currency: String?
    /// A paid offer (`win_back`, `pay_as_you_go`), written into the fact only.
    var offer: (type: String, discount: String)?
}

struct PlannedSubscription: Sendable {
    enum Store: String, Sendable { case appStore = "app_store", googlePlay = "google_play" }

    var subscriberID: String
    /// The original transaction id or the Play purchase token.
    var original: String
    var store: Store
    var environment: String
    var group: String
    var periods: [PlannedPeriod]
    /// A billing grace period after period `i`, until the date (cut short where the next period starts).
    var graceAfter: [Int: Date] = [:]
    /// A refund of the last period: its revocation date and Apple's share in milliunits (nil: all).
    var refund: (date: Date, share: Int?)?
    var familyShared = false
    /// Also send the store's expiry (at the last period's end) and an auto-renew change.
    var expiryFact = false
    var autoRenewOffAt: Date?

    /// Access as the state answers it: `[from, to)` pieces, each with the
    /// period whose price it carries (a grace period carries the one before).
    var pieces: [(from: Date, to: Date, period: Int)] {
        var result: [(from: Date, to: Date, period: Int)] = []
        for (index, period) in periods.enumerated() {
            result.append((period.start, period.end, index))
            if let grace = graceAfter[index] {
                let next = index + 1 < periods.count ? periods[index + 1].start : .distantFuture
                if min(grace, next) > period.end { result.append((period.end, min(grace, next), index)) }
            }
        }
        // A refund ends what the last transaction gave at its revocation date.
        if let refund {
            result = result.compactMap { piece in
                piece.from >= refund.date ? nil : (piece.from, min(piece.to, refund.date), piece.period)
            }
        }
        return result
    }

    /// The paid stretches: paid pieces joined where one starts by the end of the one before.
    var paidStretches: [(from: Date, to: Date, period: Int)] {
        var result: [(from: Date, to: Date, period: Int)] = []
        for piece in pieces where !periods[piece.period].isTrial {
            if let last = result.last, piece.from <= last.to {
                result[result.count - 1] = (last.from, max(last.to, piece.to), piece.period)
            } else {
                result.append(piece)
            }
        }
        return result
    }

    var firstPaid: Int? { periods.firstIndex { !$0.isTrial } }
}

/// Amounts are micros of their currency, summed exactly and rounded to the
/// currency's minor unit only when answering. MRR is summed as yearly
/// amounts (price × periods per year, exact) and divided by 12 in that one
/// rounding; a period of other length is taken by its days to a micro of
/// its yearly amount, as a refund's share is taken to a micro.
enum Micros {
    /// `value ÷ divisor` (divisor > 0) rounded half to even.
    static func halfEven(_ value: Int64, _ divisor: Int64) -> Int64 {
        let quotient = value / divisor, remainder = abs(value % divisor)
        let away: Int64 = value < 0 ? -1 : 1
        if remainder * 2 > divisor || (remainder * 2 == divisor && quotient % 2 != 0) { return quotient + away }
        return quotient
    }

    /// Rounded half-even to the currency's minor unit, as the answer writes it
    /// (`micros ÷ divisor`: MRR is summed as yearly amounts, divided by 12 here).
    static func answer(_ micros: Int64, in currency: String, dividedBy divisor: Int64 = 1) -> String {
        let places = ["JPY": 0, "KWD": 3][currency] ?? 2
        var step: Int64 = 1
        for _ in places..<6 { step *= 10 }
        let minor = halfEven(micros, step * divisor)
        var scale: Int64 = 1
        for _ in 0..<places { scale *= 10 }
        let magnitude = abs(minor)
        let units = "\(minor < 0 ? "-" : "")\(magnitude / scale)"
        guard places > 0 else { return units }
        let fraction = String(magnitude % scale)
        return units + "." + String(repeating: "0", count: places - fraction.count) + fraction
    }
}

struct AnalyticsReferenceModel: Sendable {
    var subscriptions: [PlannedSubscription]

    enum Interval: String, Sendable, CaseIterable { case day, week, month }

    struct Filter: Sendable {
        var environment = "Production"
        var store: PlannedSubscription.Store?
    }

    static let calendar: Calendar = {
        var calendar = Calendar(identifier: .iso8601)  // weeks from Monday
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()

    /// The intervals of a series: from `from` rounded down to an interval's start, every one starting before `to`.
    static func intervals(_ kind: Interval, from: Date, to: Date) -> [(start: Date, end: Date)] {
        let component: Calendar.Component = switch kind {
        case .day: .day
        case .week: .weekOfYear
        case .month: .month
        }
        var result: [(start: Date, end: Date)] = []
        var start = calendar.dateInterval(of: component, for: from)!.start
        while start < to {
            let end = calendar.dateInterval(of: component, for: start)!.end
            result.append((start, end))
            start = end
        }
        return result
    }

    func counted(_ filter: Filter) -> [PlannedSubscription] {
        subscriptions.filter { subscription in
            !subscription.familyShared && subscription.environment == filter.environment
                && (filter.store.map { subscription.store == $0 } ?? true)
        }
    }

    // MARK: Stocks, at an instant

    struct Stock: Equatable {
        var active = 0
        var trials = 0
        var mrr: [String: Int64] = [:]
    }

    func stock(at instant: Date, _ filter: Filter) -> Stock {
        var stock = Stock()
        for subscription in counted(filter) {
            guard let piece = subscription.pieces.first(where: { $0.from <= instant && instant < $0.to }) else { continue }
            let period = subscription.periods[piece.period]
            if period.isTrial {
                stock.trials += 1
                continue
            }
            stock.active += 1
            if let price = period.price, let currency = period.currency {
                stock.mrr[currency, default: 0] += Self.yearly(price, period)
            }
        }
        return stock
    }

    /// Price × periods per year (MRR × 12), by the period's own span (P1W
    /// 52, P1M 12, P2M 6, P3M 4, P6M 2, P1Y 1), else by its days (× 365 ÷ days, to a micro).
    static func yearly(_ price: Int64, _ period: PlannedPeriod) -> Int64 {
        let spans: [(DateComponents, Int64)] = [(DateComponents(day: 7), 52), (DateComponents(month: 1), 12), (DateComponents(month: 2), 6),
                                                (DateComponents(month: 3), 4), (DateComponents(month: 6), 2), (DateComponents(year: 1), 1)]
        for (span, perYear) in spans where calendar.date(byAdding: span, to: period.start) == period.end {
            return price * perYear
        }
        let days = Int64((period.end.timeIntervalSince(period.start) / 86_400).rounded())
        return Micros.halfEven(price * 365, days)
    }

    /// Whether `subscriberID` has access in `group` at `instant` (trials
    /// included, any store, the filter's environment).
    func entitled(_ subscriberID: String, group: String, at instant: Date, environment: String) -> Bool {
        subscriptions.contains { subscription in
            subscription.subscriberID == subscriberID && subscription.group == group && subscription.environment == environment
                && subscription.pieces.contains { $0.from <= instant && instant < $0.to }
        }
    }

    // MARK: Flows, in [start, end)

    struct Flows: Equatable {
        var new = 0, trialStarts = 0, trialConversions = 0, renewals = 0, churned = 0
        var revenue: [String: Int64] = [:]
        var refunds: [String: Int64] = [:]
    }

    func flows(_ start: Date, _ end: Date, _ filter: Filter) -> Flows {
        var flows = Flows()
        let inside = { (instant: Date) in start <= instant && instant < end }
        for subscription in counted(filter) {
            let first = subscription.firstPaid
            for (index, period) in subscription.periods.enumerated() where inside(period.start) {
                if period.isTrial {
                    flows.trialStarts += 1
                    continue
                }
                if index == first {
                    flows.new += 1
                    if index > 0, subscription.periods[index - 1].isTrial { flows.trialConversions += 1 }
                } else {
                    flows.renewals += 1
                }
                if let price = period.price, let currency = period.currency {
                    flows.revenue[currency, default: 0] += price
                }
            }
            if let refund = subscription.refund, inside(refund.date), let last = subscription.periods.last, !last.isTrial,
               let price = last.price, let currency = last.currency {
                flows.refunds[currency, default: 0] += refund.share.map { Micros.halfEven(price * Int64($0), 100_000) } ?? price
            }
            // Churn: a paid stretch that ended in the interval, its subscriber without access in the group at its end.
            for stretch in subscription.paidStretches where inside(stretch.to) {
                if !entitled(subscription.subscriberID, group: subscription.group, at: end, environment: subscription.environment) {
                    flows.churned += 1
                }
            }
        }
        return flows
    }

    // MARK: Answers

    /// The `values` of one interval of `GET /v1/analytics`, every metric.
    func values(_ start: Date, _ end: Date, _ filter: Filter) -> JSONValue {
        let stock = self.stock(at: end, filter)
        let before = self.stock(at: start, filter)
        let flows = self.flows(start, end, filter)
        func amounts(_ sums: [String: Int64], dividedBy divisor: Int64 = 1) -> JSONValue {
            var answers: [String: JSONValue] = [:]
            for (currency, sum) in sums where sum != 0 { answers[currency] = .string(Micros.answer(sum, in: currency, dividedBy: divisor)) }
            return .object(answers)
        }
        // A currency with a revenue or a refund has a net revenue, zero included.
        var net = flows.revenue
        for (currency, refund) in flows.refunds { net[currency, default: 0] -= refund }
        let churnRate: JSONValue = before.active == 0 ? .null : .string(Self.rate(flows.churned, before.active))
        return .object([
            "active_subscriptions": .integer(Int64(stock.active)), "active_trials": .integer(Int64(stock.trials)),
            "mrr": amounts(stock.mrr, dividedBy: 12), "new_subscriptions": .integer(Int64(flows.new)), "trial_starts": .integer(Int64(flows.trialStarts)),
            "trial_conversions": .integer(Int64(flows.trialConversions)), "renewals": .integer(Int64(flows.renewals)),
            "churned": .integer(Int64(flows.churned)), "churn_rate": churnRate, "revenue": amounts(flows.revenue),
            "refunds": amounts(flows.refunds), "net_revenue": .object(Dictionary(uniqueKeysWithValues: net.map { ($0.key, .string(Micros.answer($0.value, in: $0.key))) })),
        ])
    }

    /// `part ÷ whole` rounded half-even to 4 places.
    static func rate(_ part: Int, _ whole: Int) -> String {
        let tenThousandths = Micros.halfEven(Int64(part) * 10_000, Int64(whole))
        let fraction = String(tenThousandths % 10_000)
        return "\(tenThousandths / 10_000)." + String(repeating: "0", count: 4 - fraction.count) + fraction
    }

    /// The series `GET /v1/analytics?interval=&from=&to=` answers: `start`, `end` and `values` of each interval.
    func series(_ kind: Interval, from: Date, to: Date, _ filter: Filter = Filter()) -> [JSONValue] {
        Self.intervals(kind, from: from, to: to).map { interval in
            .object(["start": .string(RFC3339.format(interval.start)), "end": .string(RFC3339.format(interval.end)),
                     "values": values(interval.start, interval.end, filter)])
        }
    }

    /// The cohorts `GET /v1/analytics/cohorts` answers at `now`: by the
    /// interval of each subscription's first paid period, how many are
    /// paying at the end of each later interval that has ended; trials
    /// begun in the interval and how many of them a paid period followed.
    func cohorts(_ kind: Interval, from: Date, to: Date, now: Date, _ filter: Filter = Filter()) -> [JSONValue] {
        let counted = self.counted(filter)
        return Self.intervals(kind, from: from, to: to).map { interval in
            let inside = { (instant: Date) in interval.start <= instant && instant < interval.end }
            let members = counted.filter { subscription in subscription.firstPaid.map { inside(subscription.periods[$0].start) } ?? false }
            var retained: [JSONValue] = []
            var end = interval.end
            while true {
                end = Self.intervals(kind, from: end, to: end + 1)[0].end
                guard end <= now else { break }
                let paying = members.filter { subscription in
                    subscription.pieces.contains { $0.from <= end && end < $0.to && !subscription.periods[$0.period].isTrial }
                }
                retained.append(.integer(Int64(paying.count)))
            }
            var trialStarts = 0, conversions = 0
            for subscription in counted {
                for (index, period) in subscription.periods.enumerated() where period.isTrial && inside(period.start) {
                    trialStarts += 1
                    if subscription.periods[(index + 1)...].contains(where: { !$0.isTrial }) { conversions += 1 }
                }
            }
            return .object(["start": .string(RFC3339.format(interval.start)), "size": .integer(Int64(members.count)),
                            "retained": .array(retained), "trialStarts": .integer(Int64(trialStarts)),
                            "trialConversions": .integer(Int64(conversions))])
        }
    }
}
