import CommandSupport
import EventStore
import Foundation
import Ledger
import Logging
import Postgres
import SubledgerApp

/// The projection and read-path measurements of `subledger bench`: the
/// subscriptions projection's rebuild beside PostgreSQL's own set-based
/// upsert of the same events, and reads and writes of a subscriber with one
/// event beside one with 10,000 renewals.
struct ProjectionBench {
    let pool: ConnectionPool
    let store: EventStore
    let events: Int
    let samples: Int
    /// Rebuilds, each followed by the ceiling.
    let rounds: Int
    let writer: LedgerWriter
    let reader: SubscriberReader
    let catalog: Catalog
    let ledgers = LedgerCache()

    static let catalogJSON = """
        { "version": 1, "products": [
            {"id": "com.example.pro.monthly", "type": "auto-renewable", "group": "pro", "entitlements": ["pro"], "reminders": ["P3D"]},
            {"id": "com.example.pass.30d", "type": "non-renewing", "duration": "P30D", "group": "pass", "entitlements": ["pro"]},
            {"id": "com.example.level2", "type": "non-consumable", "entitlements": ["level2"]}
        ] }
        """
    static let monthly = "com.example.pro.monthly"

    init(pool: ConnectionPool, events: Int, samples: Int, rounds: Int, catalogJSON: String = Self.catalogJSON) throws {
        self.pool = pool
        self.events = events
        self.samples = samples
        self.rounds = rounds
        store = EventStore(pool: pool)
        catalog = try Catalog.decode(from: Data(catalogJSON.utf8))
        // Sharing a ledger cache, as `serve`'s writer and reader do.
        var writer = LedgerWriter(pool: pool, store: store, catalog: catalog, restorePolicy: .transfer,
                                  logger: Logger(label: "subledger.bench"))
        writer.ledgerCache = ledgers
        self.writer = writer
        var reader = SubscriberReader(store: store, catalog: catalog)
        reader.ledgerCache = ledgers
        self.reader = reader
    }

    struct Results {
        var rebuiltEvents = 0
        /// Each round's rebuild and ceiling, events/s.
        var rounds: [(rebuild: Double, ceiling: Double)] = []
        var rebuild: Double { Self.median(rounds.map(\.rebuild)) }
        var ceiling: Double { Self.median(rounds.map(\.ceiling)) }
        var ratio: Double { Self.median(rounds.map { $0.rebuild / $0.ceiling }) }

        static func median(_ values: [Double]) -> Double {
            let sorted = values.sorted()
            guard !sorted.isEmpty else { return 0 }
            return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
        }
        var peakResidentMB: Double = 0
        /// One live projection batch: events, subscribers touched, round trips.
        var liveBatch = (events: 0, subscribers: 0, roundTrips: UInt64(0))
        var reads: [Latency] = []
        var writes: [Latency] = []
    }

    struct Latency {
        var name: String
        var p50: Double
        var p99: Double

        init(_ name: String, _ percentiles: (p50: Double, p99: Double)) {
            self.name = name
            (p50, p99) = percentiles
        }
    }

