import AsyncHTTPClient
import Foundation
import HTTPAPI
import Ledger
import Logging
import NIOCore
import Postgres
import SubledgerApp

/// The request path as clients see it: the service started in this process
/// on a loopback port, driven over HTTP by concurrent clients, beside
/// PostgreSQL's own ceilings measured in the same run.
extension Bench {
    struct HTTPFigures {
        var rate: Double
        var p50: Duration
        var p99: Duration
    }

    /// Ingest (`POST …/events`, a new purchase for a new subscriber each) and
    /// reads (`GET /v1/subscribers/{id}` of those 1-event subscribers).
    func measureHTTP(conninfo: String, duration: Duration, logger: Logger) async throws -> (ingest: HTTPFigures, read: HTTPFigures) {
        var configuration = SubledgerConfiguration()
        configuration.host = "127.0.0.1"
        configuration.port = Int.random(in: 30_000...60_000)
        configuration.apiKeys = APIKeys([(.ingest, "bench-ingest-key")])
        let pool = ConnectionPool(configuration: PoolConfiguration(conninfo: conninfo, maximumConnections: writers,
                                                                   sessionTimeouts: configuration.sessionTimeouts), logger: logger)
        let catalogJSON = Data(#"{"version": 1, "products": [{"id": "com.example.pass.30d", "type": "non-renewing", "duration": "P30D", "group": "pass", "entitlements": ["pro"], "reminders": ["P7D", "P1D", "P0D"]}]}"#.utf8)
        let catalog = CatalogSource(catalog: try Catalog.decode(from: catalogJSON), modified: Date(), raw: catalogJSON)
        var quiet = logger
        quiet.logLevel = .error
        let dependencies = AppDependencies(configuration: configuration, pool: pool, catalog: catalog, logger: quiet)
        let app = buildApplication(dependencies)
        let server = Task { try await app.run() }
        defer { server.cancel() }
        let base = "http://127.0.0.1:\(configuration.port)"
        let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup,
                                configuration: .init(connectionPool: .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: writers)))
        for _ in 0..<200 {
            if (try? await client.execute(HTTPClientRequest(url: base + "/health"), timeout: .seconds(1)))?.status == .ok { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        let purchaseDate = RFC3339.format(Date() - 86_400)
        let counts = Counts()
        let ingest = try await latencies("HTTP POST …/events, \(writers) connections", duration: duration) { writer, count in
            var request = HTTPClientRequest(url: "\(base)/v1/subscribers/bench-\(writer)-\(count)/events")
            request.method = .POST
            request.headers.add(name: "Authorization", value: "Bearer bench-ingest-key")
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: #"{"type": "purchase", "transactionId": "bt-\#(writer)-\#(count)", "productId": "com.example.pass.30d", "purchaseDate": "\#(purchaseDate)"}"#))
            let response = try await client.execute(request, timeout: .seconds(30))
            _ = try await response.body.collect(upTo: 1 << 20)
            guard response.status == .created else { throw BenchFailure(description: "POST answered \(response.status)") }
            await counts.recorded(writer: writer, count: count + 1)
        }
        let written = await counts.perWriter
        let read = try await latencies("HTTP GET /v1/subscribers/{id}, \(writers) connections", duration: duration) { writer, count in
            let made = written[writer] ?? 0
            guard made > 0 else { throw BenchFailure(description: "no subscribers were written to read") }
            var request = HTTPClientRequest(url: "\(base)/v1/subscribers/bench-\(writer)-\(count % made)")
            request.headers.add(name: "Authorization", value: "Bearer bench-ingest-key")
            let response = try await client.execute(request, timeout: .seconds(30))
            _ = try await response.body.collect(upTo: 1 << 20)
            guard response.status == .ok else { throw BenchFailure(description: "GET answered \(response.status)") }
        }
        try await client.shutdown()
        return (ingest, read)
    }

    /// Runs `operation` from `writers` tasks for `duration`; the rate and the
    /// latency percentiles of single operations.
    func latencies(_ name: String, duration: Duration,
                   _ operation: @escaping @Sendable (_ writer: Int, _ count: Int) async throws -> Void) async throws -> HTTPFigures {
        let progress = TerminalProgress(label: name)
        let started = ContinuousClock.now
        let deadline = started + duration
        let samples = try await withThrowingTaskGroup(of: [Duration].self) { group in
            for writer in 0..<writers {
                group.addTask {
                    var samples = [Duration]()
                    var count = 0
                    while ContinuousClock.now < deadline {
                        let start = ContinuousClock.now
                        try await operation(writer, count)
                        samples.append(ContinuousClock.now - start)
                        count += 1
                        if writer == 0 { progress.update(String(format: "%3.0f%%", min(1, (ContinuousClock.now - started) / duration) * 100)) }
                    }
                    return samples
                }
            }
            return try await group.reduce(into: [Duration]()) { $0 += $1 }.sorted()
        }
        let elapsed = ContinuousClock.now - started
        let rate = Double(samples.count) / elapsed.inSeconds
        progress.finish(String(format: "%.0f requests/s", rate))
        func percentile(_ p: Double) -> Duration {
            samples.isEmpty ? .zero : samples[min(samples.count - 1, Int(Double(samples.count) * p))]
        }
        return HTTPFigures(rate: rate, p50: percentile(0.5), p99: percentile(0.99))
    }

    /// The process's peak resident memory so far, in MB (`VmHWM`).
    static func peakResidentMB() -> Double? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
              let kilobytes = Double(line.split(separator: " ").dropFirst().first ?? "")
        else { return nil }
        return kilobytes / 1024
    }
}

/// How many subscribers each writer created, for the reads that follow.
actor Counts {
    private(set) var perWriter: [Int: Int] = [:]
    func recorded(writer: Int, count: Int) { perWriter[writer] = max(perWriter[writer] ?? 0, count) }
}

struct BenchFailure: Error, CustomStringConvertible {
    var description: String
}

extension Duration {
    var milliseconds: Double { inSeconds * 1000 }
}
