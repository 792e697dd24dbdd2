import CommandSupport
import Foundation
import HTTPAPI
import JSON
import Ledger
import Logging
import Postgres
import SubledgerApp

/// The request path as clients see it: the service started in this process
/// on a loopback port, driven over HTTP by concurrent clients (plain
/// sockets, see `HTTPLoadConnection`), beside PostgreSQL's own ceilings
/// measured in the same run.
extension Bench {
    struct HTTPFigures {
        var rate: Double
        var p50: Duration
        var p99: Duration
    }

    /// How the service combined the ingest phase's writes, and where a
    /// group's time went.
    static func describe(_ statistics: WriteCombiner.Statistics) -> String {
        guard statistics.groups > 0 else { return "POST: no write groups" }
        func mean(_ sum: Duration, _ count: Int) -> String {
            String(format: "%.2f", sum.milliseconds / Double(max(count, 1)))
        }
        let committed = statistics.groupsCommitted
        return "POST: \(statistics.groups) write groups of \(String(format: "%.1f", Double(statistics.commands) / Double(statistics.groups))) "
            + "requests (largest \(statistics.largestGroup), \(statistics.writtenAlone) written alone); a request queued "
            + "\(mean(statistics.queued, statistics.commands)) ms for its group; a group read \(mean(statistics.phases.read, committed)) ms, "
            + "decided \(mean(statistics.phases.decide, committed)) ms, committed \(mean(statistics.phases.commit, committed)) ms"
    }

    /// What the request phases measured.
    struct HTTPPhases {
        var ingest: HTTPFigures
        var read: HTTPFigures
        var floor: HTTPFigures
        var selectFloor: HTTPFigures
        var insertFloor: HTTPFigures
        var writes: WriteCombiner.Statistics
    }

    /// Ingest (`POST …/events`, a new purchase for a new subscriber each),
    /// reads (`GET /v1/subscribers/{id}` of those 1-event subscribers), and
    /// the floors under them:
    /// - `GET /v1/products`, which the service answers from memory (no key,
    ///   no database, a body of a few bytes): what the HTTP stack, the
    ///   loopback sockets and the clients allow on this machine before any
    ///   ledger work;
    /// - the floor routes (`addFloorRoutes`): one request, one statement of
    ///   the ceiling's own (a point `SELECT`, a durable `INSERT`) through the
    ///   same stack, key check and pool: the most a route making one such
    ///   statement per request can reach here.
    func measureHTTP(conninfo: String, duration: Duration, logger: Logger) async throws -> HTTPPhases {
        try await warmUp(conninfo: conninfo, duration: duration, logger: logger)
        let service = try await startService(conninfo: conninfo, logger: logger)
        defer { service.server.cancel() }
        let (dependencies, port) = (service.dependencies, service.port)
        let headers = [("Authorization", "Bearer bench-ingest-key")]
        let postHeaders = headers + [("Content-Type", "application/json")]
        let (ingest, written) = try await measureIngest(port: port, duration: duration)
        let writes = await dependencies.writeCombiner.statistics
        // As after the warm-up: the POSTs grew the subscribers' tables.
        try await dependencies.pool.query("ANALYZE")
        let (read, _) = try await latencies("HTTP GET /v1/subscribers/{id}, \(writers) connections", port: port, duration: duration) {
            connection, writer, count in
            let made = written[writer]
            guard made > 0 else { throw BenchFailure(description: "no subscribers were written to read") }
            let response = try connection.exchange(HTTPLoadConnection.request(
                "GET", "/v1/subscribers/bench-\(writer)-\(count % made)", headers: headers))
            guard response.status == 200 else { throw BenchFailure(description: "GET answered \(response.status)") }
        }
        let (floor, _) = try await latencies("HTTP GET /v1/products, \(writers) connections", port: port, duration: duration) {
            connection, _, _ in
            let response = try connection.exchange(HTTPLoadConnection.request("GET", "/v1/products"))
            guard response.status == 200 else { throw BenchFailure(description: "GET /v1/products answered \(response.status)") }
        }
        let (selectFloor, _) = try await latencies("HTTP GET, one point SELECT each, \(writers) connections", port: port, duration: duration) {
            connection, writer, count in
            let response = try connection.exchange(HTTPLoadConnection.request(
                "GET", "/floor/select/\(Self.baselineRow(reader: writer, count: count))", headers: headers))
            guard response.status == 200 else { throw BenchFailure(description: "GET /floor/select answered \(response.status)") }
        }
        let (insertFloor, _) = try await latencies("HTTP POST, one INSERT each, \(writers) connections", port: port, duration: duration) {
            connection, _, _ in
            let response = try connection.exchange(HTTPLoadConnection.request("POST", "/floor/insert", headers: postHeaders, body: Self.payload))
            guard response.status == 201 else { throw BenchFailure(description: "POST /floor/insert answered \(response.status)") }
        }
        return HTTPPhases(ingest: ingest, read: read, floor: floor, selectFloor: selectFloor, insertFloor: insertFloor, writes: writes)
    }

