import Foundation
import HTTPAPI
import Hummingbird
import HummingbirdTesting
import Postgres
import Prometheus
import SubledgerApp
import SubledgerAppTesting
import TestSupport
import Testing

/// The database's own limits (timeouts, connections, a read-only server, a
/// full pool, a server away) answer 503 with `Retry-After`, never 500, and
/// are counted on `/metrics`.
@Suite struct DatabaseLimitTests {
    /// A 503 the client may retry: `Retry-After` and the code that says so.
    static func expectRetryable(_ response: TestResponse, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(response.status == .serviceUnavailable, "\(response.status) \(response.text)", sourceLocation: sourceLocation)
        #expect(Int(response.headers[.retryAfter] ?? "") ?? 0 > 0, "no Retry-After", sourceLocation: sourceLocation)
        #expect(response.error.code == "database_unavailable", "\(response.text)", sourceLocation: sourceLocation)
    }

    @Test func aShortStatementTimeoutGivesNo500() async throws {
        let dependencies = try await makeDependencies { $0.sessionTimeouts.statementTimeout = .milliseconds(1) }
        try await withRouter(dependencies) { client in
            var statuses: [HTTPResponse.Status] = []
            for index in 0..<8 {
                let response = try await client.post("/v1/subscribers/timeout-\(index)/events", purchaseJSON("st-\(index)"))
                statuses.append(response.status)
                if response.status == .serviceUnavailable { Self.expectRetryable(response) }
            }
            for uri in ["/v1/subscribers/timeout-1", "/v1/subscribers/timeout-1/history", "/v1/reminders",
                        "/v1/subscriptions?entitlement=pro", "/v1/stats", "/v1/appstore/notifications"] {
                let response = try await client.get(uri, key: Keys.admin)
                statuses.append(response.status)
                if response.status == .serviceUnavailable { Self.expectRetryable(response) }
            }
            #expect(!statuses.contains { $0.code >= 500 && $0 != .serviceUnavailable }, "\(statuses)")
            #expect(statuses.contains(.serviceUnavailable), "the timeout never struck: \(statuses)")
        }
    }

    @Test func aLockTimeoutIsRetryableAndCounted() async throws {
        let registry = SharedMetrics.registry
        var dependencies = try await makeDependencies { $0.sessionTimeouts.lockTimeout = .milliseconds(100) }
        dependencies.metrics = registry
        let holder = try await Connection.connect(to: dependencies.pool.configuration.conninfo)
        defer { holder.close() }
        try await holder.execute(unsafeSQL: "BEGIN")
        try await holder.execute(unsafeSQL: "LOCK TABLE events IN ACCESS EXCLUSIVE MODE")
        try await withRouter(dependencies) { client in
            let before = Self.counted("lock_timeout", in: registry)
            Self.expectRetryable(try await client.post("/v1/subscribers/locked/events", purchaseJSON("lock-1")))
            let metrics = try await client.get("/metrics", key: nil)
            let line = metrics.text.split(separator: "\n").first {
                $0.hasPrefix("subledger_database_unavailable_total") && $0.contains(#"reason="lock_timeout""#)
            }
            #expect(line != nil, "\(metrics.text.prefix(2000))")
            #expect(Self.counted("lock_timeout", in: registry) > before)
        }
        try await holder.execute(unsafeSQL: "ROLLBACK")
    }

    @Test func aFullPoolIsRetryable() async throws {
        let dependencies = try await makeDependencies(poolSize: 1) { $0.leaseTimeout = .milliseconds(100) }
        try await whileHolding({ try await dependencies.pool.withConnection($0) }) {
            try await withRouter(dependencies) { client in
                Self.expectRetryable(try await client.get("/v1/subscribers/anyone"))
            }
        }
    }

    @Test func tooManyConnectionsIsRetryable() async throws {
        let conninfo = try await TestDatabase.make()
        let admin = try await Connection.connect(to: conninfo)
        defer { admin.close() }
        // A role allowed no connection: the server refuses it as it refuses
        // anyone past max_connections (SQLSTATE 53300).
        try await admin.execute(unsafeSQL: "DO $$ BEGIN CREATE ROLE no_room LOGIN CONNECTION LIMIT 0; EXCEPTION WHEN duplicate_object THEN NULL; END $$")
        let registry = SharedMetrics.registry
        var dependencies = try await makeDependencies { $0.conninfo = conninfo + " user=no_room" }
        dependencies.metrics = registry
        let before = Self.counted("insufficient_resources", in: registry)
        try await withRouter(dependencies) { client in
            Self.expectRetryable(try await client.post("/v1/subscribers/crowded/events", purchaseJSON("crowd-1")))
            Self.expectRetryable(try await client.get("/v1/subscribers/crowded"))
        }
        // Counted as the limit it is, not as a server away.
        #expect(Self.counted("insufficient_resources", in: registry) >= before + 2)
        do {
            _ = try await Connection.connect(to: conninfo + " user=no_room")
            Issue.record("the role connected")
        } catch let error as PostgresError {
            #expect(error.sqlState == .tooManyConnections, "\(error.debugDescription)")
            #expect(error.unavailability == .insufficientResources)
        }
    }

    @Test func aReadOnlyServerRefusesWritesRetryably() async throws {
        let dependencies = try await makeDependencies()
        let admin = try await Connection.connect(to: dependencies.pool.configuration.conninfo)
        defer { admin.close() }
        // What a standby, or a primary demoted in a failover, answers to a write.
        try await admin.execute(unsafeSQL: "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET default_transaction_read_only = on', current_database()); END $$")
        try await withRouter(dependencies) { client in
            Self.expectRetryable(try await client.post("/v1/subscribers/readonly/events", purchaseJSON("ro-1")))
        }
    }

    @Test func aDatabaseAwayIsRetryable() async throws {
        // Nothing listens on port 1.
        let dependencies = try await makeDependencies { $0.conninfo = "host=127.0.0.1 port=1 dbname=none connect_timeout=2" }
        try await withRouter(dependencies) { client in
            Self.expectRetryable(try await client.get("/v1/subscribers/anyone"))
        }
    }

    /// The value of `subledger_database_unavailable_total{reason}` in `registry`.
    static func counted(_ reason: String, in registry: PrometheusCollectorRegistry) -> Double {
        String(decoding: registry.emitToBuffer(), as: UTF8.self).split(separator: "\n")
            .first { $0.hasPrefix("subledger_database_unavailable_total") && $0.contains(#"reason="\#(reason)""#) }
            .flatMap { $0.split(separator: " ").last }.flatMap { Double($0) } ?? 0
    }
}

/// Runs `body` while `lease` holds a connection: `lease` runs the closure it
/// is given on a connection it took, and gives it back once `body` returns.
func whileHolding(_ lease: @escaping @Sendable (@Sendable (Connection) async throws -> Void) async throws -> Void,
                  _ body: () async throws -> Void) async throws {
    let (held, release) = AsyncStream.makeStream(of: Void.self)
    let (leased, leasedSink) = AsyncStream.makeStream(of: Void.self)
    let holding = Task {
        try await lease { _ in
            leasedSink.yield()
            for await _ in held { break }
        }
    }
    for await _ in leased { break }
    do {
        try await body()
    } catch {
        release.finish()
        try? await holding.value
        throw error
    }
    release.finish()
    try await holding.value
}
