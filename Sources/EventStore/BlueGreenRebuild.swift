import Foundation
import Postgres

/// A rebuild of the same consumer is already running elsewhere.
public struct RebuildAlreadyRunning: Error, CustomStringConvertible {
    public let consumer: String
    public var description: String {
        "a rebuild of \(consumer) is already running (or an erasure, which holds its lock for a moment); try again when it ends"
    }
}

extension EventStore {
    /// Rebuilds a streamwise consumer blue-green, without stopping the live
    /// one: `serve` reads the old tables and its runner keeps them current
    /// until one short transaction swaps the rebuilt ones in.
    ///
    /// 1. The starting checkpoint S is taken: the last event of every
    ///    transaction finished by now (everything at or before S is visible
    ///    to any later snapshot). Empty shadow tables are created.
    /// 2. `workers` connections each read a range of the streams (split at
    ///    the median stream number) in pages of about `chunkSize` events, whole
    ///    streams at a time, fold them in memory while the previous page's
    ///    rows go into the shadow tables and the next page comes out. Memory
    ///    holds a few pages per worker, whatever the log's length.
    /// 3. The shadow tables get their indexes, then catch up: the events
    ///    after S (in commit order, as the live runner reads them) are
    ///    applied to them by the consumer's own batch code, in short
    ///    transactions, until a batch comes back short.
    /// 4. The swap, in one transaction: it locks the live consumer's
    ///    checkpoint row (each member's, for a consumer of several) — the row every live batch locks first
    ///    (`processBatch`) — so no live batch runs until it commits; applies
    ///    what was committed since step 3; lets the consumer carry over state
    ///    the events do not hold (`prepareSwap`); replaces the live tables
    ///    with the shadows (renames); and sets the checkpoint to the last
    ///    event applied.
    ///
    /// Why nothing is lost or applied twice: the shadow holds every event up
    /// to that checkpoint (the fold has everything up to S, the catch-up
    /// everything committed after S up to the checkpoint, read under the
    /// lock, so nothing committed later can sort before it); the live
    /// runner, once it gets the lock, reads the new checkpoint and goes on
    /// from there into the new tables (its statements are parsed after the
    /// lock wait, so they name the swapped-in tables). A live batch that
    /// committed before the swap wrote into the dropped tables, and its
    /// events are in the shadow's catch-up. Events that the fold already saw
    /// and the catch-up applies again are harmless: the subscription rows
    /// are a function of the whole stream, the reminder projection skips
    /// versions it has applied.
    ///
    /// Each worker reads in a REPEATABLE READ transaction and notes its
    /// snapshot; the catch-up skips the events every worker's snapshot saw
    /// (the load has them) and applies the rest. Without that, a transaction
    /// left open before the rebuild held the commit horizon back, and the
    /// catch-up applied again everything the load had folded.
    ///
    /// `progress` gets the number of events folded or caught up so far. `afterLoad`
    /// runs once the shadow tables are loaded, before the catch-up (tests
    /// write there).
    @discardableResult
    public func rebuildStreamwise<Consumer: StreamwiseConsumer>(
        _ consumer: Consumer, chunkSize: Int = 20_000, workers: Int = 2, catchUpBatch: Int = 2_000,
        progress: @escaping @Sendable (Int) -> Void = { _ in }, afterLoad: @Sendable () async throws -> Void = {}
    ) async throws -> Int {
        try await pool.withConnection { connection in
            // Each member's lock, so a rebuild of one of them alone waits for this one.
            var held: [String] = []
            do {
                for member in consumer.members.sorted() {
                    guard try await connection.tryLock(.rebuild(member)) else { throw RebuildAlreadyRunning(consumer: member) }
                    held.append(member)
                }
                let total = try await rebuildHoldingLock(consumer, chunkSize: chunkSize, workers: workers,
                                                         catchUpBatch: catchUpBatch, progress: progress, afterLoad: afterLoad,
                                                         on: connection)
                for member in held { try await connection.unlock(.rebuild(member)) }
                return total
            } catch {
                // A broken connection ends its session and the locks with it.
                for member in held { try? await connection.unlock(.rebuild(member)) }
                throw error
            }
        }
    }

