import Foundation
import JSON
import Logging
import Metrics
import Postgres

/// Append-only streams of events in PostgreSQL.
///
/// Appends are checked against expected versions, idempotent by key, and atomic
/// across streams; consumers read in commit order (see `readCommitted`).
public struct EventStore: Sendable {
    public let pool: ConnectionPool
    let logger: Logger
    /// Channel notified by every append's transaction at commit.
    public static let notificationChannel = "subledger_events"

    let signal: AppendSignal
    /// How `append` stores a batch (see `BatchAppend`); imports choose `.setBased`.
    public var batchAppend = BatchAppend.eventByEvent

    public init(pool: ConnectionPool, logger: Logger = Logger(label: "subledger.event-store"), batchAppend: BatchAppend = .eventByEvent) {
        self.pool = pool
        self.logger = logger
        self.signal = AppendSignal(pool: pool, logger: logger)
        self.batchAppend = batchAppend
    }

    /// Runs `body` in a transaction and, once it has committed, wakes the
    /// consumers. Append inside it with `append(_:on:)`.
    public func transaction<T>(_ body: (Connection) async throws -> T) async throws -> T {
        let value = try await pool.withTransaction(body)
        signal.wakeConsumers()
        return value
    }

    /// Wakes the consumers after a transaction that appended has committed
    /// (`transaction(_:)` and the appends outside one do it themselves).
    public func wakeConsumers() { signal.wakeConsumers() }

    // MARK: Append

    /// Appends events to one stream.
    public func append(to streamID: String, expected: ExpectedVersion = .any, events: [NewEvent]) async throws -> StreamAppendResult {
        try await append([StreamAppend(streamID: streamID, expected: expected, events: events)])[0]
    }

    /// Appends to several streams in one transaction and one round trip: every
    /// stream's expected version holds and everything is stored, or nothing is.
    /// Also the batch path for imports.
    public func append(_ appends: [StreamAppend]) async throws -> [StreamAppendResult] {
        let results = try await pool.withConnection { connection in
            try await append(appends, on: connection)
        }
        if results.contains(where: { !$0.isAllDuplicates }) { signal.wakeConsumers() }
        return results
    }

    /// Appends within the caller's transaction, so read-model rows written
    /// beside it commit or roll back with the events. Use `transaction(_:)`
    /// around it so consumers are woken after the commit; otherwise they find
    /// the events at their next poll.
    public func append(_ appends: [StreamAppend], on connection: Connection) async throws -> [StreamAppendResult] {
        guard !appends.isEmpty else { return [] }
        do {
            return try Self.results(of: try await connection.query(appendStatement(appends)), appends: appends)
        } catch let error as PostgresError {
            throw Self.appendError(error, appends: appends)
        }
    }

    /// Appends and runs `statements` after it as one transaction in one
    /// round trip (a libpq pipeline up to one sync: an implicit transaction,
    /// so the first error rolls everything back and is thrown), then wakes
    /// the consumers. `connection` must not be inside a transaction. The
    /// write path's commit: the events and the rows that go with them, one
    /// exchange with the server.
    public func append(_ appends: [StreamAppend], beside statements: [PostgresQuery],
                       on connection: Connection) async throws -> [StreamAppendResult] {
        guard !appends.isEmpty else {
            if !statements.isEmpty { _ = try await connection.pipeline(statements) }
            return []
        }
        let outputs: [PostgresRows]
        do {
            outputs = try await connection.pipeline([appendStatement(appends)] + statements)
        } catch let error as PostgresError {
            throw Self.appendError(error, appends: appends)
        }
        let results = try Self.results(of: outputs[0], appends: appends)
        if results.contains(where: { !$0.isAllDuplicates }) { signal.wakeConsumers() }
        return results
    }

    func appendStatement(_ appends: [StreamAppend]) -> PostgresQuery {
        appendStatement(for: appends, batch: PostgresJSON(text: Self.batchDocument(appends)))
    }

    /// `append_events` refuses a stale expected version with SL409, naming
    /// the stream in the hint and its version in the detail.
    static func appendError(_ error: PostgresError, appends: [StreamAppend]) -> Error {
        guard error.sqlState == SQLState("SL409") else { return error }
        let streamID = error.hint ?? ""
        let expected = appends.first { $0.streamID == streamID }?.expected ?? .any
        conflicts.increment()
        return WrongExpectedVersion(streamID: streamID, expected: expected, actual: Int64(error.detail ?? "") ?? -1)
    }

    static func results(of rows: PostgresRows, appends: [StreamAppend]) throws -> [StreamAppendResult] {
        var results = appends.map { StreamAppendResult(streamID: $0.streamID, outcomes: []) }
        for row in rows {
            let streamIndex = try row.decode(Int.self, at: 0)
            let outcome = AppendOutcome(
                position: try row.decode(Int64.self, at: 2),
                streamVersion: try row.decode(Int64.self, at: 3),
                isDuplicate: try row.decode(Bool.self, at: 4),
                storedStreamID: try row.decode(String.self, at: 5))
            results[streamIndex].outcomes.append(outcome)
            if outcome.isDuplicate { duplicates.increment() } else { appended.increment() }
        }
        return results
    }

