import Foundation
import Postgres

/// One stream's events, in version order, as its consumer decoded them.
public struct StreamEvents<Event: Sendable>: Sendable {
    public var streamID: String
    public var events: [Event]
}

/// A stored event as a rebuild reads it: the values it needs, the type and
/// the payload in place in the server's answer (valid during the call only).
public struct StreamEventRow {
    public var position: Int64
    public var streamVersion: Int64
    public var type: String
    public var schemaVersion: Int
    public var data: UnsafeRawBufferPointer
    public var recordedAt: Date
}

/// A consumer whose read model is a function of each stream alone, not of
/// how streams interleave in commit order: it can be rebuilt stream by
/// stream (`EventStore.rebuildStreamwise`) — index range scans of the log in
/// (stream, version) order, each stream folded once in memory, rows written
/// in bulk into shadow tables swapped in at the end — instead of replaying
/// batch after batch in commit order.
public protocol StreamwiseConsumer: EventConsumer {
    associatedtype Rows: Sendable
    associatedtype StreamEvent: Sendable
    /// One event as `rows(for:)` takes it, decoded as its row is read (no
    /// copy of the row first): pure, any thread.
    func event(from row: StreamEventRow) throws -> StreamEvent
    /// The streams it reads: those whose id starts with this.
    var streamPrefix: String { get }
    /// The tables of its read model; a rebuild fills a shadow copy of each
    /// and swaps them in together.
    var tables: [String] { get }
    /// The rows of complete streams. Pure (no I/O): runs on any thread,
    /// several at once. The streams are handed over (the rebuild holds no
    /// other reference to them), so a consumer may move the events out
    /// instead of copying them.
    func rows(for streams: consuming [StreamEvents<StreamEvent>]) throws -> Rows
    /// Adds rows (of several parts, folded apart) to emptied tables.
    func insert(_ parts: [Rows], into tables: ProjectionTables, on connection: Connection) async throws
    /// What `handle` does, writing into `tables`: the rebuild's catch-up
    /// applies what was committed while it ran to the shadow tables.
    func handle(_ events: [RecordedEvent], into tables: ProjectionTables, on connection: Connection) async throws
    /// In the swap's transaction, just before it: carries over what the live
    /// tables hold that the events do not (and the rebuild could not fold).
    func prepareSwap(on connection: Connection) async throws
    /// In each load worker's transaction, before it reads a stream: reads
    /// what `rows(for:)` needs besides the events, in the worker's snapshot
    /// (workers call it once each, on their own connections).
    func prepareLoad(on connection: Connection) async throws
    /// After the load: drops what `prepareLoad` read.
    func finishLoad()
    /// After every worker's load, before the shadows are indexed: writes
    /// what the consumer kept across parts (sums over every stream).
    func finishLoad(into tables: ProjectionTables, on connection: Connection) async throws
}

extension StreamwiseConsumer {
    /// A live batch writes into the live tables.
    public func handle(_ events: [RecordedEvent], on connection: Connection) async throws {
        try await handle(events, into: .live, on: connection)
    }

    public func prepareSwap(on connection: Connection) async throws {}
    public func prepareLoad(on connection: Connection) async throws {}
    public func finishLoad() {}
    public func finishLoad(into tables: ProjectionTables, on connection: Connection) async throws {}
}

/// The part of the log one rebuild worker reads: the streams of a prefix
/// numbered in (`after`, `through`] (`through` nil: no upper bound).
struct StreamRange: Sendable {
    var prefix: String
    var after: Int64
    var through: Int64?
}

/// Whole streams of a range read in pages of about `pageSize` events, in
/// (stream number, version) order: each page is one query walking the
/// events' (stream_number, stream_version) index from the last whole stream
/// read, merged with the streams' number index for their ids. A stream cut
/// by the page's limit is read again at the start of the next page; a
/// stream longer than a page is read alone, whole.
///
/// By number, not by id: both indexes are then walked in their own order
/// (a merge join; in the last range, which has no upper bound, each stream
/// in number order with its events). Walking streams by id probed the events' index once a
/// stream, at its number, in no order: on 1M events (100,000 streams) the
/// whole log took 4.5 s of the server's time that way and 1.1 s by number.
/// No consumer needs streams in any order (`rows(for:)` folds each alone).
/// Both sides are bounded by the numbers: PostgreSQL carries an equality
/// across a join, not a range, and a streams side without its own bounds
/// began at the first stream on every page (92,000 rows skipped for a page
/// near the end of 100,000 streams).
///
/// Plain queries rather than a cursor: a `FETCH` is a utility statement,
/// whose rows the server first copies into a tuple store (on disk past
/// `work_mem`) and only then sends; that copy was a fifth of the reading
/// server process's time. The pages run in one read-only REPEATABLE READ
/// transaction of their own connection, so they read one snapshot; it never
/// gets a transaction id, so it does not hold back the commit horizon the
/// live consumers read below (it holds back vacuum while it runs). The
/// snapshot is later than the rebuild's starting checkpoint, so it holds at
/// least the events before it; what it holds beyond, the catch-up applies
/// again, which the consumers tolerate.
struct StreamCursor<Event: Sendable> {
    let range: StreamRange
    let pageSize: Int
    let decode: @Sendable (StreamEventRow) throws -> Event
    /// The number of the last stream read whole.
    private var after: Int64
    private(set) var isFinished = false