    func run() async throws -> Results {
        var results = Results()
        try await load()
        // Both the rebuild and the ceiling read a settled log, as a deployed one is:
        // without this the first to scan the fresh rows pays to set their hint bits.
        try await pool.query("VACUUM (ANALYZE) events")
        let projection = SubscriptionProjection(store: store, catalog: catalog)
        // The live path: one batch of up to 10,000 events, its round trips counted.
        results.liveBatch = try await pool.withConnection { connection in
            let before = connection.roundTrips
            let handled = try await store.processBatch(projection, limit: 10_000, on: connection)
            let touched = try await connection.query("""
                SELECT count(DISTINCT stream_number) FROM (SELECT stream_number FROM events ORDER BY position LIMIT \(handled)) AS batch
                """).first?.decode(Int.self, at: 0)
            return (handled, touched ?? 0, connection.roundTrips - before - 1)
        }
        // PostgreSQL's ceiling: the same events folded set-based, one statement.
        try await pool.query("""
            CREATE TABLE bench_upsert (stream_id text PRIMARY KEY, events bigint NOT NULL, last_position bigint NOT NULL,
                                       last_recorded_at timestamptz NOT NULL)
            """)
        // Rounds of a rebuild then the ceiling: on a shared machine one run of
        // either can be a quarter off, and a neighbour's burst hits the two
        // of a round alike. The medians are reported, and the median of the
        // rounds' ratios.
        for round in 1...rounds {
            let rebuildProgress = TerminalProgress(label: "rebuild subscriptions (stream by stream), round \(round) of \(rounds)")
            let rebuildStarted = ContinuousClock.now
            let total = events
            results.rebuiltEvents = try await store.rebuildStreamwise(projection) { done in
                rebuildProgress.update(ProjectionRebuild.progressLine(done: done, total: total, elapsed: (ContinuousClock.now - rebuildStarted).timeInterval))
            }
            let rebuild = Double(results.rebuiltEvents) / (ContinuousClock.now - rebuildStarted).timeInterval
            rebuildProgress.finish(String(format: "%.0f events/s", rebuild))

            try await pool.query("TRUNCATE bench_upsert")
            let started = ContinuousClock.now
            try await pool.query("""
                INSERT INTO bench_upsert (stream_id, events, last_position, last_recorded_at)
                SELECT s.stream_id, g.events, g.last_position, g.last_recorded_at
                FROM (SELECT stream_number, count(*) AS events, max(position) AS last_position, max(recorded_at) AS last_recorded_at
                      FROM events GROUP BY stream_number) g
                JOIN streams s ON s.number = g.stream_number
                WHERE starts_with(s.stream_id, 'subscriber-')
                ON CONFLICT (stream_id) DO UPDATE
                SET events = EXCLUDED.events, last_position = EXCLUDED.last_position, last_recorded_at = EXCLUDED.last_recorded_at
                """)
            let ceiling = Double(results.rebuiltEvents) / (ContinuousClock.now - started).timeInterval
            results.rounds.append((rebuild, ceiling))
        }
        results.peakResidentMB = BenchStatistics.peakResidentMegabytes()

        try await loadLongHistory()
        let fresh = (0...samples).map { "bench-one-\($0)" }
        // The rules alone, on ledgers in memory: what a read or a write of the
        // long history costs above the 1-event one, without I/O.
        for (name, subscriberID) in [("1 event", "bench-one-0"), ("10,000 renewals", "bench-long")] {
            let stored = try await store.readStream(SubscriberStreams.streamID(for: subscriberID))
            let ledger = SubscriberLedger(subscriberID: subscriberID, events: try stored.map(SubscriberStreams.ledgerEvent))
            results.reads.append(Latency("evaluate the state in memory, \(name)", try await percentiles(samples * 5) { _ in
                _ = ledger.stateAndNextChange(at: Date(), catalog: catalog)
            }))
        }
        results.reads.append(Latency("GET state, 1 event", try await percentiles { _ in _ = try await reader.state(of: "bench-one-0") }))
        results.reads.append(Latency("GET state, 10,000 renewals", try await percentiles { _ in _ = try await reader.state(of: "bench-long") }))
        results.reads.append(Latency("GET state, 10,000 renewals, state not cached", try await percentiles(setUp: { _ in
            try await pool.query("DELETE FROM subscriber_state_cache WHERE subscriber_id = 'bench-long'")
        }, timing: { _ in _ = try await reader.state(of: "bench-long") })))
        results.reads.append(Latency("GET state, 10,000 renewals, cold (snapshot and tail)", try await percentiles(setUp: { _ in
            try await pool.query("DELETE FROM subscriber_state_cache WHERE subscriber_id = 'bench-long'")
            ledgers.removeAll()
        }, timing: { _ in _ = try await reader.state(of: "bench-long") })))
        results.reads.append(Latency("GET state, 10,000 renewals, whole stream (no snapshot)", try await percentiles(max(5, samples / 20)) { _ in
            let stored = try await store.readStream(SubscriberStreams.streamID(for: "bench-long"))
            _ = SubscriberLedger(subscriberID: "bench-long", events: try stored.map(SubscriberStreams.ledgerEvent))
                .state(at: Date(), catalog: catalog)
        }))
        let base = Date() - 86_400
        results.writes.append(Latency("write a renewal, 1 event", try await percentiles { index in
            _ = try await writer.record(renewal("one-r\(index)", of: "one-\(index)", at: base + 60, expires: base + 86_400 * 31),
                                        subscriberID: fresh[index])
        }))
        results.writes.append(Latency("write a renewal, 10,000 renewals", try await percentiles { index in
            _ = try await writer.record(renewal("long-w\(index)", of: "long-0", at: base + Double(index), expires: base + 86_400 * 60),
                                        subscriberID: "bench-long")
        }))
        // The snapshots due during the writes are stored in the background: let them finish before the pool closes.
        await ledgers.snapshotsSaved()
        return results
    }

