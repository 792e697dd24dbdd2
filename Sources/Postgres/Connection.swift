import CLibPQ
import Foundation
import Logging

/// A notification received on a channel this connection listens to.
public struct PostgresNotification: Sendable, Equatable {
    public var channel: String
    public var payload: String
    public var processID: Int32
}

/// One libpq connection, the sole owner of its `PGconn`.
///
/// Every libpq call on the handle runs on the connection's own thread, one at a
/// time; `async` callers suspend meanwhile. A connection is used by one caller at
/// a time (the pool guarantees it); concurrent use is serialised, not parallel.
public final class Connection: @unchecked Sendable {
    // Safety: `handle` is read and written only by jobs on `executor`, which
    // runs them one at a time. `cancelHandle` and `brokenFlag` are guarded by
    // `lock`; libpq documents PQcancel as safe to call from another thread.
    private var handle: OpaquePointer?
    private let executor: BlockingExecutor
    private let lock = NSLock()
    private var cancelHandle: OpaquePointer?
    private var brokenFlag = false
    private var closed = false
    /// The job whose statement is on the wire, so a cancel reaches only it.
    private var runningJob: UInt64?
    private var nextJob: UInt64 = 0
    public let logger: Logger

    private init(handle: OpaquePointer, executor: BlockingExecutor, logger: Logger) {
        self.handle = handle
        self.executor = executor
        self.cancelHandle = PQgetCancel(handle)
        self.logger = logger
    }

    deinit {
        // Nothing else can hold the handle now: jobs retain `self` while they run.
        if let cancelHandle { PQfreeCancel(cancelHandle) }
        if let handle { PQfinish(handle) }
        executor.stop()
    }

    /// Connects with a `postgresql://` URL or a `key=value` conninfo string.
    public static func connect(to conninfo: String, logger: Logger = Logger(label: "subledger.postgres")) async throws -> Connection {
        let executor = BlockingExecutor(name: "postgres-connection")
        let handle: OpaquePointer = try await withCheckedThrowingContinuation { continuation in
            let accepted = executor.submit {
                guard let handle = Connection.connectWithDefaults(conninfo) else {
                    continuation.resume(throwing: PostgresError(code: .connectionFailed, message: "libpq could not allocate a connection"))
                    return
                }
                guard PQstatus(handle) == CONNECTION_OK else {
                    let message = Connection.errorMessage(handle)
                    PQfinish(handle)
                    continuation.resume(throwing: PostgresError(code: .connectionFailed, message: message))
                    return
                }
                // Server notices go nowhere rather than to stderr.
                PQsetNoticeProcessor(handle, { _, _ in }, nil)
                // Fix the output formats the decoders rely on, whatever the server's defaults.
                let setup = PQexec(handle, "SET DateStyle = 'ISO'; SET TimeZone = 'UTC'; SET client_encoding = 'UTF8'")
                let ok = PQresultStatus(setup) == PGRES_COMMAND_OK
                PQclear(setup)
                guard ok else {
                    let message = Connection.errorMessage(handle)
                    PQfinish(handle)
                    continuation.resume(throwing: PostgresError(code: .connectionFailed, message: message))
                    return
                }
                continuation.resume(returning: handle)
            }
            if !accepted {
                continuation.resume(throwing: PostgresError(code: .invalidState, message: "executor stopped"))
            }
        }
        return Connection(handle: handle, executor: executor, logger: logger)
    }

    /// True once a statement found the connection unusable; the pool discards it.
    public var isBroken: Bool {
        lock.withLock { brokenFlag }
    }

    /// Closes the connection; later calls fail with `.invalidState`.
    public func close() {
        lock.withLock { closed = true }
        _ = executor.submit { [self] in
            lock.withLock {
                if let cancelHandle { PQfreeCancel(cancelHandle) }
                cancelHandle = nil
            }
            if let handle { PQfinish(handle) }
            handle = nil
        }
        executor.stop()
    }

    // MARK: Statements

    /// Runs one parameterised statement and returns its rows.
    @discardableResult
    public func query(_ query: PostgresQuery) async throws -> PostgresRows {
        try await run { handle throws(PostgresError) in try Connection.execute(query, on: handle) }
    }