    static let appended = Counter(label: "subledger_events_appended_total")
    static let duplicates = Counter(label: "subledger_events_duplicate_total")
    static let conflicts = Counter(label: "subledger_append_conflicts_total")

    /// The JSON document `append_events` takes. Event data is spliced in as
    /// the JSON it already is.
    static func batchDocument(_ appends: [StreamAppend]) -> String {
        var out = "["
        out.reserveCapacity(appends.reduce(64) { total, append in
            append.events.reduce(total + append.streamID.utf8.count + 48) { $0 + $1.data.count + 160 }
        })
        for (streamIndex, append) in appends.enumerated() {
            if streamIndex > 0 { out += "," }
            out += "{\"stream\":"
            JSONText.appendString(append.streamID, to: &out)
            out += ",\"expected\":"
            if let expected = append.expected.number { out += String(expected) } else { out += "null" }
            out += ",\"events\":["
            for (eventIndex, event) in append.events.enumerated() {
                out += eventIndex > 0 ? ",{" : "{"
                // An event with a key takes its digest for id (sql/0044).
                if let key = event.idempotencyKey {
                    let digest = Self.storedKey(key)
                    out += "\"key\":\""; out += digest; out += "\",\"id\":\""; out += digest; out += "\""
                } else {
                    out += "\"key\":null,\"id\":\""; out += event.id.uuidString.lowercased(); out += "\""
                }
                out += ",\"type\":"
                JSONText.appendString(event.type, to: &out)
                out += ",\"schemaVersion\":"
                out += String(event.schemaVersion)
                out += ",\"data\":"
                out += String(decoding: event.data, as: UTF8.self)
                out += ",\"metadata\":"
                JSONText.appendMetadata(event.metadata, to: &out)
                if let key = event.lookupKey { out += ",\"lk\":"; JSONText.appendString(key, to: &out) }
                if let group = event.lookupGroup { out += ",\"lg\":"; JSONText.appendString(group, to: &out) }
                out += "}"
            }
            out += "]}"
        }
        out += "]"
        return out
    }

    // MARK: Read

    /// What a `RecordedEvent` is read from (`decode`): an event names its
    /// stream by number (sql/0039), and the stream's id is its row's.
    static let columns = """
        e.position, s.stream_id, e.stream_version, e.event_id, e.type, e.schema_version, e.data, e.metadata,
        e.transaction_id, e.recorded_at
        """

    /// Events with their streams, `e` the event and `s` its stream: an
    /// event names its stream by number, a stream's id is in its row. Every
    /// read of events with their stream's id joins this way.
    public static let eventsWithStreams = "events e JOIN streams s ON s.number = e.stream_number"

    /// A stream's events after `version` (0: from the start), in version order.
    public func readStream(_ streamID: String, after version: Int64 = 0) async throws -> [RecordedEvent] {
        try await pool.withConnection { try await readStream(streamID, after: version, on: $0) }
    }

    public func readStream(_ streamID: String, after version: Int64 = 0, on connection: Connection) async throws -> [RecordedEvent] {
        try await Self.readStream(streamID, after: version, on: connection)
    }

    /// The same on a connection the caller holds (a transaction of its own).
    public static func readStream(_ streamID: String, after version: Int64 = 0, on connection: Connection) async throws -> [RecordedEvent] {
        let rows = try await connection.query("""
            SELECT \(unsafeRaw: Self.columns) FROM \(unsafeRaw: Self.eventsWithStreams)
            WHERE s.stream_id = \(streamID) AND e.stream_version > \(version)
            ORDER BY e.stream_version
            """)
        return try rows.map(Self.decode)
    }

    /// A stream's current version (0 when it does not exist): its last
    /// event's (sql/0044).
    public func streamVersion(_ streamID: String) async throws -> Int64 {
        try await pool.withConnection { try await Self.streamVersion(streamID, on: $0) }
    }

    /// The same on a connection the caller holds. (The stream's number
    /// first: PostgreSQL answers `max` from the index's end only for one
    /// table, not over a join.)
    public static func streamVersion(_ streamID: String, on connection: Connection) async throws -> Int64 {
        try await connection.query("""
            SELECT coalesce(max(stream_version), 0) FROM events
            WHERE stream_number = (SELECT number FROM streams WHERE stream_id = \(streamID))
            """).first?.decode(Int64.self, at: 0) ?? 0
    }