    private func rebuildHoldingLock<Consumer: StreamwiseConsumer>(
        _ consumer: Consumer, chunkSize: Int, workers: Int, catchUpBatch: Int,
        progress: @escaping @Sendable (Int) -> Void, afterLoad: @Sendable () async throws -> Void, on connection: Connection
    ) async throws -> Int {
        let counter = RebuildCounter()
        let loaded = LoadSnapshots()
        let start = try await commitHorizon(on: connection)
        try await connection.withTransaction { connection in
            for table in consumer.tables { try await connection.query("SELECT subledger_shadow_create(\(table))") }
        }
        let ranges = try await streamRanges(prefix: consumer.streamPrefix, count: max(1, workers), on: connection)
        // What the consumer read for the load (keys, sums) is dropped whether it succeeds or not.
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, range) in ranges.enumerated() {
                    group.addTask {
                        if index == 0 {
                            try await load(range, consumer: consumer, chunkSize: chunkSize, counter: counter, progress: progress,
                                           snapshots: loaded, on: connection)
                        } else {
                            try await pool.withConnection { other in
                                try await load(range, consumer: consumer, chunkSize: chunkSize, counter: counter,
                                               progress: progress, snapshots: loaded, on: other)
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
            try await consumer.finishLoad(into: .shadow, on: connection)
        } catch {
            consumer.finishLoad()
            throw error
        }
        consumer.finishLoad()
        try await afterLoad()
        let seenByLoad = await loaded.all
        try await indexShadows(consumer.tables, workers: workers, on: connection)
        // Catch up in short transactions, so the swap has little left to do.
        var position = start
        while true {
            let (handled, reached) = try await connection.withTransaction { connection in
                try await catchUp(consumer, after: position, limit: catchUpBatch, skipping: seenByLoad, on: connection)
            }
            position = reached.checkpoint
            progress(counter.add(handled))
            if reached.read < catchUpBatch { break }
        }
        try await connection.withTransaction { connection in
            // Every member's checkpoint row, in one order: a live runner locks
            // only its own, and no other rebuild holds a member's (the locks above).
            for member in consumer.members.sorted() { _ = try await checkpoint(of: member, on: connection, lock: true) }
            while true {
                let (handled, reached) = try await catchUp(consumer, after: position, limit: catchUpBatch, skipping: seenByLoad,
                                                           on: connection)
                position = reached.checkpoint
                progress(counter.add(handled))
                if reached.read < catchUpBatch { break }
            }
            try await consumer.prepareSwap(on: connection)
            for table in consumer.tables { try await connection.query("SELECT subledger_shadow_swap(\(table))") }
            for member in consumer.members { try await saveCheckpoint(position, of: member, on: connection) }
        }
        return counter.add(0)
    }

    /// Indexes the shadow tables, `workers` at once: building an index keeps
    /// one server process busy, and the tables are independent, so the
    /// rebuild's connections build them side by side (`connection` and
    /// pool connections), as they loaded them. Each connection takes the
    /// next table when it is done with one (in the consumer's order), so a
    /// table with more indexes does not leave the other connections idle.
    private func indexShadows(_ tables: [String], workers: Int, on connection: Connection) async throws {
        let lanes = max(1, min(workers, tables.count))
        let queue = RebuildCounter()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for lane in 0..<lanes {
                group.addTask {
                    func index(on connection: Connection) async throws {
                        while true {
                            let next = queue.add(1) - 1
                            guard next < tables.count else { return }
                            try await connection.query("SELECT subledger_shadow_index(\(tables[next]))")
                        }
                    }
                    if lane == 0 { try await index(on: connection) } else { try await pool.withConnection { try await index(on: $0) } }
                }
            }
            try await group.waitForAll()
        }
    }

    /// The last event of every transaction already finished (`.start` when none).
    ///
    /// The ORDER BY names the table's column: a bare `transaction_id` is the
    /// text output column of that name, in which "999" sorts after "2855", so
    /// the horizon fell far behind the end of the log and the catch-up read
    /// most of it again.
    func commitHorizon(on connection: Connection) async throws -> Checkpoint {
        let horizon = try await connection.query("""
            SELECT transaction_id::text, position FROM events
            WHERE transaction_id < pg_snapshot_xmin(pg_current_snapshot())
            ORDER BY events.transaction_id DESC, events.position DESC LIMIT 1
            """).first
        return try horizon.map {
            Checkpoint(transactionID: UInt64(try $0.decode(String.self, at: 0)) ?? 0, position: try $0.decode(Int64.self, at: 1))
        } ?? .start
    }

    /// Reads up to `limit` committed events after `position` and applies to
    /// the shadow tables those not every load snapshot saw; returns how many
    /// it applied, how many it read and the checkpoint reached.
    private func catchUp<Consumer: StreamwiseConsumer>(
        _ consumer: Consumer, after position: Checkpoint, limit: Int, skipping seen: [TransactionSnapshot],
        on connection: Connection
    ) async throws -> (Int, (read: Int, checkpoint: Checkpoint)) {
        let events = try await readCommitted(after: position, limit: limit, on: connection)
        guard let last = events.last else { return (0, (0, position)) }
        // Only what all saw is skipped: which worker's range holds a stream
        // is its number's affair, not decided here.
        let fresh = seen.isEmpty ? events : events.filter { event in
            !event.streamID.hasPrefix(consumer.streamPrefix) || !seen.allSatisfy { $0.sees(event.transactionID) }
        }
        if !fresh.isEmpty { try await consumer.handle(fresh, into: .shadow, on: connection) }
        return (fresh.count, (events.count, last.checkpoint))
    }

    /// `count` ranges of the prefix's streams, of about as many streams each.
    ///
    /// The bounds come from a sample of about 20,000 streams (all of them
    /// in a smaller log): the ranges only need to be about even, and
    /// sorting every stream id first was 60 ms of a rebuild of 1M events
    /// before any worker could start.
    private func streamRanges(prefix: String, count: Int, on connection: Connection) async throws -> [StreamRange] {
        guard count > 1 else { return [StreamRange(prefix: prefix, after: 0, through: nil)] }
        let fractions = (1..<count).map { String(Double($0) / Double(count)) }.joined(separator: ",")
        let estimate = try await connection.query("SELECT reltuples::float8 FROM pg_class WHERE oid = 'streams'::regclass")
            .first?.decode(Double.self, at: 0) ?? -1
        let percent = estimate > 20_000 ? 100 * 20_000 / estimate : 100
        let bounds = try await connection.query("""
            SELECT unnest(percentile_disc(string_to_array(\(fractions), ',')::float8[]) WITHIN GROUP (ORDER BY number))
            FROM streams TABLESAMPLE SYSTEM (\(percent)) WHERE starts_with(stream_id, \(prefix))
            """).compactMap { try $0.decode(Int64?.self, at: 0) }
        var ranges: [StreamRange] = []
        var after: Int64 = 0
        for bound in bounds where bound > after {
            ranges.append(StreamRange(prefix: prefix, after: after, through: bound))
            after = bound
        }
        ranges.append(StreamRange(prefix: prefix, after: after, through: nil))
        return ranges
    }

    /// One worker: reads its range in pages on a connection of its
    /// own and writes into the shadow tables on `connection`, folding a page
    /// while the previous one's rows are written and the next one is read.
    private func load<Consumer: StreamwiseConsumer>(
        _ range: StreamRange, consumer: Consumer, chunkSize: Int, counter: RebuildCounter,
        progress: @escaping @Sendable (Int) -> Void, snapshots: LoadSnapshots, on connection: Connection
    ) async throws {
        // What is written here is thrown away if the rebuild dies: no need to wait for each flush.
        try await connection.query("SET synchronous_commit = off")
        do {
            try await pool.withConnection { reader in
                // REPEATABLE READ: every page is read in the snapshot noted here.
                try await reader.withTransaction(isolation: .repeatableRead) { reader in
                    try await reader.query("SET TRANSACTION READ ONLY")
                    // Walk the (stream_number, stream_version) index rather than sort the whole range
                    // first: the first chunk comes at once and the fold and the inserts overlap the scan.
                    try await reader.query("SET LOCAL enable_sort = off")
                    let snapshot = try await reader.query("SELECT pg_current_snapshot()::text").first?.decode(String.self, at: 0)
                    await snapshots.add(snapshot.flatMap(TransactionSnapshot.init))
                    try await consumer.prepareLoad(on: reader)
                    var cursor = StreamCursor(range, pageSize: chunkSize) { try consumer.event(from: $0) }
                    var page = try await cursor.next(on: reader)
                    var pending: Consumer.Rows?
                    while !page.isEmpty || !cursor.isFinished {
                        var events = 0
                        for index in page.indices { events += page[index].events.count }
                        // Handed over, not shared: the fold may then move the events out.
                        let streams = Handoff(page)
                        page = []
                        async let folded = consumer.rows(for: streams.take())
                        // The writer's COPY and the reader's next page run in two server
                        // processes: side by side, not one after the other.
                        let writing = pending
                        async let written: Void = { if let writing { try await consumer.insert([writing], into: .shadow, on: connection) } }()
                        page = try await cursor.next(on: reader)
                        try await written
                        pending = try await folded
                        progress(counter.add(events))
                    }
                    if let pending { try await consumer.insert([pending], into: .shadow, on: connection) }
                }
            }
            try await connection.query("RESET synchronous_commit")
        } catch {
            _ = try? await connection.query("RESET synchronous_commit")
            throw error
        }
    }
}

/// A PostgreSQL snapshot (`pg_current_snapshot()`, "xmin:xmax:xip,…"): which
/// transactions' writes it sees.
struct TransactionSnapshot: Sendable, Equatable {
    var xmin: UInt64
    var xmax: UInt64
    var inProgress: Set<UInt64>