    /// Runs SQL text with no parameters, possibly several statements (migrations).
    public func execute(unsafeSQL sql: String) async throws {
        try await run { handle throws(PostgresError) in
            let result = PQexec(handle, sql)
            defer { PQclear(result) }
            _ = try Connection.rows(from: result, handle: handle, sql: sql)
        }
    }

    /// Runs `body` in a transaction: committed when it returns, rolled back when
    /// it throws or the task is cancelled.
    public func withTransaction<T>(
        isolation level: IsolationLevel = .readCommitted,
        _ body: (Connection) async throws -> T
    ) async throws -> T {
        try await query(PostgresQuery(unsafeSQL: "BEGIN ISOLATION LEVEL \(level.rawValue)"))
        let value: T
        do {
            value = try await body(self)
            try Task.checkCancellation()
        } catch {
            await rollbackQuietly()
            throw error
        }
        try await run(ignoringCancellation: true) { handle throws(PostgresError) in
            _ = try Connection.execute("COMMIT", on: handle)
        }
        return value
    }

    public enum IsolationLevel: String, Sendable {
        case readCommitted = "READ COMMITTED"
        case repeatableRead = "REPEATABLE READ"
        case serializable = "SERIALIZABLE"
    }

    private func rollbackQuietly() async {
        do {
            try await run(ignoringCancellation: true) { handle throws(PostgresError) in
                _ = try Connection.execute("ROLLBACK", on: handle)
            }
        } catch {
            markBroken()
        }
    }

    /// Sends every statement before reading any result (libpq's pipeline mode):
    /// one round trip for the lot. Up to the implicit sync they run as one
    /// transaction unless the statements open their own; the first error aborts
    /// the rest and is thrown.
    public func pipeline(_ queries: [PostgresQuery]) async throws -> [PostgresRows] {
        guard !queries.isEmpty else { return [] }
        return try await run { handle throws(PostgresError) in try Connection.runPipeline(queries, on: handle) }
    }

    // MARK: Notifications

    /// Subscribes this connection to a channel.
    public func listen(_ channel: String) async throws {
        try await run { handle throws(PostgresError) in
            guard let escaped = PQescapeIdentifier(handle, channel, channel.utf8.count) else {
                throw PostgresError(code: .invalidState, message: Connection.errorMessage(handle))
            }
            defer { PQfreemem(escaped) }
            _ = try Connection.execute(PostgresQuery(unsafeSQL: "LISTEN " + String(cString: escaped)), on: handle)
        }
    }

    /// Waits for the next notification without polling the server: the thread
    /// sleeps in `poll(2)` on the socket until data arrives or `timeout` passes.
    public func waitForNotification(timeout: Duration) async throws -> PostgresNotification? {
        try await run { handle throws(PostgresError) in
            if let notification = Connection.nextNotification(handle) { return notification }
            let milliseconds = Int32(clamping: timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
            let ready = try Connection.waitReadable(handle, milliseconds: milliseconds)
            if ready {
                guard PQconsumeInput(handle) == 1 else {
                    throw PostgresError(code: .connectionLost, message: Connection.errorMessage(handle))
                }
            }
            return Connection.nextNotification(handle)
        }
    }

    /// Checks, without a round trip, that an idle connection was not closed by
    /// the server (a restart sends a termination message and closes the socket).
    public func isUsableForReuse() async -> Bool {
        do {
            return try await run(ignoringCancellation: true) { handle throws(PostgresError) in
                guard PQstatus(handle) == CONNECTION_OK else { return false }
                // An idle pooled connection has nothing to hear; if the server
                // spoke, it was to end the session (shutdown, restart, kill).
                if try Connection.waitReadable(handle, milliseconds: 0) { return false }
                return true
            }
        } catch {
            return false
        }
    }

    /// The server process serving this connection (for `pg_terminate_backend` in tests and ops).
    public func backendProcessID() async throws -> Int32 {
        try await run { handle throws(PostgresError) in PQbackendPID(handle) }
    }

    // MARK: Running on the connection's thread

    private func run<T: Sendable>(
        ignoringCancellation: Bool = false,
        _ body: @escaping @Sendable (OpaquePointer) throws(PostgresError) -> T
    ) async throws -> T {
        if !ignoringCancellation { try Task.checkCancellation() }
        let job = lock.withLock {
            nextJob += 1
            return nextJob
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, Error>) in
                let accepted = executor.submit { [self] in
                    guard let handle else {
                        continuation.resume(throwing: PostgresError(code: .invalidState, message: "connection is closed"))
                        return
                    }
                    lock.withLock { runningJob = job }
                    let result: Result<T, PostgresError>
                    do throws(PostgresError) {
                        result = .success(try body(handle))
                    } catch {
                        if error.isConnectionBroken || PQstatus(handle) != CONNECTION_OK { markBroken() }
                        result = .failure(error)
                    }
                    lock.withLock { runningJob = nil }
                    continuation.resume(with: result)
                }
                if !accepted {
                    continuation.resume(throwing: PostgresError(code: .invalidState, message: "connection is closed"))
                }
            }
        } onCancel: {
            if !ignoringCancellation { self.cancel(job: job) }
        }
    }

    private func markBroken() {
        lock.withLock { brokenFlag = true }
    }

    /// Cancels `job`'s statement if it is the one running. The server acts on
    /// a cancel request asynchronously, so it could still land on the next
    /// statement: the connection is then not trusted again (the pool drops it).
    private func cancel(job: UInt64) {
        lock.withLock {
            guard runningJob == job, let cancelHandle, !closed else { return }
            var buffer = [CChar](repeating: 0, count: 256)
            _ = PQcancel(cancelHandle, &buffer, Int32(buffer.count))
            brokenFlag = true
        }
    }
}

