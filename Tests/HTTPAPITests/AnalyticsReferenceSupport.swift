import EventStore
import Foundation
import HummingbirdTesting
import JSON
import Ledger
@testable import SubledgerApp
import SubledgerAppTesting
import Testing

/// Running a generated dataset through the app and comparing its answers
/// with the reference model.
enum AnalyticsReference {
    /// Fresh dependencies with the dataset's catalog.
    static func dependencies() async throws -> AppDependencies {
        var dependencies = try await makeDependencies()
        let data = Data(AnalyticsDataset.catalogJSON.utf8)
        dependencies.catalog = CatalogSource(catalog: try Catalog.decode(from: data), modified: catalogModified, raw: data)
        return dependencies
    }

    /// Sends `facts` in their order: App Store facts and grants through the
    /// router, Play states through the write path the Play integration uses.
    static func send(_ facts: [AnalyticsDataset.Fact], client: some TestClientProtocol, dependencies: AppDependencies) async throws {
        let writer = LedgerWriter(dependencies)
        for fact in facts {
            switch fact {
            case .post(let subscriber, let body):
                let response = try await client.post("/v1/subscribers/\(subscriber)/events", body)
                #expect(response.status == .created, "\(subscriber) \(body): \(response.status) \(response.text)")
            case .play(let subscriber, let request):
                _ = try await writer.write(WriteBatch([.fact(request, subscriberID: subscriber, source: FactSource.googlePlay)]))
            case .grant(let subscriber):
                let response = try await client.grant(subscriber, #"{"entitlement": "pro", "duration": "P30D", "reason": "analytics"}"#)
                #expect(response.status == .created, "grant to \(subscriber): \(response.text)")
            }
        }
    }

    static func project(_ dependencies: AppDependencies) async throws {
        try await dependencies.project(AnalyticsProjection(catalog: dependencies.catalog.catalog), batch: 500)
    }

    /// `GET /v1/analytics` (every metric) as its series.
    static func series(_ client: some TestClientProtocol, _ interval: AnalyticsReferenceModel.Interval, from: Date, to: Date,
                       query extra: String = "") async throws -> [JSONValue] {
        let uri = "/v1/analytics?interval=\(interval.rawValue)&from=\(RFC3339.format(from))&to=\(RFC3339.format(to))\(extra)"
        let response = try await client.get(uri, key: Keys.support)
        #expect(response.status == .ok, "\(uri): \(response.text)")
        #expect(response.json["interval"]?.string == interval.rawValue)
        return response.json["series"]?.array ?? []
    }

    /// `GET /v1/analytics/cohorts` as its cohorts.
    static func cohorts(_ client: some TestClientProtocol, _ interval: AnalyticsReferenceModel.Interval, from: Date, to: Date,
                        query extra: String = "") async throws -> [JSONValue] {
        let uri = "/v1/analytics/cohorts?interval=\(interval.rawValue)&from=\(RFC3339.format(from))&to=\(RFC3339.format(to))\(extra)"
        let response = try await client.get(uri, key: Keys.support)
        #expect(response.status == .ok, "\(uri): \(response.text)")
        return response.json["cohorts"]?.array ?? []
    }

    /// Records an issue for each value that differs (at most `limit`, then
    /// how many more); returns how many differed.
    @discardableResult
    static func compare(_ answered: [JSONValue], _ expected: [JSONValue], _ label: String, limit: Int = 12,
                        sourceLocation: SourceLocation = #_sourceLocation) -> Int {
        #expect(answered.count == expected.count, "\(label): \(answered.count) items answered, \(expected.count) expected",
                sourceLocation: sourceLocation)
        var differences: [String] = []
        for (got, want) in zip(answered, expected) {
            guard case .object(let wanted) = want else { continue }
            let start = want["start"]?.string ?? "?"
            for (key, value) in wanted.sorted(by: { $0.key < $1.key }) {
                if case .object(let metrics) = value, key == "values" {
                    for (metric, expectedValue) in metrics.sorted(by: { $0.key < $1.key }) where got["values"]?[metric] != expectedValue {
                        differences.append("\(label) \(start) \(metric): answered \(text(got["values"]?[metric])), model \(text(expectedValue))")
                    }
                } else if got[key] != value {
                    differences.append("\(label) \(start) \(key): answered \(text(got[key])), model \(text(value))")
                }
            }
        }
        for difference in differences.prefix(limit) { Issue.record(Comment(rawValue: difference), sourceLocation: sourceLocation) }
        if differences.count > limit {
            Issue.record(Comment(rawValue: "\(label): \(differences.count - limit) more differences"), sourceLocation: sourceLocation)
        }
        return differences.count
    }

    static func text(_ value: JSONValue?) -> String {
        guard let value else { return "nothing" }
        return String(decoding: (try? JSONEncoder().encode(value)) ?? Data(), as: UTF8.self)
    }

    /// Every row of the projection's sums, as comparable text.
    static func rows(_ dependencies: AppDependencies) async throws -> [String] {
        var rows: [String] = []
        for (table, key) in [("analytics_days", "day::text"), ("analytics_years", "year::text"), ("analytics_retention", "cohort::text || '/' || k")] {
            let currency = table == "analytics_retention" ? "''" : "currency"
            rows += try await dependencies.pool.query("""
                SELECT concat_ws('|', \(unsafeRaw: "'\(table)'"), environment, metric, \(unsafeRaw: key), store, product_id,
                       \(unsafeRaw: currency), value) FROM \(unsafeRaw: table) WHERE value <> 0 ORDER BY 1
                """).map { try $0.decode(String.self, at: 0) }
        }
        return rows
    }
}
