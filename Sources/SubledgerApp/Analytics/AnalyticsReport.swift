import Foundation
import JSON
import Ledger

/// A metric as the API names it.
public enum AnalyticsReportMetric: String, Sendable, CaseIterable {
    case activeSubscriptions = "active_subscriptions"
    case activeTrials = "active_trials"
    case mrr
    case newSubscriptions = "new_subscriptions"
    case trialStarts = "trial_starts"
    case trialConversions = "trial_conversions"
    case renewals
    case churned
    case churnRate = "churn_rate"
    case revenue
    case refunds
    case netRevenue = "net_revenue"

    public var isAmount: Bool { [.mrr, .revenue, .refunds, .netRevenue].contains(self) }

    /// What the projection stores that this metric is computed from.
    func sources(_ interval: AnalyticsInterval) -> [AnalyticsMetric] {
        switch self {
        case .activeSubscriptions: [.activeSubscriptions]
        case .activeTrials: [.activeTrials]
        case .mrr: [.mrr]
        case .newSubscriptions: [.newSubscriptions]
        case .trialStarts: [.trialStarts]
        case .trialConversions: [.trialConversions]
        case .renewals: [.renewals]
        case .churned: [interval.churnMetric]
        case .churnRate: [interval.churnMetric, .activeSubscriptions]
        case .revenue: [.revenue]
        case .refunds: [.refunds]
        case .netRevenue: [.revenue, .refunds]
        }
    }
}

public struct AnalyticsQuery: Sendable {
    public enum GroupBy: String, Sendable, CaseIterable { case none, product, store }

    public var metrics: [AnalyticsReportMetric]
    public var from: Date
    public var to: Date
    public var interval: AnalyticsInterval
    public var environment: Environment
    public var store: Store?
    public var productID: String?
    public var groupBy: GroupBy

    public init(metrics: [AnalyticsReportMetric] = AnalyticsReportMetric.allCases, from: Date, to: Date,
                interval: AnalyticsInterval = .day, environment: Environment = .production, store: Store? = nil,
                productID: String? = nil, groupBy: GroupBy = .none) {
        (self.metrics, self.from, self.to, self.interval, self.environment, self.store, self.productID, self.groupBy) =
            (metrics, from, to, interval, environment, store, productID, groupBy)
    }

    /// Where a series starts when no `from` is given: 30 days before `to`.
    public static func defaultFrom(to: Date) -> Date { to - 30 * 86_400 }

    /// The most intervals one query may list (ten years of days).
    public static let maximumIntervals = 3_700

    /// The metrics of a comma-separated list of their names, each once, in
    /// the order given (`metrics=`, `--metrics`).
    public static func metrics(parsing text: String, field: String) throws(LedgerError) -> [AnalyticsReportMetric] {
        var metrics: [AnalyticsReportMetric] = []
        for name in text.split(separator: ",", omittingEmptySubsequences: false) {
            guard let metric = AnalyticsReportMetric(rawValue: String(name)) else {
                throw LedgerError.invalidField(
                    field, expected: "a comma-separated list of " + AnalyticsReportMetric.allCases.map(\.rawValue).joined(separator: ", "),
                    got: String(name.prefix(64)))
            }
            if !metrics.contains(metric) { metrics.append(metric) }
        }
        return metrics
    }

    /// The intervals from `from` to `to`, refused (naming `field`) when
    /// `from` is not before `to` or there would be more than `maximumIntervals`.
    public static func intervals(_ interval: AnalyticsInterval, from: Date, to: Date, field: String) throws(LedgerError)
        -> [(start: Date, end: Date)] {
        guard from < to else { throw LedgerError.invalidField(field, expected: "an instant before 'to' (\(RFC3339.format(to)))") }
        guard let intervals = interval.intervals(from: from, to: to, limit: maximumIntervals) else {
            throw LedgerError.invalidField(field, expected: "at most \(maximumIntervals) \(interval.rawValue)s before 'to'")
        }
        return intervals
    }
}

/// One metric's value in one interval.
public enum AnalyticsValue: Sendable, Equatable {
    case count(Int64)
    /// Per currency, rounded half-even to its minor unit; currencies with nothing left out.
    case amounts([String: String])
    /// A decimal string with four places, or nil when the denominator is 0.
    case rate(String?)
}

public struct AnalyticsPoint: Sendable, Equatable {
    public var start: Date
    public var end: Date
    /// The product id or store of a grouped series; nil when not grouped.
    public var group: String?
    public var values: [AnalyticsReportMetric: AnalyticsValue]
}

public struct AnalyticsSeries: Sendable, Equatable {
    public var interval: AnalyticsInterval
    public var metrics: [AnalyticsReportMetric]
    public var points: [AnalyticsPoint]
}

/// The day sums a query reads, and the series computed from them.
struct AnalyticsDaySums {
    struct Key: Hashable {
        var group: String
        var metric: AnalyticsMetric
        var currency: String
    }