// MARK: - libpq plumbing (called on the connection's thread only)

extension Connection {
    /// `PQconnectdbParams` with a connect timeout the conninfo may override
    /// (later keywords win, and the expanded conninfo comes last), so an
    /// unreachable host fails in seconds instead of the kernel's minutes.
    static func connectWithDefaults(_ conninfo: String) -> OpaquePointer? {
        let keywords: [String?] = ["connect_timeout", "dbname", nil]
        let values: [String?] = ["10", conninfo, nil]
        return withCStringArray(keywords) { keywordPointers in
            withCStringArray(values) { valuePointers in
                PQconnectdbParams(keywordPointers, valuePointers, 1)
            }
        }
    }

    static func errorMessage(_ handle: OpaquePointer) -> String {
        guard let message = PQerrorMessage(handle) else { return "unknown libpq error" }
        return String(cString: message).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static func execute(_ query: PostgresQuery, on handle: OpaquePointer) throws(PostgresError) -> PostgresRows {
        let result = withCStringArray(query.binds) { values in
            PQexecParams(handle, query.sql, Int32(query.binds.count), nil, values, nil, nil, 0)
        }
        defer { PQclear(result) }
        return try rows(from: result, handle: handle, sql: query.sql)
    }

    /// Converts a result into rows, or into the error it carries.
    static func rows(from result: OpaquePointer?, handle: OpaquePointer, sql: String) throws(PostgresError) -> PostgresRows {
        guard let result else {
            throw PostgresError(
                code: PQstatus(handle) == CONNECTION_OK ? .server : .connectionLost,
                message: errorMessage(handle), query: sql)
        }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            return extractRows(result)
        default:
            throw serverError(result, handle: handle, sql: sql)
        }
    }

    static func serverError(_ result: OpaquePointer, handle: OpaquePointer, sql: String) -> PostgresError {
        func field(_ code: Character) -> String? {
            guard let value = PQresultErrorField(result, Int32(code.asciiValue!)) else { return nil }
            return String(cString: value)
        }
        let sqlState = field("C").map(SQLState.init(rawValue:))
        let lost = PQstatus(handle) != CONNECTION_OK
        var message = field("M") ?? errorMessage(handle)
        if message.isEmpty { message = "statement failed" }
        return PostgresError(
            code: lost ? .connectionLost : .server, sqlState: sqlState, message: message,
            detail: field("D"), hint: field("H"), query: sql)
    }

    static func extractRows(_ result: OpaquePointer) -> PostgresRows {
        let columnCount = Int(PQnfields(result))
        let rowCount = Int(PQntuples(result))
        let names = (0..<columnCount).map { String(cString: PQfname(result, Int32($0))) }
        let index = ColumnIndex(names: names)
        var rows = [PostgresRow]()
        rows.reserveCapacity(rowCount)
        for row in 0..<rowCount {
            var values = [String?]()
            values.reserveCapacity(columnCount)
            for column in 0..<columnCount {
                if PQgetisnull(result, Int32(row), Int32(column)) == 1 {
                    values.append(nil)
                } else {
                    values.append(String(cString: PQgetvalue(result, Int32(row), Int32(column))))
                }
            }
            rows.append(PostgresRow(columnIndex: index, values: values))
        }
        let affected = PQcmdTuples(result).map { Int(String(cString: $0)) ?? 0 } ?? 0
        return PostgresRows(columns: names, rows: rows, affectedRows: affected)
    }