    /// Events committed after `checkpoint`, in commit-safe order, at most `limit`.
    ///
    /// Positions come from a sequence, taken when a row is inserted, so a
    /// transaction can hold position 10 uncommitted while one holding 11
    /// commits: a reader at "position > 9" would see 11, move past 10, and never
    /// see it. So we order by the writing transaction's id, then position, and
    /// only read transactions older than the oldest one still running
    /// (`pg_snapshot_xmin`): every transaction below that line has committed or
    /// rolled back, so nothing can appear behind the reader later. A slow
    /// transaction delays consumers; it never makes them skip. A rolled-back
    /// one leaves no rows and stops holding the line once it ends.
    public func readCommitted(after checkpoint: Checkpoint, limit: Int, on connection: Connection) async throws -> [RecordedEvent] {
        let rows = try await connection.query("""
            SELECT \(unsafeRaw: Self.columns) FROM \(unsafeRaw: Self.eventsWithStreams)
            WHERE (e.transaction_id, e.position) > (\(String(checkpoint.transactionID))::xid8, \(checkpoint.position))
              AND e.transaction_id < pg_snapshot_xmin(pg_current_snapshot())
            ORDER BY e.transaction_id, e.position
            LIMIT \(limit)
            """)
        return try rows.map(Self.decode)
    }

    public func readCommitted(after checkpoint: Checkpoint, limit: Int) async throws -> [RecordedEvent] {
        try await pool.withConnection { try await readCommitted(after: checkpoint, limit: limit, on: $0) }
    }

    /// The event stored under an idempotency key, if any.
    public func event(withIdempotencyKey key: String) async throws -> RecordedEvent? {
        let rows = try await pool.query("""
            SELECT \(unsafeRaw: Self.columns) FROM \(unsafeRaw: Self.eventsWithStreams) WHERE e.event_id = \(Self.storedKey(key))::uuid
            """)
        return try rows.first.map(Self.decode)
    }

    /// The statement of the log's head, to pipeline with others: the highest
    /// position drawn (0 when none), at least the highest stored and above
    /// every stored event's. Read from the position's sequence, not the
    /// events, which have no b-tree of positions (sql/0045); a rolled-back
    /// append's positions count.
    public static var headPositionStatement: PostgresQuery {
        "SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM events_position_seq"
    }

    /// The head position in the rows of `headPositionStatement`.
    public static func headPosition(from rows: PostgresRows) throws -> Int64 {
        try rows.first?.decode(Int64.self, at: 0) ?? 0
    }

    static func decode(_ row: PostgresRow) throws -> RecordedEvent {
        let metadata = EventMetadata(storedText: try row.decode(String.self, at: 7))
        return RecordedEvent(
            position: try row.decode(Int64.self, at: 0),
            streamID: try row.decode(String.self, at: 1),
            streamVersion: try row.decode(Int64.self, at: 2),
            eventID: try row.decode(UUID.self, at: 3),
            type: try row.decode(String.self, at: 4),
            schemaVersion: try row.decode(Int.self, at: 5),
            data: Data(try row.decode(String.self, at: 6).utf8),
            metadata: metadata,
            transactionID: UInt64(try row.decode(String.self, at: 8)) ?? 0,
            recordedAt: try row.decode(Date.self, at: 9))
    }
}

/// Minimal JSON text building for the append document (and the JSON
/// arguments the application's stores bind).
public enum JSONText {
    /// A JSON string literal of `value`, without a `JSONEncoder`.
    public static func string(_ value: String) -> String { JSONStringLiteral.quoted(value) }

    /// Appends the JSON string literal of `value` to `out` (`JSONStringLiteral`).
    @inlinable
    public static func appendString(_ value: String, to out: inout String) {
        JSONStringLiteral.append(value, to: &out)
    }

    static func appendMetadata(_ metadata: EventMetadata, to out: inout String) {
        var opened = false
        func field(_ name: String, _ value: String?) {
            guard let value else { return }
            out += opened ? "," : "{"
            out += name
            appendString(value, to: &out)
            opened = true
        }
        field("\"source\":", metadata.source)
        field("\"causationID\":", metadata.causationID)
        field("\"correlationID\":", metadata.correlationID)
        out += opened ? "}" : "{}"
    }
}

/// Wakes consumers after appends commit: `NOTIFY` from a statement of its own,
/// outside the appending transaction, at most one in flight per process (calls
/// that arrive meanwhile are folded into one more).
actor AppendSignal {
    let pool: ConnectionPool
    let logger: Logger
    private var isSending = false
    private var isPending = false

    init(pool: ConnectionPool, logger: Logger) {
        self.pool = pool
        self.logger = logger
    }

    /// Sends the notification in the background: the writer's answer does
    /// not wait for it (consumers also poll, so it is a latency hint only).
    nonisolated func wakeConsumers() {
        Task { await self.appended() }
    }

    func appended() async {
        if isSending {
            isPending = true
            return
        }
        isSending = true
        repeat {
            isPending = false
            do {
                try await pool.query("SELECT pg_notify(\(EventStore.notificationChannel), '')")
            } catch {
                // Consumers poll as well; a lost wake-up only delays them.
                logger.debug("append notification failed", metadata: ["error": "\(error)"])
            }
        } while isPending
        isSending = false
    }
}
