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

/// `DATABASE_READ_URL` against a real primary and a streaming hot standby.
@Suite("Reads from a standby", .serialized)
struct StandbyReadTests {
    static let consistency = HTTPFields.Element.Name("Subledger-Consistency")!

    /// The dependencies of a service writing to `clusters`' primary and reading from its standby.
    static func dependencies(_ clusters: ReplicatedClusters) -> AppDependencies {
        let logger = Logger(label: "standby-tests")
        let pool = ConnectionPool(configuration: PoolConfiguration(conninfo: clusters.primaryConninfo, maximumConnections: 8),
                                  logger: logger)
        var configuration = SubledgerConfiguration()
        configuration.apiKeys = APIKeys([(.ingest, Keys.ingest), (.support, Keys.support), (.admin, Keys.admin)])
        let data = Data(exampleCatalogJSON.utf8)
        let catalog = CatalogSource(catalog: try! Catalog.decode(from: data), modified: catalogModified, raw: data)
        var dependencies = AppDependencies(configuration: configuration, pool: pool, catalog: catalog, logger: logger)
        dependencies.standbyPool = ConnectionPool(
            configuration: PoolConfiguration(conninfo: clusters.standbyConninfo, maximumConnections: 8), primary: pool, logger: logger)
        return dependencies
    }

    static func withService(_ body: @escaping @Sendable (ReplicatedClusters, any TestClientProtocol, AppDependencies) async throws -> Void)
        async throws {
        let clusters = try await ReplicatedClusters.start()
        defer { clusters.stop() }
        let dependencies = dependencies(clusters)
        do {
            try await buildApplication(dependencies).test(.router) { client in try await body(clusters, client, dependencies) }
        } catch {
            await dependencies.pool.close()
            await dependencies.standbyPool?.close()
            throw error
        }
        await dependencies.pool.close()
        await dependencies.standbyPool?.close()
    }

    static func onStandby(_ clusters: ReplicatedClusters, _ sql: PostgresQuery) async throws {
        let connection = try await Connection.connect(to: clusters.standbyConninfo)
        defer { connection.close() }
        try await connection.query(sql)
    }

    @Test func aReadWithTheTokenOfAWriteSeesItWhereverItIsServed() async throws {
        try await Self.withService { clusters, client, dependencies in
            // Replay stopped: the standby lacks every write from now on.
            try await Self.onStandby(clusters, "SELECT pg_wal_replay_pause()")
            let written = try await client.post("/v1/subscribers/paused/events", purchaseJSON("paused-1", product: "com.example.level2"))
            #expect(written.status == .created)
            let token = try #require(written.headers[Self.consistency])
            #expect(WALPosition(token) != nil)
            // Without the token the standby answers, and it has not seen the write.
            let stale = try await client.get("/v1/subscribers/paused")
            #expect(stale.status == .notFound)
            // With it, the read waits ~200 ms for the standby, then the primary answers.
            let started = ContinuousClock.now
            let fresh = try await client.get("/v1/subscribers/paused", headers: [Self.consistency: token])
            #expect(fresh.status == .ok)
            #expect(fresh.json["entitlements"]?.array.first?["id"]?.string == "level2")
            #expect(ContinuousClock.now - started >= .milliseconds(190))
            let history = try await client.get("/v1/subscribers/paused/history", headers: [Self.consistency: token])
            #expect(history.status == .ok)
            #expect(await dependencies.standbyPool!.readsOnPrimary >= 2)
            // The token of a write whose position was unknown is served by the primary.
            let before = await dependencies.standbyPool!.readsOnPrimary
            let unknown = try await client.get("/v1/subscribers/paused",
                                               headers: [Self.consistency: WALPosition.primaryOnly.description])
            #expect(unknown.status == .ok)
            #expect(await dependencies.standbyPool!.readsOnPrimary == before + 1)

            try await Self.onStandby(clusters, "SELECT pg_wal_replay_resume()")
            // Many writes, each read back at once with its token, through the standby or the primary.
            for index in 0..<40 {
                let subscriber = "reader-\(index)"
                let write = try await client.post("/v1/subscribers/\(subscriber)/events",
                                                  purchaseJSON("tx-\(index)", product: "com.example.level2"))
                #expect(write.status == .created)
                let read = try await client.get("/v1/subscribers/\(subscriber)",
                                                headers: [Self.consistency: write.headers[Self.consistency] ?? ""])
                #expect(read.status == .ok, "read \(index)")
                #expect(read.json["entitlements"]?.array.count == 1, "read \(index)")
            }
        }
    }

