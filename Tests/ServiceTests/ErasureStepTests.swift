import Foundation
import Hummingbird
import HummingbirdTesting
import Ledger
@testable import Postgres
@testable import SubledgerApp
import TestSupport
import Testing

/// The standard erasure steps on a database written through the router:
/// afterwards the tables they cover hold the erased subscriber under its
/// pseudonym only (a `pg_dump` of them holds no readable form of the id),
/// while the statistics and another subscriber read exactly as before.
@Suite struct ErasureStepTests {
    static let coveredTables = ["subscriptions", "non_renewing_periods", "entitlements", "product_activity",
                                "subscriber_snapshots", "subscriber_state_cache"]

    @Test func standardStepsKeepCountsAndLeaveNoReadableID() async throws {
        try await withApp { client, dependencies in
            let erased = "erasure-" + UUID().uuidString.lowercased()
            let other = "keep-" + UUID().uuidString.lowercased()
            // Long enough a history for a snapshot and a cached state.
            for index in 0..<70 {
                let response = try await client.post("/v1/subscribers/\(erased)/events",
                                                     purchaseJSON("c-\(erased)-\(index)", product: "com.example.coins.100",
                                                                  at: "2025-01-01T00:00:\(String(format: "%02d", index % 60))Z"))
                #expect(response.status == .created)
            }
            for (subscriber, prefix) in [(erased, "a"), (other, "b")] {
                #expect(try await client.post("/v1/subscribers/\(subscriber)/events",
                                              purchaseJSON("\(prefix)-pass", at: "2025-02-01T00:00:00Z", device: "device-\(subscriber)")).status == .created)
                #expect(try await client.post("/v1/subscribers/\(subscriber)/events",
                                              purchaseJSON("\(prefix)-pro", product: "com.example.pro.monthly", at: "2025-02-10T00:00:00Z",
                                                           expires: "2025-03-10T00:00:00Z")).status == .created)
            }
            #expect(try await client.post("/v1/subscribers/\(other)/events",
                                          purchaseJSON("b-level2", product: "com.example.level2", at: "2025-02-11T00:00:00Z")).status == .created)
            #expect(try await client.get("/v1/subscribers/\(erased)").status == .ok)
            try await dependencies.project(SubscriptionProjection(store: dependencies.store, catalog: dependencies.catalog.catalog))

            func count(_ table: String, _ subscriberID: String) async throws -> Int {
                try await dependencies.pool.query("SELECT count(*) FROM \(unsafeRaw: table) WHERE subscriber_id = \(subscriberID)")
                    .first!.decode(Int.self, at: 0)
            }
            // The snapshot is stored after its commit, off the request path.
            let deadline = ContinuousClock.now + .seconds(10)
            while try await count("subscriber_snapshots", erased) == 0, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            var before: [String: Int] = [:]
            for table in Self.coveredTables { before[table] = try await count(table, erased) }
            #expect(before.values.allSatisfy { $0 > 0 }, "every covered table holds the subscriber before: \(before)")

            let secret = Data((0..<32).map { _ in UInt8.random(in: 0...255) })
            let pseudonym = try SubscriberPseudonyms(secret: secret).pseudonym(for: erased)
            func observed() async throws -> [String] {
                var texts: [String] = []
                for at in ["2025-01-15T00:00:00Z", "2025-02-05T00:00:00Z", "2025-02-20T00:00:00Z", "2025-04-01T00:00:00Z"] {
                    texts.append(try await client.get("/v1/stats?at=\(at)", key: Keys.support).text)
                    texts.append(try await client.get("/v1/stats/active?from=2025-01-01T00:00:00Z&to=2025-04-01T00:00:00Z&interval=week",
                                                      key: Keys.support).text)
                }
                texts.append(try await client.get("/v1/subscribers/\(other)?at=2025-02-20T00:00:00Z", key: Keys.support).text)
                // The listing orders by subscriber id: compared as a set of rows.
                let listing = try await client.get("/v1/subscriptions?limit=100", key: Keys.support).json
                let rows = listing["subscriptions"]?.array.map { row in
                    row.keys.sorted().map { "\($0)=\(row[$0] ?? .null)" }.joined(separator: ",")
                        .replacingOccurrences(of: erased, with: "<erased>").replacingOccurrences(of: pseudonym, with: "<erased>")
                }
                texts.append((rows ?? []).sorted().joined(separator: "\n"))
                return texts + (try await dependencies.readModelRows()).filter { $0.contains(other) }
            }
            let expected = try await observed()

            try await dependencies.pool.withTransaction { connection in
                try await ErasureSteps.standard.run(subscriberID: erased, pseudonym: pseudonym, on: connection)
            }

            for table in Self.coveredTables {
                #expect(try await count(table, erased) == 0, "\(table) still names the subscriber")
            }
            for table in Self.coveredTables.prefix(4) {
                #expect(try await count(table, pseudonym) == before[table], "\(table) keeps the rows under the pseudonym")
            }
            let after = try await observed()
            #expect(after.count == expected.count)
            for (now, then) in zip(after, expected) {
                // Listings show the pseudonym where the id was; nothing else moves.
                #expect(now.replacingOccurrences(of: pseudonym, with: "<erased>") == then.replacingOccurrences(of: erased, with: "<erased>"))
            }

            let dump = try ChildProcess.run(["/usr/lib/postgresql/15/bin/pg_dump", "--data-only"]
                + Self.coveredTables.flatMap { ["-t", $0] } + ["-d", dependencies.pool.configuration.conninfo])
            #expect(dump.status == 0, "pg_dump: \(dump.output.prefix(500))")
            #expect(dump.output.contains(pseudonym), "the dump covers the rewritten rows")
            #expect(dump.output.contains(other))
            for value in [erased, "device-\(erased)"] {
                #expect(PersonalDataScan(value).matches(in: dump.output).isEmpty, "the covered tables still hold \(value)")
            }
        }
    }
}
