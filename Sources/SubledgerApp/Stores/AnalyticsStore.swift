import Foundation
import JSON
import Ledger
import Postgres

/// Reads the analytics projection's sums: a series of intervals
/// (`GET /v1/analytics`) and cohorts (`GET /v1/analytics/cohorts`).
public struct AnalyticsStore: Sendable {
    let reads: PoolShare

    public init(pool: ConnectionPool, share: PoolShare? = nil) {
        reads = share ?? PoolShare(of: pool, limit: pool.configuration.maximumConnections)
    }

    /// The series of `query` over `intervals` (from `AnalyticsInterval.intervals`).
    ///
    /// Two statements in one snapshot: every stock's value at the end of the
    /// day before the first interval (the sums of the years before plus the
    /// days of its year before it, at most a year of rows), and the day sums
    /// over the range; the intervals are summed from them in memory.
    public func series(_ query: AnalyticsQuery, intervals: [(start: Date, end: Date)]) async throws -> AnalyticsSeries {
        guard let first = intervals.first, let last = intervals.last else {
            return AnalyticsSeries(interval: query.interval, metrics: query.metrics, points: [])
        }
        let firstDay = AnalyticsItem.flowDay(of: first.start), lastDay = AnalyticsItem.flowDay(of: last.end) - 1
        let metrics = Set(query.metrics.flatMap { $0.sources(query.interval) })
        let stocks = metrics.intersection(AnalyticsRows.stocks)
        let year = AnalyticsRows.year(ofDay: firstDay)
        let yearStart = AnalyticsItem.flowDay(of: AnalyticsInterval.utc.date(from: DateComponents(year: year, month: 1, day: 1))!)
        let group = switch query.groupBy {
        case .none: "''"
        case .product: "product_id"
        case .store: "store"
        }
        let filter = """
            environment = $1 AND metric IN (SELECT jsonb_array_elements_text($2::jsonb))
            AND ($3::text IS NULL OR store = $3) AND ($4::text IS NULL OR product_id = $4)
            """
        func binds(_ metrics: Set<AnalyticsMetric>) -> [String?] {
            [query.environment.rawValue, JSONArgument.strings(metrics.map(\.rawValue).sorted()).text, query.store?.rawValue,
             query.productID]
        }
        var sums = AnalyticsDaySums()
        try await reads.withConnection { connection in
            try await connection.withTransaction(isolation: .repeatableRead) { connection in
                if !stocks.isEmpty {
                    let rows = try await connection.query(PostgresQuery(unsafeSQL: """
                        SELECT g, metric, currency, sum(value)::bigint FROM (
                            SELECT \(group) AS g, metric, currency, value FROM analytics_years WHERE \(filter) AND year < $5
                            UNION ALL
                            SELECT \(group), metric, currency, value FROM analytics_days
                            WHERE \(filter) AND day >= DATE '1970-01-01' + $6::int AND day < DATE '1970-01-01' + $7::int
                        ) AS before GROUP BY g, metric, currency
                        """, binds: binds(stocks) + [String(year), String(yearStart), String(firstDay)]))
                    for row in rows {
                        guard let metric = AnalyticsMetric(rawValue: try row.decode(String.self, at: 1)) else { continue }
                        let key = AnalyticsDaySums.Key(group: try row.decode(String.self, at: 0), metric: metric,
                                                       currency: try row.decode(String.self, at: 2))
                        sums.base[key] = try row.decode(Int64.self, at: 3)
                    }
                }
                let rows = try await connection.query(PostgresQuery(unsafeSQL: """
                    SELECT \(group), metric, currency, day - DATE '1970-01-01', sum(value)::bigint FROM analytics_days
                    WHERE \(filter) AND day >= DATE '1970-01-01' + $5::int AND day <= DATE '1970-01-01' + $6::int
                    GROUP BY 1, metric, currency, day
                    """, binds: binds(metrics) + [String(firstDay), String(lastDay)]))
                for row in rows {
                    guard let metric = AnalyticsMetric(rawValue: try row.decode(String.self, at: 1)) else { continue }
                    let key = AnalyticsDaySums.Key(group: try row.decode(String.self, at: 0), metric: metric,
                                                   currency: try row.decode(String.self, at: 2))
                    sums.days[key, default: [:]][try row.decode(Int.self, at: 3)] = try row.decode(Int64.self, at: 4)
                }
            }
        }
        return sums.series(query, intervals: intervals)
    }

