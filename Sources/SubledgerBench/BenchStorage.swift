import CommandSupport
import EventStore
import Foundation
import Ledger
import Logging
import Postgres
import SubledgerApp

/// `subledger bench --measure storage`: what the database holds per event
/// once the import measurement's facts are imported and every projection is
/// rebuilt (as `subledger rebuild` runs it) — each table with its TOAST and
/// indexes, divided by the events, and the average stored size of the
/// events' columns. Measured first, on the run's empty database.
struct StorageBench {
    let pool: ConnectionPool
    let facts: Int
    let writers: Int
    let batchSize: Int

    struct Table {
        var name: String
        var heap: Int64
        var indexes: Int64
        var total: Int64 { heap + indexes }
    }

    struct Results {
        var events: Int
        var tables: [Table]
        /// Each index's size, largest first.
        var indexes: [(name: String, bytes: Int64)]
        /// Average `pg_column_size` of each column of `events`.
        var columns: [(name: String, bytes: Double)]
        var total: Int64 { tables.reduce(0) { $0 + $1.total } }
        var bytesPerEvent: Double { Double(total) / Double(max(events, 1)) }
    }

    func run() async throws -> Results {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("subledger-bench-storage-\(getpid()).ndjson")
        try ImportBench.writeFacts(facts, to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let store = EventStore(pool: pool)
        let catalog = try Catalog.decode(from: Data(ImportBench.catalogJSON.utf8))
        var importer = Importer(pool: pool, store: store, catalog: catalog, restorePolicy: .transfer, logger: Logger(label: "subledger.bench"))
        importer.writers = writers
        importer.batchSize = batchSize
        let progress = TerminalProgress(label: "storage: import \(facts) facts")
        _ = try await importer.importLines(NDJSONReader(handle: try FileHandle(forReadingFrom: file))) { done in
            progress.update("\(done.lines) lines")
        }
        progress.finish("imported")
        for consumer in Projections.rebuilt(nil, store: store, catalog: catalog) {
            let display = TerminalProgress(label: "storage: rebuild \(consumer.name)")
            _ = try await ProjectionRebuild.rebuild(consumer, store: store) {
                display.update("\($0) events")
            }
            display.finish("rebuilt")
        }
        // Sizes as a settled database has them: dead rows of the rebuilds' swaps gone, statistics current.
        try await pool.query("VACUUM ANALYZE")
        let events = try await pool.query("SELECT count(*) FROM events").first!.decode(Int.self, at: 0)
        let tables = try await pool.query("""
            SELECT c.relname, pg_table_size(c.oid), pg_indexes_size(c.oid) FROM pg_class c
            JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')
            ORDER BY pg_total_relation_size(c.oid) DESC
            """).map { Table(name: try $0.decode(String.self, at: 0), heap: try $0.decode(Int64.self, at: 1), indexes: try $0.decode(Int64.self, at: 2)) }
        let indexes = try await pool.query("""
            SELECT i.relname, pg_relation_size(i.oid) FROM pg_index x
            JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
            JOIN pg_namespace n ON n.oid = t.relnamespace
            WHERE n.nspname = current_schema() ORDER BY pg_relation_size(i.oid) DESC
            """).map { (name: try $0.decode(String.self, at: 0), bytes: try $0.decode(Int64.self, at: 1)) }
        let names = ["stream_number", "transaction_id", "recorded_at", "event_id", "schema_version", "type", "data", "metadata",
                     "lookup_key", "lookup_group"]
        let averages = try await pool.query("""
            SELECT \(unsafeRaw: names.map { "avg(pg_column_size(\($0)))::float8" }.joined(separator: ", ")),
                   avg(pg_column_size(events.*))::float8 FROM events
            """).first!
        var columns: [(name: String, bytes: Double)] = []
        for (index, name) in names.enumerated() { columns.append((name, try averages.decode(Double?.self, at: index) ?? 0)) }
        columns.append(("whole row", try averages.decode(Double?.self, at: names.count) ?? 0))
        return Results(events: events, tables: tables, indexes: indexes, columns: columns)
    }
}

extension Bench {
    func measureStorage(pool: ConnectionPool) async throws {
        print("")
        print("subledger bench: storage after importing \(importFacts) generated facts and rebuilding every projection")
        let results = try await StorageBench(pool: pool, facts: importFacts, writers: importWriters, batchSize: importBatchSize).run()
        print("")
        print(padded("table", 36) + padded("heap MB", 10, left: true) + padded("index MB", 10, left: true)
              + padded("bytes/event", 13, left: true))
        for table in results.tables where table.total * 200 >= results.total {
            print(padded(table.name, 36) + padded(String(format: "%.1f", Double(table.heap) / 1_048_576), 10, left: true)
                  + padded(String(format: "%.1f", Double(table.indexes) / 1_048_576), 10, left: true)
                  + padded(String(format: "%.0f", Double(table.total) / Double(max(results.events, 1))), 13, left: true))
        }
        print("")
        print(padded("index", 46) + padded("MB", 10, left: true) + padded("bytes/event", 13, left: true))
        for index in results.indexes where index.bytes * 200 >= results.total {
            print(padded(index.name, 46) + padded(String(format: "%.1f", Double(index.bytes) / 1_048_576), 10, left: true)
                  + padded(String(format: "%.0f", Double(index.bytes) / Double(max(results.events, 1))), 13, left: true))
        }
        print(String(format: "all tables and indexes: %.1f MB for %d events, %.0f bytes per event",
                     Double(results.total) / 1_048_576, results.events, results.bytesPerEvent))
        print("events' columns, average stored bytes: "
              + results.columns.map { "\($0.name) \(String(format: "%.0f", $0.bytes))" }.joined(separator: ", "))
    }
}
