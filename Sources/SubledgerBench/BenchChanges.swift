import CommandSupport
import EventStore
import Foundation
import Hummingbird
import Ledger
import Logging
import Postgres
import SubledgerApp

/// `subledger bench --measure changes`: the change feed's lag while an
/// import (`ImportBench`'s generated facts) is written, sampled every 200 ms
/// as `/metrics` defines it (now − recorded_at of the oldest event not yet
/// turned into changes), with the feed's consumer running as `serve` runs it;
/// then how many of those changes the webhook dispatchers deliver per second
/// to a receiver on loopback that answers 200 at once.
struct ChangesBench {
    let pool: ConnectionPool
    let conninfo: String
    let facts: Int
    let writers: Int
    let batchSize: Int

    struct Results {
        var importRate: Double
        var lagMedian: Double
        var lagMaximum: Double
        var catchUp: Double
        var changes: Int
        var delivered: Int
        var deliveryRate: Double
    }

    func run() async throws -> Results {
        let catalog = try Catalog.decode(from: Data(ImportBench.catalogJSON.utf8))
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("subledger-bench-changes-\(getpid()).ndjson")
        try ImportBench.writeFacts(facts, to: file)
        defer { try? FileManager.default.removeItem(at: file) }

        let received = ReceivedCount()
        let router = Router()
        router.post("/changes") { request, _ -> Response in
            _ = try await request.body.collect(upTo: 1 << 20)
            await received.add()
            return Response(status: .ok)
        }
        let (ports, portSink) = AsyncStream.makeStream(of: Int.self)
        let receiver = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                                   onServerRunning: { channel in
                                       portSink.yield(channel.localAddress?.port ?? 0)
                                       portSink.finish()
                                   })
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await receiver.runService(gracefulShutdownSignals: []) }
            defer { group.cancelAll() }
            var iterator = ports.makeAsyncIterator()
            let port = await iterator.next() ?? 0
            _ = try await WebhookStore(pool: pool).create(url: "http://127.0.0.1:\(port)/changes", types: [], description: "bench")

            // The feed's consumer, as serve runs it, during the import.
            let store = EventStore(pool: pool)
            let runner = ConsumerRunner(store: store, consumer: ChangeFeedConsumer(catalog: catalog), conninfo: conninfo,
                                        logger: Logger(label: "subledger.bench"))
            let consumer = Task { await runner.runUntilCancelled() }
            defer { consumer.cancel() }
            let samples = LagSamples()
            let sampler = Task {
                while !Task.isCancelled {
                    if let lag = try? await pool.query(ChangeMetrics.lagQuery).first?.decode(Double.self, at: 0) { await samples.add(lag) }
                    try? await Task.sleep(for: .milliseconds(200))
                }
            }
            var importer = Importer(pool: pool, store: store, catalog: catalog, restorePolicy: .transfer, logger: Logger(label: "subledger.bench"))
            importer.writers = writers
            importer.batchSize = batchSize
            let progress = TerminalProgress(label: "import \(facts) facts with the change feed running")
            let started = ContinuousClock.now
            let summary = try await importer.importLines(NDJSONReader(handle: try FileHandle(forReadingFrom: file)))
            let importSeconds = (ContinuousClock.now - started).timeInterval
            progress.finish(String(format: "%.0f facts/s", Double(summary.imported) / importSeconds))
            let imported = ContinuousClock.now
            while try await store.lag(of: ChangeFeedConsumer.consumerName) > 0 {
                try await Task.sleep(for: .milliseconds(50))
            }
            let catchUp = (ContinuousClock.now - imported).timeInterval
            sampler.cancel()
            consumer.cancel()
            let changes = try await pool.query("SELECT count(*) FROM changes").first!.decode(Int.self, at: 0)

            // Deliveries: two dispatchers (two instances), until none is pending.
            var settings = ChangeDispatcher.Settings()
            settings.batchSize = 64
            settings.destinations = WebhookDestinations(allowPrivate: true)  // the bench's receiver is on loopback
            let dispatchers = (0..<2).map { _ in ChangeDispatcher(pool: pool, conninfo: conninfo, settings: settings) }
            let delivering = TerminalProgress(label: "deliver \(changes) changes to a loopback receiver")
            let deliveryStart = ContinuousClock.now
            try await withThrowingTaskGroup(of: Void.self) { deliveries in
                for dispatcher in dispatchers {
                    deliveries.addTask {
                        while true {
                            if try await dispatcher.dispatchDue() == 0 {
                                let pending = try await pool.query("SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'")
                                    .first!.decode(Int.self, at: 0)
                                if pending == 0 { return }
                                try await Task.sleep(for: .milliseconds(5))
                            }
                        }
                    }
                }
                try await deliveries.waitForAll()
            }
            let deliverySeconds = (ContinuousClock.now - deliveryStart).timeInterval
            let delivered = await received.count
            delivering.finish(String(format: "%.0f changes/s", Double(delivered) / deliverySeconds))
            let lags = await samples.values.sorted()
            return Results(importRate: Double(summary.imported) / importSeconds,
                           lagMedian: lags.isEmpty ? 0 : lags[lags.count / 2], lagMaximum: lags.last ?? 0,
                           catchUp: catchUp, changes: changes, delivered: delivered,
                           deliveryRate: Double(delivered) / deliverySeconds)
        }
    }

    actor ReceivedCount {
        var count = 0
        func add() { count += 1 }
    }

    actor LagSamples {
        var values: [Double] = []
        func add(_ value: Double) { values.append(value) }
    }
}

