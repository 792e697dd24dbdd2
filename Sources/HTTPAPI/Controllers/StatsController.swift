import Foundation
import Hummingbird
import JSON
import Ledger
import SubledgerApp

/// `GET /v1/stats` and `GET /v1/stats/active` (support, admin): counts of
/// active subscribers from the read models' intervals, at an instant or as a
/// time series.
struct StatsController {
    let queries: ReadModelQueries
    let keys: APIKeys
    let now: @Sendable () -> Date
    /// The longest series one request may ask for.
    static let maximumPoints = 1000

    func addRoutes(to router: Router<AppRequestContext>) {
        router.group("v1/stats")
            .add(middleware: AuthMiddleware(keys: keys, access: .support))
            .get(use: stats)
            .get("active", use: series)
    }

    struct SeriesBody: Encodable {
        var entitlement: String?
        var environment: Ledger.Environment
        var interval: String
        var series: [ReadModelQueries.SeriesPoint]
    }

    @Sendable func stats(request: Request, context: AppRequestContext) async throws -> Response {
        let at = try RequestInput.instant("at", in: request) ?? now()
        return try .json(try await queries.stats(at: at, environment: try RequestInput.environment(in: request)))
    }

    /// `from` (default: 30 intervals before `to`) to `to` (default: now) by `interval` (default: day).
    @Sendable func series(request: Request, context: AppRequestContext) async throws -> Response {
        let interval = try RequestInput.choice("interval", in: request, as: ReadModelQueries.Interval.self) ?? .day
        let to = try RequestInput.instant("to", in: request) ?? now()
        let from = try RequestInput.instant("from", in: request) ?? to - 30 * interval.seconds
        guard from <= to else {
            throw LedgerError.invalidField("from", expected: "an instant no later than 'to' (\(RFC3339.format(to)))")
        }
        guard to.timeIntervalSince(from) / interval.seconds < Double(Self.maximumPoints) else {
            throw LedgerError.invalidField("from", expected: "at most \(Self.maximumPoints) \(interval.rawValue)s before 'to'")
        }
        let entitlement = try RequestInput.identifier("entitlement", in: request)
        let environment = try RequestInput.environment(in: request)
        let points = try await queries.activeSeries(from: from, to: to, interval: interval, entitlement: entitlement,
                                                    environment: environment)
        return try .json(SeriesBody(entitlement: entitlement, environment: environment, interval: interval.rawValue, series: points))
    }
}
