import ArgumentParser
import CommandSupport
import EventStore
import Foundation
import JSON
import Ledger
import SubledgerApp

/// `subledger analytics`: the series of `GET /v1/analytics` (or its cohorts)
/// read from the database, as an aligned table, CSV or JSON.
struct AnalyticsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "analytics",
        abstract: "Print the subscription metrics (MRR, actives, trials, churn, revenue, refunds) or the cohorts, as GET /v1/analytics does.",
        discussion: """
            The numbers come from the analytics projection, which `serve` keeps current; a note on \
            standard error says when it is behind the log. Definitions: docs/analytics.md.
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable { case table, csv, json }

    @Option(help: "First instant (RFC 3339), rounded down to its interval's start; default 30 days before --to.") var from: String?
    @Option(help: "End instant (RFC 3339): intervals starting before it are listed; default now.") var to: String?
    @Option(help: "day, week or month (cohorts: week or month; default month).") var interval: String?
    @Option(help: "Comma-separated metrics; default all.") var metrics: String?
    @Option(help: "Production or Sandbox.") var environment: Environment = .production
    @Option(help: "app_store or google_play; default both.") var store: Store?
    @Option(name: .customLong("product"), help: "Only this product id.") var productID: String?
    @Option(name: .customLong("group-by"), help: "none, product or store.") var groupBy: String = "none"
    @Flag(help: "Print the cohorts (size, retention, trials) instead of the series.") var cohorts = false
    @Option(help: "table, csv or json.") var format: Format = .table
    @OptionGroup var options: ConfigurationOptions

    func run() async throws {
        let now = Date()
        let interval = try choice(interval ?? (cohorts ? "month" : "day"), named: "--interval", as: AnalyticsInterval.self)
        if cohorts, interval == .day { throw ValidationError("--interval must be week or month for --cohorts") }
        let end = try parseInstant(to, option: "--to") ?? now
        let start = try parseInstant(from, option: "--from") ?? AnalyticsQuery.defaultFrom(to: end)
        let (intervals, chosen): ([(start: Date, end: Date)], [AnalyticsReportMetric])
        do {
            intervals = try AnalyticsQuery.intervals(interval, from: start, to: end, field: "--from")
            chosen = try metrics.map { text throws(LedgerError) in try AnalyticsQuery.metrics(parsing: text, field: "--metrics") }
                ?? AnalyticsReportMetric.allCases
        } catch {
            throw ValidationError(error.message)
        }
        let query = AnalyticsQuery(metrics: chosen, from: start, to: end, interval: interval, environment: environment,
                                   store: store, productID: productID,
                                   groupBy: try choice(groupBy, named: "--group-by", as: AnalyticsQuery.GroupBy.self))
        let (rows, json) = try await CommandDatabase.with(options) { database in
            let lag = try await EventStore(pool: database.pool, logger: database.logger).lag(of: AnalyticsProjection.consumerName)
            if lag > 0 {
                FileHandle.standardError.write(Data("note: the analytics projection has \(lag) events to apply (is `subledger serve` running?)\n".utf8))
            }
            let store = AnalyticsStore(pool: database.pool)
            if cohorts {
                let found = try await store.cohorts(query, intervals: intervals, now: now)
                return (found.csvRows, found.json(interval: interval))
            }
            let series = try await store.series(query, intervals: intervals)
            return (series.csvRows, series.json(from: intervals.first?.start ?? start, to: end))
        }
        switch format {
        case .table: print(AnalyticsText.table(rows), terminator: "")
        case .csv: print(AnalyticsText.csv(rows), terminator: "")
        case .json: print(json)
        }
    }

    private func choice<Value: RawRepresentable & CaseIterable>(_ text: String, named option: String, as _: Value.Type) throws -> Value
    where Value.RawValue == String {
        guard let value = Value(rawValue: text) else {
            throw ValidationError("\(option) must be one of \(Value.allCases.map(\.rawValue).joined(separator: ", ")), got \(text)")
        }
        return value
    }

    private func parseInstant(_ text: String?, option: String) throws -> Date? {
        guard let text else { return nil }
        guard let date = RFC3339.parse(text) else { throw ValidationError("\(option) must be an RFC 3339 instant, got \(text)") }
        return date
    }
}

extension Environment: ExpressibleByArgument {}
extension Store: ExpressibleByArgument {}