    init(_ range: StreamRange, pageSize: Int, decode: @escaping @Sendable (StreamEventRow) throws -> Event) {
        self.range = range
        self.decode = decode
        self.pageSize = max(2, pageSize)
        after = range.after
    }

    /// The next page's complete streams (empty once the range is read).
    mutating func next(on connection: Connection) async throws -> [StreamEvents<Event>] {
        guard !isFinished else { return [] }
        var (streams, rows) = try await read(after: after, limit: "LIMIT \(pageSize)", on: connection)
        if rows < pageSize {
            isFinished = true
        } else if streams.count > 1 {
            streams.removeLast()  // may go on past the limit: read again next time
        } else if let only = streams.first {
            // One stream fills the page: read it alone, whole.
            let whole = try await read(after: after, through: only.number, limit: "", on: connection)
            streams = whole.streams
        }
        if let last = streams.last?.number { after = last }
        return streams.map(\.events)
    }

    private func read(after: Int64, through: Int64? = nil, limit: String, on connection: Connection) async throws
        -> (streams: [Page.Stream], rows: Int) {
        let through = through ?? range.through
        // Binary: the integers and timestamps cost neither side any formatting.
        var page = try await connection.query("""
            SELECT e.position, e.stream_number, s.stream_id, e.stream_version, e.type, e.schema_version, e.data::text,
                   e.recorded_at
            FROM \(unsafeRaw: EventStore.eventsWithStreams)
            WHERE starts_with(s.stream_id, \(range.prefix)) AND e.stream_number > \(after) AND s.number > \(after)
              AND (\(through)::bigint IS NULL OR (e.stream_number <= \(through) AND s.number <= \(through)))
            ORDER BY e.stream_number, e.stream_version \(unsafeRaw: limit)
            """, into: Page(decode: decode), binaryResults: true) { page, row throws(PostgresError) in
            try page.add(row)
        }
        if let failure = page.failure { throw failure }
        return (page.finish(), page.rows)
    }

    /// A page's rows grouped into streams as they are read, each row decoded
    /// in place by the consumer (`Connection.query(_:into:_:)`): a page
    /// holds tens of thousands of events, and a copy of each value before
    /// the consumer's own cost more than the rest of reading them.
    struct Page: Sendable {
        /// A stream read whole, with its number.
        struct Stream: Sendable {
            var number: Int64
            var events: StreamEvents<Event>
        }

        let decode: @Sendable (StreamEventRow) throws -> Event
        /// The streams read whole so far; the one being read is `current`.
        private(set) var streams: [Stream] = []
        private var currentNumber: Int64?
        private var currentID = ""
        private var current: [Event] = []
        var rows = 0
        /// The first event the consumer could not decode: the page stops there.
        var failure: (any Error)?

        init(decode: @escaping @Sendable (StreamEventRow) throws -> Event) {
            self.decode = decode
        }

        /// The streams of the page, the last one included.
        mutating func finish() -> [Stream] {
            if let currentNumber {
                streams.append(Stream(number: currentNumber, events: StreamEvents(streamID: currentID, events: current)))
                self.currentNumber = nil
                current = []
            }
            return streams
        }

        mutating func add(_ row: PostgresRawRow) throws(PostgresError) {
            guard failure == nil else { return }
            rows += 1
            let number = try row.integer(at: 1)
            // Rows come in stream order: each stream's id becomes a String
            // once, and its events gather apart from the page's streams (no
            // copy of the last stream to look at its number, no reach into
            // the array of streams to append).
            if number != currentNumber {
                if let currentNumber {
                    streams.append(Stream(number: currentNumber, events: StreamEvents(streamID: currentID, events: current)))
                }
                currentNumber = number
                currentID = String(decoding: try row.bytes(at: 2), as: UTF8.self)
                current = []
            }
            let decoded = StreamEventRow(
                position: try row.integer(at: 0), streamVersion: try row.integer(at: 3),
                type: String(decoding: try row.bytes(at: 4), as: UTF8.self), schemaVersion: Int(try row.integer(at: 5)),
                data: UnsafeRawBufferPointer(try row.bytes(at: 6)), recordedAt: try row.date(at: 7))
            do {
                current.append(try decode(decoded))
            } catch {
                failure = error
            }
        }
    }
}

/// A count shared by the rebuild's tasks: the events folded, for progress
/// reports, and the next shadow table to index.
final class RebuildCounter: @unchecked Sendable {
    // Safety: `total` is only touched under `lock`.
    private let lock = NSLock()
    private var total = 0

    func add(_ count: Int) -> Int {
        lock.withLock {
            total += count
            return total
        }
    }
}