    /// Writes new subscribers for `duration` through a service of its own,
    /// unmeasured, then analyzes the tables: the measured phases run against
    /// a service in steady state. The subscribers' tables start empty, and a
    /// pooled connection keeps the generic plans it made while they held a
    /// page until an `ANALYZE` makes it plan again (`auto_explain` showed a
    /// sequential scan of `subscriber_keys` for every subscriber read and
    /// written); a running service's autovacuum analyzes a grown table
    /// within a minute. The measured service starts afterwards, so its
    /// connections and its write statistics are its own.
    func warmUp(conninfo: String, duration: Duration, logger: Logger) async throws {
        let warm = try await startService(conninfo: conninfo, logger: logger)
        _ = try await measureIngest(port: warm.port, duration: duration, run: "warm", label: "HTTP POST …/events, warming up (not measured)")
        try await warm.dependencies.pool.query("ANALYZE")
        // Stopped before the measured one starts: its workers and its pool
        // (which its shutdown closes) are gone by then.
        warm.server.cancel()
        _ = await warm.server.result
        await warm.dependencies.pool.close()
    }

    /// The service started in this process on a loopback port, with the
    /// floor routes beside the API's.
    struct BenchService {
        var dependencies: AppDependencies
        var port: Int
        var server: Task<Void, Error>
    }

    func startService(conninfo: String, logger: Logger,
                      configure: (inout SubledgerConfiguration) -> Void = { _ in },
                      prepare: (inout AppDependencies) -> Void = { _ in }) async throws -> BenchService {
        var configuration = SubledgerConfiguration()
        configuration.host = "127.0.0.1"
        configuration.port = Int.random(in: 30_000...60_000)
        configuration.apiKeys = APIKeys([(.ingest, "bench-ingest-key")])
        // `--audit off` measures the same build without the audit trail.
        configuration.auditEnabled = (try? options.resolve().auditEnabled) ?? true
        configure(&configuration)
        let pool = ConnectionPool(configuration: PoolConfiguration(conninfo: conninfo, maximumConnections: writers,
                                                                   sessionTimeouts: configuration.sessionTimeouts), logger: logger)
        let catalogJSON = Data(#"{"version": 1, "products": [{"id": "com.example.pass.30d", "type": "non-renewing", "duration": "P30D", "group": "pass", "entitlements": ["pro"], "reminders": ["P7D", "P1D", "P0D"]}, {"id": "pro_monthly", "store": "google_play", "type": "auto-renewable", "group": "pro", "entitlements": ["pro"]}]}"#.utf8)
        let catalog = CatalogSource(catalog: try Catalog.decode(from: catalogJSON), modified: Date(), raw: catalogJSON)
        var quiet = logger
        quiet.logLevel = .error
        var dependencies = AppDependencies(configuration: configuration, pool: pool, catalog: catalog, logger: quiet)
        // With DATABASE_READ_URL (standbys of DATABASE_URL's server), the
        // reads go to the scratch database there, as `serve` sends them.
        if let readURL = try? options.resolve().databaseReadURL {
            dependencies.standbyPool = ConnectionPool(
                configuration: PoolConfiguration(conninfo: Conninfo.replacingDatabase(in: readURL, with: Self.scratchDatabase),
                                                 maximumConnections: writers, sessionTimeouts: configuration.sessionTimeouts),
                primary: pool, logger: logger)
        }
        prepare(&dependencies)
        // The bench mounts its floor routes beside the API's; `serve` never does.
        let router = buildRouter(AppComponents(dependencies))
        addFloorRoutes(to: router, pool: pool, keys: configuration.apiKeys)
        let app = buildApplication(router: router, dependencies: dependencies)
        let server = Task { try await app.run() }
        do {
            try await Self.waitUntilServing(port: configuration.port)
        } catch {
            server.cancel()
            throw error
        }
        return BenchService(dependencies: dependencies, port: configuration.port, server: server)
    }

    /// `POST …/events`, a new purchase for a new subscriber each, on `writers`
    /// connections; `run` tells the subscribers of one call from another's.
    func measureIngest(port: Int, duration: Duration, run: String = "bench",
                       label: String = "HTTP POST …/events") async throws -> (figures: HTTPFigures, counts: [Int]) {
        let purchaseDate = RFC3339.format(Date() - 86_400)
        let postHeaders = [("Authorization", "Bearer bench-ingest-key"), ("Content-Type", "application/json")]
        return try await latencies("\(label), \(writers) connections", port: port, duration: duration) {
            connection, writer, count in
            let body = #"{"type": "purchase", "transactionId": "\#(run)-t-\#(writer)-\#(count)", "productId": "com.example.pass.30d", "purchaseDate": "\#(purchaseDate)"}"#
            let response = try connection.exchange(HTTPLoadConnection.request(
                "POST", "/v1/subscribers/\(run)-\(writer)-\(count)/events", headers: postHeaders, body: body))
            guard response.status == 201 else { throw BenchFailure(description: "POST answered \(response.status)") }
        }
    }

    /// Waits (up to 10 s) until the service answers `GET /health` with 200.
    /// Waits until `GET path` on `port` answers 200 (the service's health, the fake Google's keys).
    static func waitUntilServing(port: Int, path: String = "/health") async throws {
        for _ in 0..<200 {
            let status = try? await onThread(named: "bench-health") {
                try HTTPLoadConnection(port: port, timeout: .seconds(1)).exchange(HTTPLoadConnection.request("GET", path)).status
            }
            if status == 200 { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw BenchFailure(description: "nothing answered \(path) on port \(port)")
    }

}

struct BenchFailure: Error, CustomStringConvertible {
    var description: String
}

extension Duration {
    var milliseconds: Double { timeInterval * 1000 }
}