    /// Each stock's value at the end of the day before the first interval.
    var base: [Key: Int64] = [:]
    /// Per key, the day sums by day number.
    var days: [Key: [Int: Int64]] = [:]

    func series(_ query: AnalyticsQuery, intervals: [(start: Date, end: Date)]) -> AnalyticsSeries {
        let groups = query.groupBy == .none ? [""] : Set(days.keys.map(\.group)).union(base.keys.map(\.group)).sorted()
        // Amounts are looked up by key, currency by currency, not found by scanning every sum.
        let currencies = Set(days.keys.map(\.currency)).union(base.keys.map(\.currency)).subtracting([""])
        var points: [AnalyticsPoint] = []
        // Running stocks per key, carried from one interval to the next.
        var stock = base
        for (start, end) in intervals {
            let first = AnalyticsItem.flowDay(of: start), last = AnalyticsItem.flowDay(of: end) - 1
            var flows: [Key: Int64] = [:]
            let stockAtStart = stock
            for (key, byDay) in days {
                var sum: Int64 = 0
                for day in first...last { sum += byDay[day] ?? 0 }
                guard sum != 0 else { continue }
                if AnalyticsRows.stocks.contains(key.metric) { stock[key, default: 0] += sum } else { flows[key] = sum }
            }
            for group in groups {
                var values: [AnalyticsReportMetric: AnalyticsValue] = [:]
                func count(_ metric: AnalyticsMetric, in sums: [Key: Int64]) -> Int64 {
                    sums[Key(group: group, metric: metric, currency: "")] ?? 0
                }
                func amounts(_ metric: AnalyticsMetric, in sums: [Key: Int64]) -> [String: Int64] {
                    var byCurrency: [String: Int64] = [:]
                    for currency in currencies {
                        if let value = sums[Key(group: group, metric: metric, currency: currency)] { byCurrency[currency] = value }
                    }
                    return byCurrency
                }
                for metric in query.metrics {
                    switch metric {
                    case .activeSubscriptions: values[metric] = .count(count(.activeSubscriptions, in: stock))
                    case .activeTrials: values[metric] = .count(count(.activeTrials, in: stock))
                    case .mrr: values[metric] = Self.formatted(amounts(.mrr, in: stock), dividedBy: 12)
                    case .newSubscriptions, .trialStarts, .trialConversions, .renewals, .churned:
                        values[metric] = .count(count(metric.sources(query.interval)[0], in: flows))
                    case .churnRate:
                        values[metric] = .rate(Self.rate(count(query.interval.churnMetric, in: flows),
                                                         of: count(.activeSubscriptions, in: stockAtStart)))
                    case .revenue: values[metric] = Self.formatted(amounts(.revenue, in: flows))
                    case .refunds: values[metric] = Self.formatted(amounts(.refunds, in: flows))
                    case .netRevenue:
                        let revenue = amounts(.revenue, in: flows)
                        var net = revenue
                        for (currency, refunded) in amounts(.refunds, in: flows) { net[currency, default: 0] -= refunded }
                        values[metric] = Self.formatted(net, keepingZeros: Set(revenue.keys))
                    }
                }
                if query.groupBy != .none, values.values.allSatisfy(Self.isEmpty) { continue }
                points.append(AnalyticsPoint(start: start, end: end, group: query.groupBy == .none ? nil : group, values: values))
            }
        }
        return AnalyticsSeries(interval: query.interval, metrics: query.metrics, points: points)
    }

    /// Micros per currency as decimal strings in each currency's minor unit;
    /// a currency whose sum is 0 is left out unless it had something (a net
    /// revenue that refunds cancelled).
    static func formatted(_ micros: [String: Int64], dividedBy divisor: Int64 = 1, keepingZeros kept: Set<String> = []) -> AnalyticsValue {
        var amounts: [String: String] = [:]
        for (currency, value) in micros where value != 0 || kept.contains(currency) {
            amounts[currency] = Currency.format(Amount(micros: value), in: currency, dividedBy: divisor)
        }
        return .amounts(amounts)
    }

    /// `part ÷ whole` rounded half-even to four places; nil when `whole` is 0.
    static func rate(_ part: Int64, of whole: Int64) -> String? {
        guard whole > 0 else { return nil }
        let scaled = part * 10_000
        var quotient = scaled / whole
        let remainder = scaled % whole
        if remainder * 2 > whole || (remainder * 2 == whole && quotient % 2 == 1) { quotient += 1 }
        let fraction = String(quotient % 10_000)
        return "\(quotient / 10_000)." + String(repeating: "0", count: 4 - fraction.count) + fraction
    }

    static func isEmpty(_ value: AnalyticsValue) -> Bool {
        switch value {
        case .count(let count): count == 0
        case .amounts(let amounts): amounts.isEmpty
        case .rate(let rate): rate == nil
        }
    }
}