extension Bench {
    /// `POST …/events` (the ingest benchmark) with and without the feed's
    /// consumer running beside the service, alternated; the feed's lag
    /// sampled while it runs.
    func measureIngestWithFeed(conninfo: String, logger: Logger) async throws {
        let service = try await startService(conninfo: conninfo, logger: logger)
        defer { service.server.cancel() }
        let duration = Duration.milliseconds(Int(seconds * 1000))
        var without: [Double] = []
        var with: [Double] = []
        var lags: [Double] = []
        let catalog = service.dependencies.catalog.catalog
        for round in 0..<2 {
            without.append(try await measureIngest(port: service.port, duration: duration, run: "plain\(round)").figures.rate)
            let runner = ConsumerRunner(store: service.dependencies.store, consumer: ChangeFeedConsumer(catalog: catalog), conninfo: conninfo,
                                        pollInterval: .milliseconds(100), logger: Logger(label: "subledger.bench"))
            let consumer = Task { await runner.runUntilCancelled() }
            let samples = ChangesBench.LagSamples()
            let pool = service.dependencies.pool
            let sampler = Task {
                while !Task.isCancelled {
                    if let lag = try? await pool.query(ChangeMetrics.lagQuery).first?.decode(Double.self, at: 0) { await samples.add(lag) }
                    try? await Task.sleep(for: .milliseconds(200))
                }
            }
            with.append(try await measureIngest(port: service.port, duration: duration, run: "feed\(round)").figures.rate)
            while try await service.dependencies.store.lag(of: ChangeFeedConsumer.consumerName) > 0 {
                try await Task.sleep(for: .milliseconds(50))
            }
            sampler.cancel()
            consumer.cancel()
            await consumer.value
            lags += await samples.values
        }
        lags.sort()
        print(String(format: "POST …/events, %d connections: %.0f/s without the feed's consumer, %.0f/s with it (rounds: %@ / %@)",
                     writers, without.reduce(0, +) / Double(without.count), with.reduce(0, +) / Double(with.count),
                     without.map { String(format: "%.0f", $0) }.joined(separator: ", "),
                     with.map { String(format: "%.0f", $0) }.joined(separator: ", ")))
        print(String(format: "feed lag under the ingest benchmark (s): median %.2f, max %.2f (%d samples)",
                     lags.isEmpty ? 0 : lags[lags.count / 2], lags.last ?? 0, lags.count))
    }

    func measureChanges(pool: ConnectionPool, conninfo: String, logger: Logger) async throws {
        print("")
        print("subledger bench: the change feed beside the ingest benchmark, \(seconds) s per run, \(writers) connections")
        try await measureIngestWithFeed(conninfo: conninfo, logger: logger)
        print("")
        print("subledger bench: the change feed, \(importFacts) imported facts, \(importWriters) writers")
        let results = try await ChangesBench(pool: pool, conninfo: conninfo, facts: importFacts, writers: importWriters,
                                             batchSize: importBatchSize).run()
        print(String(format: "import with the feed's consumer running: %.0f facts/s", results.importRate))
        print(String(format: "feed lag during the import (s): median %.2f, max %.2f; caught up %.2f s after the import ended",
                     results.lagMedian, results.lagMaximum, results.catchUp))
        print(String(format: "changes published: %d; delivered to a loopback receiver: %d at %.0f changes/s (2 dispatchers)",
                     results.changes, results.delivered, results.deliveryRate))
    }
}
