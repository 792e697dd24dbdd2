import Foundation
import Ledger
import Postgres

/// Questions across subscribers, answered from the read models
/// (`sql/0007_read_models.sql`) by SQL, never by folding streams.
public struct ReadModelQueries: Sendable {
    /// The support reads' share of the pool (`AppDependencies.listings`), or all of it.
    let reads: PoolShare

    public init(pool: ConnectionPool, share: PoolShare? = nil) {
        self.reads = share ?? PoolShare(of: pool, limit: pool.configuration.maximumConnections)
    }

    // MARK: Subscriptions

    /// What `GET /v1/subscriptions` filters on; nil: any.
    public struct SubscriptionFilter: Sendable {
        public var environment: Environment = .production
        public var entitlement: String?
        public var group: String?
        public var productID: String?
        public var status: SubscriptionStatus?
        public var store: Store?
        /// `expiresAt` earlier than this.
        public var expiresBefore: Date?
        /// `expiresAt` at or after this.
        public var expiresAfter: Date?
        public var limit = 100
        /// Where the previous page ended.
        public var cursor: SubscriptionCursor?

        public init() {}
    }

    /// A subscription as the state lists it, with its subscriber and what the
    /// read model knows besides.
    public struct ListedSubscription: Sendable, Encodable {
        public var subscriberID: String
        public var environment: Environment
        public var group: String
        public var productID: String
        public var type: ProductType
        public var status: SubscriptionStatus
        @ExplicitNull public var expiresAt: Date?
        public var autoRenew: Bool
        public var originalTransactionID: String
        public var latestTransactionID: String
        @ExplicitNull public var startsAt: Date?
        @ExplicitNull public var gracePeriodEndsAt: Date?
        @ExplicitNull public var revokedAt: Date?
        public var entitlements: [String]
        public var store: Store
        var series: String

        enum CodingKeys: String, CodingKey {
            case subscriberID = "subscriberId", environment, group, productID = "productId", type, status, expiresAt, autoRenew
            case originalTransactionID = "originalTransactionId", latestTransactionID = "latestTransactionId"
            case startsAt, gracePeriodEndsAt, revokedAt, entitlements, store
        }
    }

    /// One page of subscriptions in (subscriber, group, original transaction)
    /// order, statuses as of `now`, and the cursor of the next page (nil:
    /// none). Keyset pagination: a page starts after the key the cursor
    /// names, so rows written or removed meanwhile never shift the others.
    ///
    /// A page reads at most `scanBudget` rows of the key order, whatever the
    /// filters: the product and status filters are computed per row (the
    /// current period's product, the status at `now`), so no index can serve
    /// them, and a rare value would otherwise walk the whole table. When the
    /// budget runs out first, the page holds the matches found so far (maybe
    /// none) and the cursor names the last row read: the client follows it.
    public func subscriptions(_ filter: SubscriptionFilter, now: Date) async throws -> (page: [ListedSubscription], next: SubscriptionCursor?) {
        let rows = try await reads.query(Self.subscriptionsQuery(filter, now: now))
        var matches: [ListedSubscription] = []
        var edge: SubscriptionCursor?
        for row in rows {
            let subscriberID = try row.decode(String.self, at: 0), group = try row.decode(String.self, at: 1)
            let series = try row.decode(String.self, at: 2)
            if try row.decode(Int.self, at: 14) == Self.scanBudget {
                edge = SubscriptionCursor(subscriberID: subscriberID, group: group, series: series)
            }
            guard try row.decode(Bool.self, at: 15) else { continue }
            matches.append(ListedSubscription(
                subscriberID: subscriberID, environment: filter.environment,
                group: group, productID: try row.decode(String.self, at: 3),
                type: ProductType(rawValue: try row.decode(String.self, at: 4)) ?? .autoRenewable,
                status: SubscriptionStatus(rawValue: try row.decode(String.self, at: 5)) ?? .expired,
                expiresAt: try row.decode(Date?.self, at: 6), autoRenew: try row.decode(Bool.self, at: 7),
                originalTransactionID: try row.decode(String.self, at: 8), latestTransactionID: try row.decode(String.self, at: 9),
                startsAt: try row.decode(Date?.self, at: 10), gracePeriodEndsAt: try row.decode(Date?.self, at: 11),
                revokedAt: try row.decode(Date?.self, at: 12),
                entitlements: (try? JSONDecoder().decode([String].self, from: Data(try row.decode(String.self, at: 13).utf8))) ?? [],
                store: Store(rawValue: try row.decode(String.self, at: 16)) ?? .appStore, series: series))
        }
        if matches.count > filter.limit {
            let page = Array(matches.prefix(filter.limit))
            return (page, page.last.map { SubscriptionCursor(subscriberID: $0.subscriberID, group: $0.group, series: $0.series) })
        }
        return (matches, edge)
    }

