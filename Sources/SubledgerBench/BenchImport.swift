import CommandSupport
import EventStore
import Foundation
import JSON
import Ledger
import Logging
import Postgres
import SubledgerApp

/// `subledger bench --measure import`: `subledger import` of a generated
/// NDJSON file (read from disk, as the command does), beside the same run's
/// 1-client batched append (`append_events`, 500 events over 100 streams a
/// call) — the rate an import that only appended could reach on one
/// connection — and the import's own set-based append (`append_events_set`)
/// of the same batches from as many clients as the import has writers (the
/// floor: an import that only appended, on all its connections), and the
/// process's peak resident memory.
struct ImportBench {
    let pool: ConnectionPool
    let facts: Int
    let writers: Int
    let batchSize: Int
    let seconds: Double

    static let catalogJSON = """
        { "version": 1, "products": [
            {"id": "com.example.pro.monthly", "type": "auto-renewable", "group": "pro", "entitlements": ["pro"], "reminders": ["P3D"]},
            {"id": "com.example.pass.30d", "type": "non-renewing", "duration": "P30D", "group": "pass", "entitlements": ["pro"]},
            {"id": "com.example.coins.100", "type": "consumable"}
        ] }
        """

    struct Results {
        var ceiling: Double
        var appendFloor: Double
        var events: Int
        var rate: Double
        var summary: ImportSummary
        var reimportRate: Double
        var peakResidentMB: Double
    }

    func run() async throws -> Results {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("subledger-bench-import-\(getpid()).ndjson")
        try Self.writeFacts(facts, to: file)
        defer { try? FileManager.default.removeItem(at: file) }

        let store = EventStore(pool: pool)
        let payload = Data(Bench.payload.utf8)
        /// 500 events over 100 streams named by `prefix`, new keys for each `count`.
        @Sendable func batch(_ prefix: String, _ count: Int) -> [StreamAppend] {
            (0..<100).map { stream in
                StreamAppend(streamID: "bench-\(prefix)-\(stream)", events: (0..<5).map { index in
                    NewEvent(type: "purchased", data: payload, idempotencyKey: "\(prefix)-\(count)-\(stream)-\(index)")
                })
            }
        }
        let ceiling = try await Bench.rate("batch append, 1 client (ceiling)", duration: .milliseconds(Int(seconds * 1000)), writers: 1) { _, count in
            _ = try await store.append(batch("ceiling", count))
            return 500
        }
        let catalog = try Catalog.decode(from: Data(Self.catalogJSON.utf8))
        var importer = Importer(pool: pool, store: store, catalog: catalog, restorePolicy: .transfer, logger: Logger(label: "subledger.bench"))
        importer.writers = writers
        importer.batchSize = batchSize
        let before = try await pool.query("SELECT count(*) FROM events").first!.decode(Int.self, at: 0)
        let progress = TerminalProgress(label: "import \(facts) facts, \(writers) writers")
        let started = ContinuousClock.now
        let summary = try await importer.importLines(NDJSONReader(handle: try FileHandle(forReadingFrom: file))) { done in
            progress.update("\(done.lines) lines, \(Int(Double(done.imported) / (ContinuousClock.now - started).timeInterval)) facts/s")
        }
        let elapsed = (ContinuousClock.now - started).timeInterval
        let events = try await pool.query("SELECT count(*) FROM events").first!.decode(Int.self, at: 0) - before
        progress.finish(String(format: "%.0f events/s", Double(events) / elapsed))

        let again = ContinuousClock.now
        let second = try await importer.importLines(NDJSONReader(handle: try FileHandle(forReadingFrom: file)))
        guard second.imported == 0 else { throw BenchFailure(description: "re-import appended \(second.imported) facts") }
        let reimportRate = Double(second.duplicates) / (ContinuousClock.now - again).timeInterval
        // After the import, so that its events do not make the import's tables larger.
        // The floor appends as the importer does (set-based).
        let setBased = EventStore(pool: pool, batchAppend: .setBased)
        let appendFloor = try await Bench.rate("batch append, \(writers) clients (floor)", duration: .milliseconds(Int(seconds * 1000)),
                                               writers: writers) { client, count in
            _ = try await setBased.append(batch("floor-\(client)", count))
            return 500
        }
        return Results(ceiling: ceiling, appendFloor: appendFloor, events: events, rate: Double(events) / elapsed, summary: summary,
                       reimportRate: reimportRate,
                       peakResidentMB: BenchStatistics.peakResidentMegabytes())
    }

