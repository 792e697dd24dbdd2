import Foundation
import JSON
import Ledger
@testable import SubledgerApp
import SubledgerAppTesting
import TestSupport
import Testing

@Suite("Read-model stats")
struct ReadModelStatsTests {
    /// Random histories of a dozen subscribers, projected: the counts of
    /// `GET /v1/stats` and the series of `GET /v1/stats/active` (any
    /// entitlement and each one, by day and by week, on a grid of midnights
    /// and on one that starts exactly at an entitlement's start) are what
    /// folding every subscriber's ledger at those instants counts.
    @Test(arguments: [UInt64(11), 12, 13])
    func statsAndSeriesCountWhatTheFoldCounts(seed: UInt64) async throws {
        let dependencies = try await makeDependencies()
        defer { Task { await dependencies.pool.close() } }
        let writer = LedgerWriter(dependencies)
        let catalog = dependencies.catalog.catalog
        let projection = SubscriptionProjection(store: dependencies.store, catalog: catalog)
        var history = RandomHistory(seed: seed, subscribers: 12)
        try await writer.writeRandomBatches(40, of: 1...6, from: &history)
        try await dependencies.project(projection, batch: 50)
        var ledgers: [SubscriberLedger] = []
        for subscriber in history.subscribers { ledgers.append(try await dependencies.ledger(of: subscriber)) }
        let starts = ledgers.flatMap { $0.readModel(catalog: catalog).entitlements.map(\.start) }.sorted()
        #expect(starts.count > 10, "seed \(seed): too few entitlements to count")
        let queries = ReadModelQueries(pool: dependencies.pool)

        for environment in Environment.allCases {
            for (from, interval) in [(date("2024-12-28T00:00:00Z"), ReadModelQueries.Interval.day),
                                     (date("2024-12-28T00:00:00Z"), .week), (starts[starts.count / 3], .day)] {
                let to = from + 330 * 86_400
                let points = stride(from: from, through: to, by: interval.seconds).map { $0 }
                let active = points.map { at in ledgers.map { $0.state(at: at, catalog: catalog, environment: environment).activeEntitlementIDs } }
                for entitlement in [nil, "pro", "level2"] as [String?] {
                    let series = try await queries.activeSeries(from: from, to: to, interval: interval, entitlement: entitlement,
                                                                environment: environment)
                    let expected = active.map { perSubscriber in
                        perSubscriber.filter { ids in entitlement.map { ids.contains($0) } ?? !ids.isEmpty }.count
                    }
                    #expect(series.map(\.active) == expected,
                            "seed \(seed) \(environment) \(entitlement ?? "any") from \(RFC3339.format(from)) by \(interval)")
                }
            }
            for at in starts.prefix(8) + [starts[starts.count / 2] - 0.001, date("2025-04-01T00:00:00Z"), Date()] {
                let stats = try await queries.stats(at: at, environment: environment)
                let states = ledgers.map { $0.state(at: at, catalog: catalog, environment: environment) }
                var expected: [String: Int] = [:]
                for state in states { for id in Set(state.activeEntitlementIDs) { expected[id, default: 0] += 1 } }
                let counted = Dictionary(uniqueKeysWithValues: stats.entitlements.map { ($0.id, $0.active) })
                #expect(counted == expected, "seed \(seed) \(environment) at \(RFC3339.format(at))")
                let withProducts = states.filter { state in
                    state.subscriptions.contains { $0.status == .active || $0.status == .grace }
                        || state.purchases.contains { $0.type != .consumable && $0.revokedAt == nil }
                }
                #expect(stats.activeSubscribers == withProducts.count, "seed \(seed) \(environment) at \(RFC3339.format(at))")
            }
        }
    }
}