    /// The most rows of the key order one page reads (see `subscriptions`).
    public static let scanBudget = 10_000

    /// The listing's statement: a walk of the key (subscriber, environment,
    /// group, series) in its order, at most `scanBudget` rows, the filters
    /// checked on the way. Each row says its place in the walk and whether it
    /// matches; the rows that match come back, up to the page and one more,
    /// and so does the walk's last row when the budget ran out (where the
    /// next page starts).
    static func subscriptionsQuery(_ filter: SubscriptionFilter, now: Date) -> PostgresQuery {
        let cursor = filter.cursor
        return """
            SELECT s.subscriber_id, s."group", s.series, coalesce(c.product_id, s.product_id), s.type,
                   subscription_status(\(now)::timestamptz, s.store, s.starts_at, s.expires_at, s.grace_ends_at, s.revoked_at,
                                       s.held_status),
                   s.expires_at, s.auto_renew, coalesce(c.original_transaction_id, s.original_transaction_id),
                   s.latest_transaction_id, s.starts_at, s.grace_ends_at, s.revoked_at, array_to_json(s.entitlements)::text,
                   s.walked, f.matches, s.store
            FROM (SELECT w.*, row_number() OVER (ORDER BY w.subscriber_id, w."group", w.series) AS walked
                  FROM subscriptions w
                  WHERE w.environment = \(filter.environment.rawValue)
                    AND (\(cursor?.subscriberID)::text IS NULL
                         OR (w.subscriber_id, w."group", w.series) > (\(cursor?.subscriberID), \(cursor?.group), \(cursor?.series)))
                  ORDER BY w.subscriber_id, w."group", w.series
                  LIMIT \(Self.scanBudget)) s
            LEFT JOIN LATERAL (
                SELECT p.product_id, p.original_transaction_id FROM non_renewing_periods p
                WHERE s.type = 'non-renewing' AND p.environment = s.environment AND p.subscriber_id = s.subscriber_id
                  AND p."group" = s."group" AND p.starts_at <= \(now)::timestamptz AND \(now)::timestamptz < p.ends_at
                LIMIT 1) c ON true
            CROSS JOIN LATERAL (SELECT coalesce(
                (\(filter.entitlement)::text IS NULL OR s.entitlements @> ARRAY[\(filter.entitlement)::text])
                AND (\(filter.group)::text IS NULL OR s."group" = \(filter.group))
                AND (\(filter.productID)::text IS NULL OR coalesce(c.product_id, s.product_id) = \(filter.productID))
                AND (\(filter.status?.rawValue)::text IS NULL
                     OR subscription_status(\(now)::timestamptz, s.store, s.starts_at, s.expires_at, s.grace_ends_at,
                                            s.revoked_at, s.held_status) = \(filter.status?.rawValue))
                AND (\(filter.store?.rawValue)::text IS NULL OR s.store = \(filter.store?.rawValue))
                AND (\(filter.expiresBefore)::timestamptz IS NULL OR s.expires_at < \(filter.expiresBefore))
                AND (\(filter.expiresAfter)::timestamptz IS NULL OR s.expires_at >= \(filter.expiresAfter)), false) AS matches) f
            WHERE f.matches OR s.walked = \(Self.scanBudget)
            ORDER BY s.subscriber_id, s."group", s.series
            LIMIT \(filter.limit + 2)
            """
    }