    @Test func aStandbyServesLongHistoriesWithoutWriting() async throws {
        try await Self.withService { clusters, client, dependencies in
            var token = ""
            for index in 0..<24 {
                let write = try await client.post("/v1/subscribers/long/events",
                                                  purchaseJSON("coins-\(index)", product: "com.example.coins.100"))
                #expect(write.status == .created)
                token = write.headers[Self.consistency] ?? ""
            }
            // Long enough for a read to store a cached state or a snapshot, which a standby refuses.
            let state = try await client.get("/v1/subscribers/long", headers: [Self.consistency: token])
            #expect(state.status == .ok)
            let explain = try await client.get("/v1/subscribers/long/explain", headers: [Self.consistency: token])
            #expect(explain.status == .ok)
            #expect(await dependencies.standbyPool!.readsOnPrimary == 0)
            let listing = try await client.get("/v1/subscriptions", key: Keys.support, headers: [Self.consistency: token])
            #expect(listing.status == .ok)
        }
    }

    @Test func aMalformedTokenIsABadRequestNamingTheHeader() async throws {
        try await Self.withService { _, client, _ in
            for bad in ["", "16B3748", "0/XYZ", "1/2/3", "123456789/0", "0/1 OR 1=1"] {
                let response = try await client.get("/v1/subscribers/alice", headers: [Self.consistency: bad])
                #expect(response.status == .badRequest, "\(bad)")
                #expect(response.error.code == ErrorCode.invalidField.rawValue)
                #expect(response.error.field == "Subledger-Consistency")
            }
        }
    }

    @Test func healthAndMetricsShowTheStandbysLag() async throws {
        try await Self.withService { _, client, _ in
            let health = try await client.get("/health", key: nil)
            #expect(health.status == .ok)
            let standbys = health.json["replication"]?["standbys"]?.array ?? []
            #expect(standbys.count == 1)
            #expect(standbys.first?["state"]?.string == "streaming")
            #expect(health.json["replication"]?["readStandbyLagBytes"]?.int != nil)
            let metrics = try await client.get("/metrics", key: nil)
            #expect(metrics.text.contains("subledger_replica_lag_bytes{standby="))
            #expect(metrics.text.contains("subledger_read_standby_lag_bytes"))
        }
    }

    /// The primary goes away and comes back (a restart, as a failover looks
    /// to the pool): a write made meanwhile is retried, answered once the
    /// server accepts connections again, and stored once.
    @Test func aWriteWaitsOutABriefOutageOfThePrimary() async throws {
        try await Self.withService { clusters, client, _ in
            let first = try await client.post("/v1/subscribers/outage/events", purchaseJSON("before", product: "com.example.level2"))
            #expect(first.status == .created)
            try clusters.primary.stop()
            let restarted = Task {
                try await Task.sleep(for: .seconds(1.5))
                try await clusters.primary.start()
                return ContinuousClock.now
            }
            let written = try await client.post("/v1/subscribers/outage/events", purchaseJSON("during", product: "com.example.coins.100"))
            let answered = ContinuousClock.now
            let back = try await restarted.value
            #expect(written.status == .created)
            // Found within the pool's reconnect pause (250 ms) and the writer's retry pause (100 ms).
            #expect(answered - back < .seconds(2), "\(answered - back)")
            let history = try await client.get("/v1/subscribers/outage/history",
                                               headers: [Self.consistency: written.headers[Self.consistency] ?? ""])
            #expect(history.json["events"]?.array.count == 2, "\(history.text)")
        }
    }
}