    /// One cohort: the subscriptions whose first paid period began in the interval starting at `start`.
    public struct Cohort: Sendable, Equatable {
        public var start: Date
        public var size: Int64
        /// `retained[k]`: how many pay at the end of the `k + 1`-th interval after this one.
        public var retained: [Int64]
        public var trialStarts: Int64
        public var trialConversions: Int64
    }

    /// The cohorts of `intervals` (weeks or months); retention listed for
    /// interval ends no later than `now`.
    public func cohorts(_ query: AnalyticsQuery, intervals: [(start: Date, end: Date)], now: Date) async throws -> [Cohort] {
        guard let first = intervals.first, let last = intervals.last else { return [] }
        let firstDay = AnalyticsItem.flowDay(of: first.start), lastDay = AnalyticsItem.flowDay(of: last.end) - 1
        let filter = """
            environment = $1 AND ($2::text IS NULL OR store = $2) AND ($3::text IS NULL OR product_id = $3)
            """
        let binds: [String?] = [query.environment.rawValue, query.store?.rawValue, query.productID, String(firstDay), String(lastDay)]
        var flows: [AnalyticsMetric: [Int: Int64]] = [:]
        var retained: [Int: [Int: Int64]] = [:]
        try await reads.withConnection { connection in
            try await connection.withTransaction(isolation: .repeatableRead) { connection in
                for row in try await connection.query(PostgresQuery(unsafeSQL: """
                    SELECT metric, day - DATE '1970-01-01', sum(value)::bigint FROM analytics_days
                    WHERE \(filter) AND metric IN ('new_subscriptions', 'trial_starts', 'trials_converted')
                    AND day >= DATE '1970-01-01' + $4::int AND day <= DATE '1970-01-01' + $5::int
                    GROUP BY metric, day
                    """, binds: binds)) {
                    guard let metric = AnalyticsMetric(rawValue: try row.decode(String.self, at: 0)) else { continue }
                    flows[metric, default: [:]][try row.decode(Int.self, at: 1)] = try row.decode(Int64.self, at: 2)
                }
                for row in try await connection.query(PostgresQuery(unsafeSQL: """
                    SELECT cohort - DATE '1970-01-01', k, sum(value)::bigint FROM analytics_retention
                    WHERE \(filter) AND metric = $6
                    AND cohort >= DATE '1970-01-01' + $4::int AND cohort <= DATE '1970-01-01' + $5::int
                    GROUP BY cohort, k
                    """, binds: binds + [query.interval.retentionMetric.rawValue])) {
                    retained[try row.decode(Int.self, at: 0), default: [:]][try row.decode(Int.self, at: 1)] = try row.decode(Int64.self, at: 2)
                }
            }
        }
        return intervals.map { start, end in
            let days = AnalyticsItem.flowDay(of: start)...(AnalyticsItem.flowDay(of: end) - 1)
            func sum(_ metric: AnalyticsMetric) -> Int64 { days.reduce(0) { $0 + (flows[metric]?[$1] ?? 0) } }
            // Retention is stored as deltas over the offsets: each count is the sum up to it.
            var counts: [Int64] = []
            var running: Int64 = 0
            var measuredAt = query.interval.next(after: end)
            while measuredAt <= now, counts.count < AnalyticsQuery.maximumIntervals {
                running += retained[days.lowerBound]?[counts.count] ?? 0
                counts.append(running)
                measuredAt = query.interval.next(after: measuredAt)
            }
            return Cohort(start: start, size: sum(.newSubscriptions), retained: counts, trialStarts: sum(.trialStarts),
                          trialConversions: sum(.trialsConverted))
        }
    }
}