    // MARK: Stats

    /// Active subscribers at an instant, counted per entitlement, product and type.
    public struct Stats: Sendable, Encodable {
        public struct EntitlementCount: Sendable, Encodable, Equatable {
            public var id: String
            public var active: Int
        }

        public struct ProductCount: Sendable, Encodable, Equatable {
            public var productID: String
            public var type: ProductType
            public var active: Int

            enum CodingKeys: String, CodingKey { case productID = "productId", type, active }
        }

        public struct TypeCount: Sendable, Encodable, Equatable {
            public var type: ProductType
            public var active: Int
        }

        public var at: Date
        public var environment: Environment
        /// Subscribers with at least one active product.
        public var activeSubscribers: Int
        public var entitlements: [EntitlementCount]
        public var products: [ProductCount]
        public var types: [TypeCount]
    }

    public func stats(at: Date, environment: Environment) async throws -> Stats {
        let rows = try await reads.query(Self.statsQuery(at: at, environment: environment))
        var stats = Stats(at: at, environment: environment, activeSubscribers: 0, entitlements: [], products: [], types: [])
        for row in rows {
            let name = try row.decode(String.self, at: 1)
            let count = try row.decode(Int.self, at: 3)
            switch try row.decode(String.self, at: 0) {
            case "entitlement": stats.entitlements.append(.init(id: name, active: count))
            case "product":
                let type = ProductType(rawValue: try row.decode(String.self, at: 2)) ?? .autoRenewable
                stats.products.append(.init(productID: name, type: type, active: count))
            case "type": stats.types.append(.init(type: ProductType(rawValue: name) ?? .autoRenewable, active: count))
            default: stats.activeSubscribers = count
            }
        }
        return stats
    }

    /// The counts' statement: the rows active at `at`, found through their
    /// end (sql/0021) when those are few.
    static func statsQuery(at: Date, environment: Environment) -> PostgresQuery {
        """
            WITH e AS (SELECT entitlement, subscriber_id FROM entitlements
                       WHERE environment = \(environment.rawValue) AND starts_at <= \(at)::timestamptz
                         AND (ends_at IS NULL OR \(at)::timestamptz < ends_at)),
                 p AS (SELECT product_id, type, subscriber_id FROM product_activity
                       WHERE environment = \(environment.rawValue) AND starts_at <= \(at)::timestamptz
                         AND (ends_at IS NULL OR \(at)::timestamptz < ends_at))
            SELECT 'entitlement', entitlement, '', count(DISTINCT subscriber_id) FROM e GROUP BY entitlement
            UNION ALL
            SELECT 'product', product_id, type::text, count(DISTINCT subscriber_id) FROM p GROUP BY product_id, type
            UNION ALL
            SELECT 'type', type::text, '', count(DISTINCT subscriber_id) FROM p GROUP BY type
            UNION ALL
            SELECT 'all', '', '', count(DISTINCT subscriber_id) FROM p
            ORDER BY 1, 2, 3
            """
    }

    /// The step of a time series.
    public enum Interval: String, Sendable, CaseIterable {
        case day, week

        var sqlInterval: String { self == .day ? "1 day" : "7 days" }
        public var seconds: TimeInterval { self == .day ? 86_400 : 7 * 86_400 }
    }

    /// One point of a series: how many subscribers were active at `at`.
    public struct SeriesPoint: Sendable, Encodable, Equatable {
        public var at: Date
        public var active: Int
    }

