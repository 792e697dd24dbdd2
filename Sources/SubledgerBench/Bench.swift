import ArgumentParser
import CommandSupport
import EventStore
import Foundation
import Logging
import Postgres
import HTTPAPI
import SubledgerApp

/// `subledger bench`: append throughput beside PostgreSQL's own insert rate,
/// and the subscriptions projection's rebuild beside PostgreSQL's own
/// set-based upsert of the same events, each measured in the same run on the
/// same server, so the ratios mean something on a noisy machine; and reads
/// and writes of a subscriber with one event beside one with 10,000.
public struct Bench: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        abstract: "Measure appends, the projection rebuild and reads against PostgreSQL's own rates.",
        discussion: """
            Runs in a scratch database created next to the configured one (and dropped afterwards): \
            the embedded cluster by default, or the server of DATABASE_URL (which then needs CREATEDB).
            """)

    @OptionGroup var options: ConfigurationOptions

    @Option(help: "Seconds each measurement runs.")
    var seconds: Double = 3

    @Option(help: "Concurrent writers in the concurrent measurements.")
    var writers: Int = 16

    @Option(name: .customLong("batch-size"), help: "Events per batch in the import measurement.")
    var batchSize: Int = 500

    @Option(name: .customLong("rebuild-events"), help: "Events written for the rebuild measurement.")
    var rebuildEvents: Int = 200_000

    @Option(name: .customLong("rebuild-rounds"), help: "Rebuilds, each followed by the ceiling; medians are reported.")
    var rebuildRounds: Int = 3

    @Option(help: "Samples per latency measurement (p50, p99).")
    var samples: Int = 200

    @Option(help: "What to measure: appends, projections, import, abuse, changes, googleplay, analytics, storage (comma-separated).")
    var measure: String = "appends,projections"

    @Option(name: .customLong("import-facts"), help: "Facts in the file of the import measurement.")
    var importFacts: Int = 200_000

    @Option(name: .customLong("import-writers"), help: "Writers of the import measurement (default: one per core).")
    var importWriters: Int = ProcessInfo.processInfo.activeProcessorCount

    @Option(name: .customLong("import-batch-size"), help: "Lines per batch in the import measurement.")
    var importBatchSize: Int = 1000

    @Option(name: .customLong("slow-clients"), help: "Connections held open by slow clients in the abuse measurement.")
    var slowClients: Int = 1000

    public init() {}

    public func validate() throws {
        let known: Set<Substring> = ["appends", "projections", "import", "abuse", "changes", "googleplay", "analytics", "storage"]
        guard measure.split(separator: ",").allSatisfy(known.contains) else {
            throw ValidationError("--measure takes appends, projections, import, abuse, changes, googleplay, analytics, storage, comma-separated")
        }
        guard importFacts > 0, importWriters > 0, importBatchSize > 0 else {
            throw ValidationError("--import-facts, --import-writers and --import-batch-size must be positive")
        }
        guard rebuildEvents > 0, samples > 1, rebuildRounds > 0 else {
            throw ValidationError("--rebuild-events, --rebuild-rounds and --samples must be positive")
        }
    }

    public func run() async throws {
        let configuration = try options.resolve()
        let logger = LoggingSetup.logger(configuration)
        let database = try await PreparedDatabase.prepare(configuration, migrate: false, logger: logger)
        defer { database.stopIfStarted() }
        let scratch = Self.scratchDatabase
        let admin = try await Connection.connect(to: database.conninfo)
        defer { admin.close() }
        try await admin.execute(unsafeSQL: "CREATE DATABASE \(scratch)")
        let conninfo = Conninfo.replacingDatabase(in: database.conninfo, with: scratch)
        do {
            try await measure(conninfo: conninfo, sqlDirectory: configuration.sqlDirectory, logger: logger)
        } catch {
            try? await admin.execute(unsafeSQL: "DROP DATABASE IF EXISTS \(scratch) WITH (FORCE)")
            throw error
        }
        try await admin.execute(unsafeSQL: "DROP DATABASE IF EXISTS \(scratch) WITH (FORCE)")
    }

    /// The database each run creates, measures in and drops.
    static var scratchDatabase: String { "subledger_bench_\(getpid())" }

    func measure(conninfo: String, sqlDirectory: String?, logger: Logger) async throws {
        try await Migrator(migrations: try Migrator.load(from: try SQLDirectory.locate(configured: sqlDirectory))).migrate(conninfo: conninfo)
        let pool = ConnectionPool(configuration: PoolConfiguration(conninfo: conninfo, maximumConnections: max(writers, 2)))
        defer { Task { await pool.close() } }
        #if DEBUG
        print("subledger bench: a debug build; figures from a release build (swift build -c release) are the ones to compare")
        #endif
        // First, on the empty database: it divides every table by the events.
        if measure.contains("storage") { try await measureStorage(pool: pool) }
        if measure.contains("appends") { try await measureAppends(pool: pool, conninfo: conninfo, logger: logger) }
        if measure.contains("projections") { try await measureProjections(pool: pool) }
        if measure.contains("import") { try await measureImport(pool: pool) }
        if measure.contains("abuse") { try await measureAbuse(conninfo: conninfo, logger: logger) }
        if measure.contains("changes") { try await measureChanges(pool: pool, conninfo: conninfo, logger: logger) }
        if measure.contains("googleplay") { try await measureGooglePlay(conninfo: conninfo, logger: logger) }
        if measure.contains("analytics") { try await measureAnalytics(pool: pool, conninfo: conninfo, logger: logger) }
    }

    func measureProjections(pool: ConnectionPool) async throws {
        print("")
        print("subledger bench: the subscriptions projection, \(rebuildEvents) events, \(samples) samples per latency")
        let results = try await ProjectionBench(pool: pool, events: rebuildEvents, samples: samples, rounds: rebuildRounds).run()
        print("")
        print(padded("measurement", 52) + padded("events/s", 12, left: true) + padded("× ceiling", 12, left: true))
        print(padded("PostgreSQL set-based upsert, same events (ceiling)", 52) + padded(String(format: "%.0f", results.ceiling), 12, left: true)
              + padded("1.00", 12, left: true))
        print(padded("rebuild, stream by stream, \(results.rebuiltEvents) events", 52)
              + padded(String(format: "%.0f", results.rebuild), 12, left: true)
              + padded(String(format: "%.3f", results.ratio), 12, left: true))
        if results.rounds.count > 1 {
            print("medians of \(results.rounds.count) rounds; each round's ratio: "
                  + results.rounds.map { String(format: "%.3f", $0.rebuild / $0.ceiling) }.joined(separator: ", "))
        }
        print(String(format: "peak resident memory of this process: %.0f MB", results.peakResidentMB))
        print("one live projection batch: \(results.liveBatch.events) events, \(results.liveBatch.subscribers) subscribers, "
              + "\(results.liveBatch.roundTrips) round trips (Connection.roundTrips)")
        print("")
        print(padded("latency (ms)", 58) + padded("p50", 10, left: true) + padded("p99", 10, left: true))
        for latency in results.reads + results.writes {
            let (name, p50, p99) = (latency.name, latency.p50, latency.p99)
            print(padded(name, 58) + padded(String(format: "%.2f", p50), 10, left: true) + padded(String(format: "%.2f", p99), 10, left: true))
        }
    }

    func measureAppends(pool: ConnectionPool, conninfo: String, logger: Logger) async throws {
        let store = EventStore(pool: pool)
        try await pool.query("CREATE TABLE bench_baseline (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, data jsonb NOT NULL)")
        let payload = Self.payload
        let duration = Duration.milliseconds(Int(seconds * 1000))

        print("subledger bench: \(seconds) s per measurement, \(writers) concurrent writers, batches of \(batchSize), "
              + "audit \(((try? options.resolve().auditEnabled) ?? true) ? "on" : "off")")
        let baseline1 = try await Self.rate("PostgreSQL INSERT, 1 writer", duration: duration, writers: 1) { _, _ in
            try await pool.query("INSERT INTO bench_baseline (data) VALUES (\(PostgresJSON(text: payload))::jsonb)")
            return 1
        }
        let append1 = try await Self.rate("append, 1 event per transaction, 1 writer", duration: duration, writers: 1) { writer, count in
            let version = Int64(count)
            _ = try await store.append(to: "bench-1-\(writer)", expected: .exact(version),
                                       events: [NewEvent(type: "purchased", data: Data(payload.utf8), idempotencyKey: "b1-\(writer)-\(count)")])
            return 1
        }
        let baselineN = try await Self.rate("PostgreSQL INSERT, \(writers) writers", duration: duration, writers: writers) { _, _ in
            try await pool.query("INSERT INTO bench_baseline (data) VALUES (\(PostgresJSON(text: payload))::jsonb)")
            return 1
        }
        let appendN = try await Self.rate("append, 1 event per transaction, \(writers) writers", duration: duration, writers: writers) { writer, count in
            _ = try await store.append(to: "bench-n-\(writer)", expected: .exact(Int64(count)),
                                       events: [NewEvent(type: "purchased", data: Data(payload.utf8), idempotencyKey: "bn-\(writer)-\(count)")])
            return 1
        }
        let batchSize = self.batchSize
        let batch = try await Self.rate("batch import, \(batchSize) events over 100 streams per call", duration: duration, writers: 1) { _, count in
            let appends = (0..<100).map { stream in
                StreamAppend(streamID: "bench-import-\(stream)", events: (0..<(batchSize / 100)).map { index in
                    NewEvent(type: "purchased", data: Data(payload.utf8), idempotencyKey: "bi-\(count)-\(stream)-\(index)")
                })
            }
            _ = try await store.append(appends)
            return batchSize / 100 * 100
        }
        let selects = try await Self.rate("PostgreSQL point SELECT, \(writers) readers", duration: duration, writers: writers) { writer, count in
            try await pool.query("SELECT data FROM bench_baseline WHERE id = \(Self.baselineRow(reader: writer, count: count))")
            return 1
        }
        // The tables were filled in the last seconds, faster than autovacuum
        // looks (once a minute): measure the service as it runs in steady
        // state, with statistics, not on a planner that has none yet.
        try await pool.query("ANALYZE")
        let http = try await measureHTTP(conninfo: conninfo, duration: duration, logger: logger)

        print("")
        print(padded("measurement", 52) + padded("events/s", 12, left: true) + padded("× baseline", 12, left: true))
        func line(_ name: String, _ value: Double, _ baseline: Double) {
            print(padded(name, 52) + padded(String(format: "%.0f", value), 12, left: true)
                + padded(String(format: "%.2f", value / baseline), 12, left: true))
        }
        line("PostgreSQL INSERT, 1 writer (baseline)", baseline1, baseline1)
        line("append, 1 event/transaction, 1 writer", append1, baseline1)
        line("PostgreSQL INSERT, \(writers) writers (baseline)", baselineN, baselineN)
        line("append, 1 event/transaction, \(writers) writers", appendN, baselineN)
        line("batch import (vs 1-writer INSERT)", batch, baseline1)
        print("")
        print(padded("request path (\(writers) connections)", 52) + padded("per s", 12, left: true)
              + padded("× ceiling", 12, left: true) + padded("p50 ms", 10, left: true) + padded("p99 ms", 10, left: true))
        func request(_ name: String, _ figures: HTTPFigures, _ ceiling: Double) {
            print(padded(name, 52) + padded(String(format: "%.0f", figures.rate), 12, left: true)
                  + padded(String(format: "%.2f", figures.rate / ceiling), 12, left: true)
                  + padded(String(format: "%.1f", figures.p50.milliseconds), 10, left: true)
                  + padded(String(format: "%.1f", figures.p99.milliseconds), 10, left: true))
        }
        print(padded("PostgreSQL point SELECT (read ceiling)", 52) + padded(String(format: "%.0f", selects), 12, left: true))
        request("POST …/events, a new purchase each (vs INSERT)", http.ingest, baselineN)
        request("GET /v1/subscribers/{id}, 1 event (vs SELECT)", http.read, selects)
        request("GET /v1/products, no database (vs SELECT)", http.floor, selects)
        request("GET, one point SELECT each (vs SELECT)", http.selectFloor, selects)
        request("POST, one INSERT each (vs INSERT)", http.insertFloor, baselineN)
        print(Self.describe(http.writes))
        print(String(format: "peak RSS of this process (service and clients): %.0f MB", BenchStatistics.peakResidentMegabytes()))
    }

    /// The fact every write measurement stores: the ceilings' rows, the
    /// appends' events, the import's ceiling and floor, the `INSERT` floor's bodies.
    static let payload = #"{"productId":"com.example.pass.30d","transactionId":"1000000001","purchaseDate":"2026-11-22T05:00:00Z"}"#

    /// The `bench_baseline` row that the point-`SELECT` ceiling, and the
    /// floor route making its statement, read for a reader's `count`-th request.
    static func baselineRow(reader: Int, count: Int) -> Int64 {
        Int64(1 + (reader * 7919 + count) % 1000)
    }

    /// Runs `operation` from `writers` tasks for `duration`; returns events per second.
    static func rate(_ name: String, duration: Duration, writers: Int,
              _ operation: @escaping @Sendable (_ writer: Int, _ count: Int) async throws -> Int) async throws -> Double {
        let progress = TerminalProgress(label: name)
        let started = ContinuousClock.now
        let deadline = started + duration
        let total = try await withThrowingTaskGroup(of: Int.self) { group in
            for writer in 0..<writers {
                group.addTask {
                    var events = 0
                    var count = 0
                    while ContinuousClock.now < deadline {
                        events += try await operation(writer, count)
                        count += 1
                        if writer == 0 { progress.update(String(format: "%3.0f%%", min(1, (ContinuousClock.now - started) / duration) * 100)) }
                    }
                    return events
                }
            }
            return try await group.reduce(0, +)
        }
        let elapsed = ContinuousClock.now - started
        progress.finish(String(format: "%.0f events/s", Double(total) / elapsed.timeInterval))
        return Double(total) / elapsed.timeInterval
    }
}

/// Pads (or keeps) `text` to `width` characters for aligned columns.
func padded(_ text: String, _ width: Int, left: Bool = false) -> String {
    let padding = String(repeating: " ", count: max(0, width - text.count))
    return left ? padding + text : text + padding
}
