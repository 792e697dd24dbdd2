import Foundation
import Hummingbird
import JSON
import Ledger
import SubledgerApp

/// `GET /v1/analytics` and `GET /v1/analytics/cohorts` (support, admin): the
/// subscription metrics of docs/analytics.md, as JSON or, with
/// `Accept: text/csv`, as CSV.
struct AnalyticsController {
    let store: AnalyticsStore
    let keys: APIKeys
    let now: @Sendable () -> Date

    func addRoutes(to router: Router<AppRequestContext>) {
        router.group("v1/analytics")
            .add(middleware: AuthMiddleware(keys: keys, access: .support))
            .get(use: series)
            .get("cohorts", use: cohorts)
    }

    @Sendable func series(request: Request, context: AppRequestContext) async throws -> Response {
        let (query, intervals) = try Self.query(request, now: now(), defaultInterval: .day)
        let series = try await store.series(query, intervals: intervals)
        if Self.wantsCSV(request) { return Self.csv(series.csvRows) }
        return .json(bytes: Array(series.json(from: intervals.first?.start ?? query.from, to: query.to).utf8))
    }

    @Sendable func cohorts(request: Request, context: AppRequestContext) async throws -> Response {
        let now = now()
        let (query, intervals) = try Self.query(request, now: now, defaultInterval: .month)
        guard query.interval != .day else {
            throw LedgerError.invalidField("interval", expected: "week or month", got: "day")
        }
        let cohorts = try await store.cohorts(query, intervals: intervals, now: now)
        if Self.wantsCSV(request) { return Self.csv(cohorts.csvRows) }
        return .json(bytes: Array(cohorts.json(interval: query.interval).utf8))
    }

    /// The query's parameters, each refused with 400 naming it; `from`
    /// defaults to 30 days before `to`, which defaults to now.
    static func query(_ request: Request, now: Date, defaultInterval: AnalyticsInterval) throws
        -> (AnalyticsQuery, [(start: Date, end: Date)]) {
        let metrics = try request.uri.queryParameters.get("metrics").map { text throws(LedgerError) in
            try AnalyticsQuery.metrics(parsing: text, field: "metrics")
        } ?? AnalyticsReportMetric.allCases
        let interval = try RequestInput.choice("interval", in: request, as: AnalyticsInterval.self) ?? defaultInterval
        let to = try RequestInput.instant("to", in: request) ?? now
        let from = try RequestInput.instant("from", in: request) ?? AnalyticsQuery.defaultFrom(to: to)
        let intervals = try AnalyticsQuery.intervals(interval, from: from, to: to, field: "from")
        let query = AnalyticsQuery(
            metrics: metrics, from: from, to: to, interval: interval, environment: try RequestInput.environment(in: request),
            store: try RequestInput.choice("store", in: request, as: Store.self),
            productID: try RequestInput.identifier("productId", in: request),
            groupBy: try RequestInput.choice("groupBy", in: request, as: AnalyticsQuery.GroupBy.self) ?? .none)
        return (query, intervals)
    }

    static func wantsCSV(_ request: Request) -> Bool {
        request.headers[.accept]?.lowercased().contains("text/csv") == true
    }

    static func csv(_ rows: [[String]]) -> Response {
        Response(status: .ok, headers: [.contentType: "text/csv; charset=utf-8"],
                 body: .init(byteBuffer: ByteBuffer(string: AnalyticsText.csv(rows))))
    }
}