    /// Subscribers with `entitlement` (nil: any entitlement) active at
    /// `from`, `from + interval`, … up to `to`.
    ///
    /// One scan of the matching rows, whatever the number of points (probing
    /// per point joined every active row to every point). Each subscriber's
    /// rows are merged where they overlap or touch (several entitlements), so
    /// a subscriber counts once; each merged stretch adds 1 from the first
    /// point at or after its start and takes it back from the first point at
    /// or after its end. `width_bucket` of the instant just before (the
    /// database keeps microseconds) is the number of points before it, that
    /// is the index of that first point.
    public func activeSeries(from: Date, to: Date, interval: Interval, entitlement: String?,
                             environment: Environment) async throws -> [SeriesPoint] {
        try await reads.query(Self.activeSeriesQuery(from: from, to: to, interval: interval, entitlement: entitlement,
                                                     environment: environment))
            .map { SeriesPoint(at: try $0.decode(Date.self, at: 0), active: try $0.decode(Int.self, at: 1)) }
    }

    /// The series' statement: one scan of the rows that overlap the span.
    static func activeSeriesQuery(from: Date, to: Date, interval: Interval, entitlement: String?,
                                  environment: Environment) -> PostgresQuery {
        """
            WITH points AS (
                SELECT array_agg(at ORDER BY at) AS ats
                FROM generate_series(\(from)::timestamptz, \(to)::timestamptz, \(interval.sqlInterval)::interval) AS g(at)
            ),
            matching AS (
                SELECT subscriber_id, starts_at, coalesce(ends_at, 'infinity') AS ends_at FROM entitlements
                WHERE environment = \(environment.rawValue) AND (\(entitlement)::text IS NULL OR entitlement = \(entitlement))
                  AND starts_at <= \(to)::timestamptz AND (ends_at IS NULL OR ends_at > \(from)::timestamptz)
            ),
            marked AS (
                SELECT subscriber_id, starts_at, ends_at,
                       CASE WHEN starts_at <= max(ends_at) OVER (PARTITION BY subscriber_id ORDER BY starts_at, ends_at
                                                                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                            THEN 0 ELSE 1 END AS opens
                FROM matching
            ),
            numbered AS (
                SELECT subscriber_id, starts_at, ends_at,
                       sum(opens) OVER (PARTITION BY subscriber_id ORDER BY starts_at, ends_at ROWS UNBOUNDED PRECEDING) AS stretch
                FROM marked
            ),
            stretches AS (SELECT min(starts_at) AS starts_at, max(ends_at) AS ends_at FROM numbered GROUP BY subscriber_id, stretch),
            changes AS (
                SELECT width_bucket(starts_at - interval '1 microsecond', (SELECT ats FROM points)) AS first, 1 AS delta
                FROM stretches
                UNION ALL
                SELECT width_bucket(ends_at - interval '1 microsecond', (SELECT ats FROM points)), -1
                FROM stretches WHERE ends_at < 'infinity'
            ),
            per_point AS (SELECT first, sum(delta) AS delta FROM changes GROUP BY first)
            SELECT p.at, coalesce(sum(c.delta) OVER (ORDER BY p.index), 0)::bigint
            FROM unnest((SELECT ats FROM points)) WITH ORDINALITY AS p(at, index)
            LEFT JOIN per_point c ON c.first = p.index - 1
            ORDER BY p.index
            """
    }
}

/// Where a page of `GET /v1/subscriptions` ended: the key of its last row,
/// sent to clients as an opaque token (base64url of JSON).
public struct SubscriptionCursor: Sendable, Equatable {
    public var subscriberID: String
    public var group: String
    public var series: String

    public var token: String {
        let data = (try? JSONEncoder().encode([subscriberID, group, series])) ?? Data()
        return data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    public init(subscriberID: String, group: String, series: String) {
        self.subscriberID = subscriberID
        self.group = group
        self.series = series
    }

    /// nil when `token` is not one this server gave.
    public init?(token: String) {
        var base64 = token.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard token.utf8.count <= 2000, let data = Data(base64Encoded: base64),
              let parts = try? JSONDecoder().decode([String].self, from: data), parts.count == 3,
              !parts.contains(where: { $0.contains("\u{0}") }) else { return nil }
        self.init(subscriberID: parts[0], group: parts[1], series: parts[2])
    }
}
