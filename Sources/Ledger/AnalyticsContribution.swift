import Foundation

/// What one subscriber adds to the subscription analytics (the definitions
/// of docs/decisions/0006): items summed per UTC day
/// by the analytics projection. Stocks are day *deltas* (the stock at the
/// end of day D is the sum of the deltas of the days up to D); flows are
/// counts and amounts of the day their instant falls in.
public enum AnalyticsMetric: String, Sendable, Hashable, CaseIterable, Comparable {
    // Stocks, as deltas.
    case activeSubscriptions = "active_subscriptions"
    case activeTrials = "active_trials"
    /// Micros of `currency` per year (MRR × 12): the yearly amounts of
    /// standard periods are exact, so their sum is, and it is divided by 12
    /// once, when answered.
    case mrr
    // Flows.
    case newSubscriptions = "new_subscriptions"
    case trialStarts = "trial_starts"
    case trialConversions = "trial_conversions"
    case renewals
    /// Micros of `currency`.
    case revenue
    /// Micros of `currency`, at the revocation date.
    case refunds
    /// A paid subscription's end, counted when its subscriber is not entitled
    /// in the group at the end of the day, week or month the end falls in
    /// (one item per granularity: churn is judged at the interval's end).
    case churnedDay = "churned_day"
    case churnedWeek = "churned_week"
    case churnedMonth = "churned_month"
    // Cohorts.
    /// A free trial that a paid period of the same subscription followed,
    /// on the trial's start day (the cohort of trials begun that day).
    case trialsConverted = "trials_converted"
    /// Retention as deltas over offsets: the subscriptions of a cohort
    /// paying at the end of the `k + 1`-th week or month after the cohort's
    /// are the sum of the items of offsets 0 to `k`, under the day the
    /// cohort starts (a Monday or a month's first day). The cohort is the
    /// interval of the subscription's first paid period's start.
    case retainedWeek = "retained_week"
    case retainedMonth = "retained_month"

    /// Kept per cohort and offset (`analytics_retention`), not per day.
    public var isRetention: Bool { self == .retainedWeek || self == .retainedMonth }

    public static func < (left: Self, right: Self) -> Bool { left.code < right.code }

    /// The metric's stored code (`AnalyticsContributionCoding`), which also
    /// orders contributions and the tables' writes. Codes are never reused
    /// or changed: a new metric takes the next one.
    var code: UInt8 {
        switch self {
        case .activeSubscriptions: 0
        case .activeTrials: 1
        case .mrr: 2
        case .newSubscriptions: 3
        case .trialStarts: 4
        case .trialConversions: 5
        case .renewals: 6
        case .revenue: 7
        case .refunds: 8
        case .churnedDay: 9
        case .churnedWeek: 10
        case .churnedMonth: 11
        case .trialsConverted: 12
        case .retainedWeek: 13
        case .retainedMonth: 14
        }
    }
}

public struct AnalyticsItem: Sendable, Hashable {
    /// UTC days since 1970-01-01.
    public var day: Int
    public var environment: Environment
    public var store: Store
    public var productID: String
    /// An ISO 4217 code for amounts; empty for counts.
    public var currency: String
    public var metric: AnalyticsMetric
    /// For retention: how many intervals after the cohort's (0: the next one). 0 otherwise.
    public var offset: Int
    public var value: Int64

    public init(day: Int, environment: Environment, store: Store, productID: String, currency: String = "",
                metric: AnalyticsMetric, offset: Int = 0, value: Int64) {
        self.day = day
        self.environment = environment
        self.store = store
        self.productID = productID
        self.currency = currency
        self.metric = metric
        self.offset = offset
        self.value = value
    }

    /// The day whose end first measures a stock that changes at `instant`:
    /// the day `D` with `D.start < instant ≤ D.end` (a change exactly at
    /// midnight counts at the end of the day before, as `?at=` that midnight
    /// would see it).
    public static func stockDay(of instant: Date) -> Int {
        Int((instant.timeIntervalSince1970 / 86_400).rounded(.up)) - 1
    }