    static func nextNotification(_ handle: OpaquePointer) -> PostgresNotification? {
        guard let notify = PQnotifies(handle) else { return nil }
        defer { PQfreemem(notify) }
        return PostgresNotification(
            channel: String(cString: notify.pointee.relname),
            payload: String(cString: notify.pointee.extra),
            processID: notify.pointee.be_pid)
    }

    /// `poll(2)` on the connection's socket; true when it is readable.
    static func waitReadable(_ handle: OpaquePointer, milliseconds: Int32) throws(PostgresError) -> Bool {
        let socket = PQsocket(handle)
        guard socket >= 0 else { throw PostgresError(code: .connectionLost, message: "connection has no socket") }
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        while true {
            let ready = poll(&descriptor, 1, milliseconds)
            if ready < 0 && errno == EINTR { continue }
            if ready < 0 { throw PostgresError(code: .connectionLost, message: "poll failed: errno \(errno)") }
            return ready > 0
        }
    }

    static func runPipeline(_ queries: [PostgresQuery], on handle: OpaquePointer) throws(PostgresError) -> [PostgresRows] {
        guard PQenterPipelineMode(handle) == 1 else {
            throw PostgresError(code: .invalidState, message: errorMessage(handle))
        }
        defer { PQexitPipelineMode(handle) }
        // Non-blocking while sending, so a full socket buffer cannot deadlock us
        // against a server that is busy writing results we have not read yet.
        PQsetnonblocking(handle, 1)
        for query in queries {
            let sent = withCStringArray(query.binds) { values in
                PQsendQueryParams(handle, query.sql, Int32(query.binds.count), nil, values, nil, nil, 0)
            }
            guard sent == 1 else {
                PQsetnonblocking(handle, 0)
                throw PostgresError(code: .connectionLost, message: errorMessage(handle), query: query.sql)
            }
        }
        guard PQpipelineSync(handle) == 1 else {
            PQsetnonblocking(handle, 0)
            throw PostgresError(code: .connectionLost, message: errorMessage(handle))
        }
        while true {
            let flushed = PQflush(handle)
            if flushed == 0 { break }
            if flushed < 0 {
                PQsetnonblocking(handle, 0)
                throw PostgresError(code: .connectionLost, message: errorMessage(handle))
            }
            var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN | POLLOUT), revents: 0)
            _ = poll(&descriptor, 1, -1)
            if descriptor.revents & Int16(POLLIN) != 0, PQconsumeInput(handle) != 1 {
                PQsetnonblocking(handle, 0)
                throw PostgresError(code: .connectionLost, message: errorMessage(handle))
            }
        }
        PQsetnonblocking(handle, 0)

        var outputs = [PostgresRows]()
        outputs.reserveCapacity(queries.count)
        var firstError: PostgresError?
        for query in queries {
            var rows = PostgresRows(columns: [], rows: [], affectedRows: 0)
            while let result = PQgetResult(handle) {
                defer { PQclear(result) }
                switch PQresultStatus(result) {
                case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
                    rows = extractRows(result)
                case PGRES_PIPELINE_ABORTED:
                    break
                default:
                    if firstError == nil { firstError = serverError(result, handle: handle, sql: query.sql) }
                }
            }
            outputs.append(rows)
        }
        // Drain up to and including the sync point.
        while let result = PQgetResult(handle) {
            let status = PQresultStatus(result)
            PQclear(result)
            if status == PGRES_PIPELINE_SYNC { break }
        }
        if PQstatus(handle) != CONNECTION_OK {
            throw PostgresError(code: .connectionLost, message: errorMessage(handle))
        }
        if let firstError { throw firstError }
        return outputs
    }
}

/// Passes bind values as C strings valid only inside `body`.
func withCStringArray<R>(_ values: [String?], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
    let copies: [UnsafeMutablePointer<CChar>?] = values.map { $0.map { strdup($0) } }
    defer { for copy in copies { free(copy) } }
    return body(copies.map { $0.map { UnsafePointer($0) } })
}
