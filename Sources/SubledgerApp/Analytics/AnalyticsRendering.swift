import Foundation
import JSON
import Ledger

/// The analytics as the API and the command line write them: JSON, CSV
/// (`Accept: text/csv`, `--format csv`) and an aligned text table.
extension AnalyticsSeries {
    public func json(from: Date, to: Date) -> String {
        var out = "{\"interval\":\(JSONStringLiteral.quoted(interval.rawValue)),\"from\":\(JSONStringLiteral.quoted(RFC3339.format(from))),"
        out += "\"to\":\(JSONStringLiteral.quoted(RFC3339.format(to))),\"series\":["
        for (index, point) in points.enumerated() {
            if index > 0 { out += "," }
            out += "{\"start\":\(JSONStringLiteral.quoted(RFC3339.format(point.start))),\"end\":\(JSONStringLiteral.quoted(RFC3339.format(point.end)))"
            if let group = point.group { out += ",\"group\":\(JSONStringLiteral.quoted(group))" }
            out += ",\"values\":{"
            for (metricIndex, metric) in metrics.enumerated() {
                if metricIndex > 0 { out += "," }
                out += JSONStringLiteral.quoted(metric.rawValue) + ":" + Self.json(point.values[metric] ?? .count(0))
            }
            out += "}}"
        }
        return out + "]}"
    }

    static func json(_ value: AnalyticsValue) -> String {
        switch value {
        case .count(let count): String(count)
        case .rate(let rate): rate.map { JSONStringLiteral.quoted($0) } ?? "null"
        case .amounts(let amounts):
            "{" + amounts.sorted { $0.key < $1.key }.map { JSONStringLiteral.quoted($0.key) + ":" + JSONStringLiteral.quoted($0.value) }
                .joined(separator: ",") + "}"
        }
    }

    /// Columns `start`, `end`, (`group`,) `currency`, then the metrics: one
    /// row per interval and currency, counts repeated on each, or one row
    /// with an empty currency when the interval has no amounts.
    public var csvRows: [[String]] {
        let grouped = points.contains { $0.group != nil }
        var rows = [["start", "end"] + (grouped ? ["group"] : []) + ["currency"] + metrics.map(\.rawValue)]
        for point in points {
            var currencies = Set<String>()
            for value in point.values.values { if case .amounts(let amounts) = value { currencies.formUnion(amounts.keys) } }
            for currency in currencies.isEmpty ? [""] : currencies.sorted() {
                var row = [RFC3339.format(point.start), RFC3339.format(point.end)] + (grouped ? [point.group ?? ""] : []) + [currency]
                for metric in metrics {
                    switch point.values[metric] ?? .count(0) {
                    case .count(let count): row.append(String(count))
                    case .rate(let rate): row.append(rate ?? "")
                    case .amounts(let amounts): row.append(amounts[currency] ?? "")
                    }
                }
                rows.append(row)
            }
        }
        return rows
    }
}

extension [AnalyticsStore.Cohort] {
    public func json(interval: AnalyticsInterval) -> String {
        var out = "{\"interval\":\(JSONStringLiteral.quoted(interval.rawValue)),\"cohorts\":["
        for (index, cohort) in enumerated() {
            let retained = cohort.retained.map { String($0) }.joined(separator: ",")
            out += index > 0 ? "," : ""
            out += "{\"start\":\(JSONStringLiteral.quoted(RFC3339.format(cohort.start))),\"size\":\(cohort.size),"
            out += "\"retained\":[\(retained)],\"trialStarts\":\(cohort.trialStarts),\"trialConversions\":\(cohort.trialConversions)}"
        }
        return out + "]}"
    }

    /// `start`, `size`, `trialStarts`, `trialConversions`, then `retained_1`, … (`retained_k` is `retained[k - 1]`).
    public var csvRows: [[String]] {
        let width = map(\.retained.count).max() ?? 0
        return [["start", "size", "trialStarts", "trialConversions"] + (0..<width).map { "retained_\($0 + 1)" }] + map { cohort in
            [RFC3339.format(cohort.start), String(cohort.size), String(cohort.trialStarts), String(cohort.trialConversions)]
                + (0..<width).map { $0 < cohort.retained.count ? String(cohort.retained[$0]) : "" }
        }
    }
}

public enum AnalyticsText {
    /// RFC 4180: a field with a comma, quote or line break is quoted, quotes doubled.
    public static func csv(_ rows: [[String]]) -> String {
        rows.map { row in
            row.map { field in
                field.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" })
                    ? "\"" + field.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : field
            }.joined(separator: ",")
        }.joined(separator: "\r\n") + "\r\n"
    }

    /// Columns padded to their widest value, numbers on the right.
    public static func table(_ rows: [[String]]) -> String {
        guard let header = rows.first else { return "" }
        let widths = header.indices.map { column in rows.map { column < $0.count ? $0[column].count : 0 }.max() ?? 0 }
        return rows.enumerated().map { index, row in
            row.enumerated().map { column, field in
                let padding = String(repeating: " ", count: widths[column] - field.count)
                let numeric = index > 0 && Double(field) != nil
                return numeric ? padding + field : field + padding
            }.joined(separator: "  ").trimmingTrailingSpaces()
        }.joined(separator: "\n") + "\n"
    }
}

extension String {
    fileprivate func trimmingTrailingSpaces() -> String {
        var text = self
        while text.last == " " { text.removeLast() }
        return text
    }
}