    /// The order of a stored contribution: by day, then the dimensions, the metric and the offset.
    static func precedes(_ left: AnalyticsItem, _ right: AnalyticsItem) -> Bool {
        if left.day != right.day { return left.day < right.day }
        if left.environment != right.environment { return left.environment == .production }
        if left.store != right.store { return left.store == .appStore }
        if left.productID != right.productID { return left.productID < right.productID }
        if left.currency != right.currency { return left.currency < right.currency }
        if left.metric != right.metric { return left.metric < right.metric }
        return left.offset < right.offset
    }

    /// The day an instant falls in: `[00:00, 24:00)` UTC.
    public static func flowDay(of instant: Date) -> Int {
        Int((instant.timeIntervalSince1970 / 86_400).rounded(.down))
    }
}

extension SubscriberLedger {
    /// This subscriber's contribution: its auto-renewable subscriptions of
    /// both stores and environments (support grants and family-shared
    /// copies never count), summed per key, zeros left out, in a stable order.
    public func analyticsContribution(catalog: Catalog) -> [AnalyticsItem] {
        var sums = AnalyticsSums()
        for environment in Environment.allCases {
            AnalyticsSweep(ledger: self, catalog: catalog, environment: environment).add(to: &sums)
        }
        return sums.items()
    }
}

/// One contribution's additions as they are made, summed per key once at
/// the end: sorted in the items' order, equal keys added together, zeros
/// left out. A dictionary keyed by the items' dimensions hashed two strings
/// a time, and its items were then sorted by comparing them: a third of a
/// rebuild's fold. Here the product and currency are numbered as they come
/// (a subscriber has a few), and the sort compares integers.
struct AnalyticsSums {
    private struct Entry {
        var day: Int
        var environment: Environment
        var store: Store
        /// Indexes into `products` and `currencies`.
        var product: Int
        var currency: Int
        var metric: AnalyticsMetric
        var offset: Int
        var value: Int64
    }

    private var entries: [Entry] = []
    private var products: [String] = []
    private var currencies: [String] = []

    mutating func add(day: Int, environment: Environment, store: Store, productID: String, currency: String,
                      metric: AnalyticsMetric, offset: Int, value: Int64) {
        entries.append(Entry(day: day, environment: environment, store: store, product: Self.index(of: productID, in: &products),
                             currency: Self.index(of: currency, in: &currencies), metric: metric, offset: offset, value: value))
    }

    private static func index(of name: String, in names: inout [String]) -> Int {
        if let index = names.firstIndex(of: name) { return index }
        names.append(name)
        return names.count - 1
    }

    /// The items, in `AnalyticsItem.precedes` order.
    func items() -> [AnalyticsItem] {
        func ranks(_ names: [String]) -> [Int] {
            var ranks = [Int](repeating: 0, count: names.count)
            for (rank, index) in names.indices.sorted(by: { names[$0] < names[$1] }).enumerated() { ranks[index] = rank }
            return ranks
        }
        let productRanks = ranks(products), currencyRanks = ranks(currencies)
        // The sort key of `precedes`, in integers.
        func key(_ entry: Entry) -> (Int, Int, Int, Int, Int, Int) {
            (entry.day, (entry.environment == .production ? 0 : 2) + (entry.store == .appStore ? 0 : 1),
             productRanks[entry.product], currencyRanks[entry.currency], Int(entry.metric.code), entry.offset)
        }
        let sorted = entries.map { (key: key($0), entry: $0) }.sorted { $0.key < $1.key }
        var items: [AnalyticsItem] = []
        var index = sorted.startIndex
        while index < sorted.endIndex {
            let first = sorted[index]
            var value: Int64 = 0
            while index < sorted.endIndex, sorted[index].key == first.key {
                value &+= sorted[index].entry.value
                index += 1
            }
            guard value != 0 else { continue }
            let entry = first.entry
            items.append(AnalyticsItem(day: entry.day, environment: entry.environment, store: entry.store,
                                       productID: products[entry.product], currency: currencies[entry.currency],
                                       metric: entry.metric, offset: entry.offset, value: value))
        }
        return items
    }
}
