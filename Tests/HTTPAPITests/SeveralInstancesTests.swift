import Foundation
import Hummingbird
import HummingbirdTesting
import JSON
import Ledger
import Logging
import Postgres
import HTTPAPI
import SubledgerApp
import SubledgerAppTesting
import Testing

/// Two service instances on one database: each with its own pool and its own
/// in-process caches (long ledgers, computed states).
@Suite("Several instances on one database")
struct SeveralInstancesTests {
    @Test func eachInstanceSeesTheOthersWritesThroughItsCaches() async throws {
        let first = try await makeDependencies()
        let second = AppDependencies(
            configuration: first.configuration,
            pool: ConnectionPool(configuration: first.pool.configuration, logger: first.logger),
            catalog: first.catalog, logger: first.logger)
        let appA = buildApplication(first), appB = buildApplication(second)
        try await appA.test(.router) { a in
            try await appB.test(.router) { b in
                // A long history, read through A: cached there (ledger and state).
                for index in 0..<30 {
                    let written = try await a.post("/v1/subscribers/shared/events",
                                                   purchaseJSON("coins-\(index)", product: "com.example.coins.100"))
                    #expect(written.status == .created)
                }
                for _ in 0..<2 { #expect(try await a.get("/v1/subscribers/shared").json["entitlements"]?.array.isEmpty == true) }
                // B writes; A's next read and write see it.
                for round in 0..<5 {
                    let other = try await b.post("/v1/subscribers/shared/events",
                                                 purchaseJSON("level-\(round)", product: "com.example.level2", at: "2025-02-0\(round + 1)T00:00:00Z"))
                    #expect(other.status == .created)
                    let seen = try await a.get("/v1/subscribers/shared")
                    #expect(seen.json["entitlements"]?.array.first?["id"]?.string == "level2", "round \(round)")
                    let mine = try await a.post("/v1/subscribers/shared/events",
                                                purchaseJSON("more-\(round)", product: "com.example.coins.100"))
                    #expect(mine.status == .created)
                    // The same fact through the other instance is a duplicate, not a second event.
                    let again = try await b.post("/v1/subscribers/shared/events",
                                                 purchaseJSON("more-\(round)", product: "com.example.coins.100"))
                    #expect(again.json["duplicate"]?.bool == true)
                }
                let history = try await b.get("/v1/subscribers/shared/history")
                #expect(history.json["events"]?.array.count == 40)
            }
        }
        await first.pool.close()
        await second.pool.close()
    }
}