    /// Subscribers of ten facts each, month by month as a store's history
    /// would be exported: a monthly subscription bought and renewed, with a
    /// pass or coins some months.
    static func writeFacts(_ count: Int, to file: URL) throws {
        guard FileManager.default.createFile(atPath: file.path, contents: nil) else {
            throw BenchFailure(description: "cannot create \(file.path)")
        }
        let handle = try FileHandle(forWritingTo: file)
        defer { try? handle.close() }
        let subscribers = max(1, count / 10)
        let start = RFC3339.parse("2024-01-01T00:00:00Z")!
        var text = ""
        for index in 0..<count {
            let (month, subscriber) = index.quotientAndRemainder(dividingBy: subscribers)
            let at = start.addingTimeInterval(Double(month) * 30 * 86_400 + Double(subscriber % 1000) * 60)
            let (when, expires) = (RFC3339.format(at), RFC3339.format(at.addingTimeInterval(30 * 86_400)))
            let id = "sub-\(subscriber)"
            switch (month, (subscriber * 31 + month) % 10) {
            case (0, _):
                text += #"{"subscriberId":"\#(id)","type":"purchase","transactionId":"t\#(subscriber)-0","productId":"com.example.pro.monthly","purchaseDate":"\#(when)","expiresDate":"\#(expires)","deviceId":"d\#(subscriber)"}"#
            case (_, 3):
                text += #"{"subscriberId":"\#(id)","type":"purchase","transactionId":"p\#(subscriber)-\#(month)","productId":"com.example.pass.30d","purchaseDate":"\#(when)"}"#
            case (_, 5):
                text += #"{"subscriberId":"\#(id)","type":"purchase","transactionId":"c\#(subscriber)-\#(month)","productId":"com.example.coins.100","purchaseDate":"\#(when)","quantity":2}"#
            default:
                text += #"{"subscriberId":"\#(id)","type":"renewal","transactionId":"t\#(subscriber)-\#(month)","originalTransactionId":"t\#(subscriber)-0","productId":"com.example.pro.monthly","purchaseDate":"\#(when)","expiresDate":"\#(expires)"}"#
            }
            text += "\n"
            if text.utf8.count > 1 << 20 {
                try handle.write(contentsOf: Data(text.utf8))
                text = ""
            }
        }
        try handle.write(contentsOf: Data(text.utf8))
    }
}

extension Bench {
    func measureImport(pool: ConnectionPool) async throws {
        print("")
        print("subledger bench: import of \(importFacts) generated facts, \(importWriters) writers, batches of \(importBatchSize)")
        let results = try await ImportBench(pool: pool, facts: importFacts, writers: importWriters, batchSize: importBatchSize,
                                            seconds: seconds).run()
        print("")
        print(padded("measurement", 52) + padded("events/s", 12, left: true) + padded("× ceiling", 12, left: true))
        print(padded("batch append, 1 client (ceiling)", 52) + padded(String(format: "%.0f", results.ceiling), 12, left: true)
              + padded("1.00", 12, left: true))
        print(padded("batch append, \(importWriters) clients (floor)", 52) + padded(String(format: "%.0f", results.appendFloor), 12, left: true)
              + padded(String(format: "%.2f", results.appendFloor / results.ceiling), 12, left: true))
        print(padded("import, \(results.events) events", 52) + padded(String(format: "%.0f", results.rate), 12, left: true)
              + padded(String(format: "%.2f", results.rate / results.ceiling), 12, left: true))
        print(padded("re-import of the same file (duplicates/s)", 52) + padded(String(format: "%.0f", results.reimportRate), 12, left: true))
        print("import: \(results.summary)")
        print(String(format: "peak RSS of this process: %.0f MB", results.peakResidentMB))
    }
}