    /// `events` facts over subscribers of about ten each (a monthly
    /// subscription renewed, a pass, sometimes a refund), written in batches.
    func load() async throws {
        let progress = TerminalProgress(label: "writing \(events) events for the rebuild")
        let start = Date() - 400 * 86_400
        var commands: [WriteCommand] = []
        var written = 0
        var subscriber = 0
        while written < events {
            let id = "s\(subscriber)"
            let offset = Double(subscriber % 1000) * 3600
            commands.append(.fact(purchase("\(id)-0", at: start + offset, expires: start + offset + 30 * 86_400), subscriberID: id))
            for month in 1..<8 {
                let at = start + offset + Double(month) * 30 * 86_400
                commands.append(.fact(renewal("\(id)-\(month)", of: "\(id)-0", at: at, expires: at + 30 * 86_400), subscriberID: id))
            }
            commands.append(.fact(.purchase(.init(transactionID: "\(id)-p", productID: "com.example.pass.30d", purchaseDate: start + offset)),
                                  subscriberID: id))
            if subscriber % 7 == 0 {
                commands.append(.fact(.refund(.init(transactionID: "\(id)-p", revocationDate: start + offset + 86_400)), subscriberID: id))
            }
            subscriber += 1
            try await write(&commands, written: &written, progress: progress)
        }
        progress.finish("\(written) events for \(subscriber) subscribers")
    }

    /// Writes the loaders' commands in batches of about 500, and the last ones.
    func write(_ commands: inout [WriteCommand], written: inout Int, progress: TerminalProgress) async throws {
        guard commands.count >= 500 || written + commands.count >= events else { return }
        written += commands.count
        _ = try await writer.write(WriteBatch(commands, refusals: .skip))
        commands.removeAll(keepingCapacity: true)
        progress.update("\(written)/\(events)")
    }

    /// A subscriber with one event per sample (for the write measurement),
    /// one with one event, and one with 10,000 renewals.
    func loadLongHistory() async throws {
        let progress = TerminalProgress(label: "writing 10,000 renewals")
        let start = Date() - 20_000 * 3600
        let ones = (0...samples).map { index in
            WriteCommand.fact(purchase("one-\(index)", at: start, expires: start + 3600), subscriberID: "bench-one-\(index)")
        }
        _ = try await writer.write(WriteBatch(ones))
        _ = try await writer.record(purchase("long-0", at: start, expires: start + 3600), subscriberID: "bench-long")
        for chunk in stride(from: 1, to: 10_000, by: 500) {
            let commands = (chunk..<min(chunk + 500, 10_000)).map { index in
                let at = start + Double(index) * 3600
                return WriteCommand.fact(renewal("long-\(index)", of: "long-0", at: at, expires: at + 3600), subscriberID: "bench-long")
            }
            _ = try await writer.write(WriteBatch(commands))
            progress.update("\(chunk + commands.count)/10000")
        }
        progress.finish("done")
    }

    func purchase(_ id: String, at: Date, expires: Date) -> FactRequest {
        .purchase(.init(transactionID: id, productID: Self.monthly, purchaseDate: at, expiresDate: expires))
    }

    func renewal(_ id: String, of original: String, at: Date, expires: Date) -> FactRequest {
        .renewal(.init(transactionID: id, originalTransactionID: original, productID: Self.monthly, purchaseDate: at, expiresDate: expires))
    }

    /// p50 and p99 of `operation` over `count` runs (after two warm-ups), in milliseconds.
    func percentiles(_ count: Int? = nil, _ operation: (Int) async throws -> Void) async throws -> (p50: Double, p99: Double) {
        try await percentiles(count, setUp: { _ in }, timing: operation)
    }

    /// As `percentiles(_:_:)`, running `setUp` (untimed) before each run.
    func percentiles(_ count: Int? = nil, setUp: (Int) async throws -> Void,
                     timing operation: (Int) async throws -> Void) async throws -> (p50: Double, p99: Double) {
        let count = count ?? samples
        try await setUp(count)
        try await operation(count)  // warm-up
        var durations: [Double] = []
        for index in 0..<count {
            try await setUp(index)
            let started = ContinuousClock.now
            try await operation(index)
            durations.append((ContinuousClock.now - started).timeInterval * 1000)
        }
        durations.sort()
        return (BenchStatistics.percentile(0.5, of: durations) ?? 0, BenchStatistics.percentile(0.99, of: durations) ?? 0)
    }
}
