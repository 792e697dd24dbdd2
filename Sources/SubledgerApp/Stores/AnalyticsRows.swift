import EventStore
import Foundation
import JSON
import Ledger
import Postgres

/// The analytics projection's tables (`sql/0033_analytics.sql`): sums of
/// subscribers' contributions per day (and per year for stocks) and per
/// cohort, and each subscriber's last contribution.
enum AnalyticsRows {
    static let tables = ["analytics_days", "analytics_years", "analytics_retention", "analytics_contributions"]

    /// One sum the tables keep: a day's (or a cohort's, for retention) value
    /// of a metric for one environment, store, product and currency.
    struct Cell: Hashable, Comparable {
        var environment: Environment
        var metric: AnalyticsMetric
        var day: Int
        var offset: Int
        var store: Store
        var productID: String
        var currency: String

        init(_ item: AnalyticsItem) {
            (environment, metric, day, offset, store, productID, currency) =
                (item.environment, item.metric, item.day, item.offset, item.store, item.productID, item.currency)
        }

        /// The tables' key order, so that two writers lock rows in the same order.
        static func < (left: Cell, right: Cell) -> Bool {
            if left.environment != right.environment { return left.environment == .production }
            if left.metric != right.metric { return left.metric < right.metric }
            if left.day != right.day { return left.day < right.day }
            if left.offset != right.offset { return left.offset < right.offset }
            if left.store != right.store { return left.store == .appStore }
            if left.productID != right.productID { return left.productID < right.productID }
            return left.currency < right.currency
        }
    }

    /// Stocks are kept per year as well: their value at a day's end sums every delta before it.
    static let stocks: Set<AnalyticsMetric> = [.activeSubscriptions, .activeTrials, .mrr]

    static func add(_ items: [AnalyticsItem], times sign: Int64, to sums: inout [Cell: Int64]) {
        for item in items { sums[Cell(item), default: 0] += sign * item.value }
    }

    /// Statements that add `sums` to the tables: one per table, each row
    /// once, in key order (two writers lock rows in the same order). With
    /// `adding` false the rows are new (a rebuild's load, before the
    /// shadows have their keys): plain inserts.
    static func additions(_ sums: [Cell: Int64], into tables: ProjectionTables, adding: Bool = true) -> [PostgresQuery] {
        // Rows as `jsonb_to_recordset` reads them; `d` is a day, or a year in `analytics_years`.
        func append(_ cell: Cell, _ value: Int64, to rows: inout String) {
            rows += rows.isEmpty ? "[" : ","
            rows += """
                {"e":\(JSONStringLiteral.quoted(cell.environment.rawValue)),"m":\(JSONStringLiteral.quoted(cell.metric.rawValue)),\
                "d":\(cell.day),"k":\(cell.offset),"s":\(JSONStringLiteral.quoted(cell.store.rawValue)),\
                "p":\(JSONStringLiteral.quoted(cell.productID)),"c":\(JSONStringLiteral.quoted(cell.currency)),"v":\(value)}
                """
        }
        var days = "", retention = "", yearRows = ""
        var years: [Cell: Int64] = [:]
        for (cell, value) in sums.sorted(by: { $0.key < $1.key }) where value != 0 {
            if cell.metric.isRetention { append(cell, value, to: &retention) } else { append(cell, value, to: &days) }
            if stocks.contains(cell.metric) {
                var year = cell
                year.day = Self.year(ofDay: cell.day)
                years[year, default: 0] += value
            }
        }
        for (cell, value) in years.sorted(by: { $0.key < $1.key }) where value != 0 { append(cell, value, to: &yearRows) }
        // Each table's key is its columns but `value`.
        func statement(_ table: String, _ columns: String, _ values: String, _ rows: String) -> PostgresQuery? {
            guard !rows.isEmpty else { return nil }
            let name = tables.name(table)
            return PostgresQuery(unsafeSQL: """
                INSERT INTO \(name) (\(columns), value)
                SELECT \(values), v FROM jsonb_to_recordset($1::jsonb) AS x(e text, m text, d int, k int, s text, p text, c text, v bigint)
                \(adding ? "ON CONFLICT (\(columns)) DO UPDATE SET value = \(name).value + excluded.value" : "")
                """, binds: [rows + "]"])
        }
        return [
            statement("analytics_days", "environment, metric, day, store, product_id, currency", "e, m, DATE '1970-01-01' + d, s, p, c",
                      days),
            statement("analytics_years", "environment, metric, year, store, product_id, currency", "e, m, d, s, p, c", yearRows),
            statement("analytics_retention", "environment, metric, cohort, k, store, product_id", "e, m, DATE '1970-01-01' + d, k, s, p",
                      retention),
        ].compactMap { $0 }
    }

    /// Stores each subscriber's new contribution (an empty one: none).
    static func storing(_ contributions: [(pseudonym: String, items: [UInt8]?)], into tables: ProjectionTables) -> [PostgresQuery] {
        let stored = contributions.filter { $0.items != nil }.sorted { $0.pseudonym < $1.pseudonym }
        let removed = contributions.filter { $0.items == nil }.map(\.pseudonym).sorted()
        var statements: [PostgresQuery] = []
        let name = tables.name("analytics_contributions")
        if !stored.isEmpty {
            let rows = stored.map { "[\(JSONStringLiteral.quoted($0.pseudonym)),\(JSONStringLiteral.quoted(Data($0.items!).base64EncodedString()))]" }
            statements.append(PostgresQuery(unsafeSQL: """
                INSERT INTO \(name) (pseudonym, items)
                SELECT x->>0, decode(x->>1, 'base64') FROM jsonb_array_elements($1::jsonb) AS x
                ON CONFLICT (pseudonym) DO UPDATE SET items = excluded.items
                """, binds: ["[" + rows.joined(separator: ",") + "]"]))
        }
        if !removed.isEmpty {
            statements.append(PostgresQuery(unsafeSQL: """
                DELETE FROM \(name) WHERE pseudonym IN (SELECT jsonb_array_elements_text($1::jsonb))
                """, binds: [JSONArgument.strings(removed).text]))
        }
        return statements
    }

    /// Inserts a rebuild's loaded contributions (`CopyBinaryRows` of
    /// pseudonym and items) with one binary `COPY`.
    static func copyContributions(_ rows: CopyBinaryRows, into tables: ProjectionTables, on connection: Connection) async throws {
        _ = try await connection.copy(
            unsafeSQL: "COPY \(tables.name("analytics_contributions")) (pseudonym, items) FROM STDIN WITH (FORMAT binary)",
            rows: rows)
    }

    /// The stored contributions of `pseudonyms`.
    static func contributions(of pseudonyms: [String], in tables: ProjectionTables, on connection: Connection) async throws
        -> [String: [UInt8]] {
        var stored: [String: [UInt8]] = [:]
        for row in try await connection.query(PostgresQuery(unsafeSQL: """
            SELECT pseudonym, items FROM \(tables.name("analytics_contributions"))
            WHERE pseudonym IN (SELECT jsonb_array_elements_text($1::jsonb))
            """, binds: [JSONArgument.strings(pseudonyms).text])) {
            stored[try row.decode(String.self, at: 0)] = Array(try row.decode(Data.self, at: 1))
        }
        return stored
    }

    static func deleteAll(on connection: Connection) async throws {
        try await connection.query(PostgresQuery(unsafeSQL: "TRUNCATE " + tables.joined(separator: ", ")))
    }

    /// The calendar year (UTC, proleptic Gregorian as PostgreSQL's dates) of a day counted from 1970-01-01.
    static func year(ofDay day: Int) -> Int { CivilDate.civilFromDays(day).year }
}