    init?(_ text: String) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, let xmin = UInt64(parts[0]), let xmax = UInt64(parts[1]) else { return nil }
        var inProgress = Set<UInt64>()
        for item in parts[2].split(separator: ",") {
            guard let xid = UInt64(item) else { return nil }
            inProgress.insert(xid)
        }
        (self.xmin, self.xmax, self.inProgress) = (xmin, xmax, inProgress)
    }

    /// Whether a committed transaction's writes are visible in the snapshot.
    func sees(_ transactionID: UInt64) -> Bool {
        transactionID < xmin || (transactionID < xmax && !inProgress.contains(transactionID))
    }
}

/// The load workers' snapshots; a worker whose snapshot could not be read
/// makes the catch-up skip nothing.
actor LoadSnapshots {
    private var snapshots: [TransactionSnapshot] = []
    private var unreadable = false

    func add(_ snapshot: TransactionSnapshot?) {
        if let snapshot { snapshots.append(snapshot) } else { unreadable = true }
    }

    var all: [TransactionSnapshot] { unreadable ? [] : snapshots }
}

/// A value passed from one task to another without a second reference
/// staying behind: `take()` moves it out (once), so the taker holds the
/// only copy and can mutate it without copying its storage.
final class Handoff<Value: Sendable>: @unchecked Sendable {
    // Safety: `value` is only touched under `lock`.
    private let lock = NSLock()
    private var value: Value?

    init(_ value: consuming Value) {
        self.value = value
    }

    func take() -> Value {
        lock.withLock { value.take()! }
    }
}
