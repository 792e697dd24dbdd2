import CLibPQ
import Foundation
import Logging

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
    private var sessionLostFlag = false
    private var closed = false
    /// The job whose statement is on the wire, so a cancel reaches only it.
    private var runningJob: UInt64?
    private var nextJob: UInt64 = 0
    public let logger: Logger
    /// The connection's socket, fixed for its life (libpq opens it once).
    private let socket: Int32
    /// Statements prepared on this session (used by jobs on `executor` only).
    let prepared = PreparedStatements()

    /// How many exchanges with the server (a statement, or a pipeline of
    /// them) this connection has run: what tests and the benchmark count to
    /// show that a batch costs a constant number of round trips.
    public var roundTrips: UInt64 { lock.withLock { nextJob } }

    private init(handle: OpaquePointer, executor: BlockingExecutor, logger: Logger) {
        self.handle = handle
        self.executor = executor
        self.cancelHandle = PQgetCancel(handle)
        self.socket = PQsocket(handle)
        self.logger = logger
    }

    deinit {
        // Nothing else can hold the handle now: jobs retain `self` while they run.
        if let cancelHandle { PQfreeCancel(cancelHandle) }
        if let handle { PQfinish(handle) }
        executor.stop()
    }

    /// Connects with a `postgresql://` URL or a `key=value` conninfo string and
    /// sets `sessionTimeouts` on the session (by default, none).
    public static func connect(
        to conninfo: String, sessionTimeouts: SessionTimeouts = SessionTimeouts(),
        logger: Logger = Logger(label: "subledger.postgres")
    ) async throws -> Connection {
        // Fix the output formats the decoders rely on, whatever the server's defaults.
        // No JIT: every statement here is short, and a plan costed high on
        // stale statistics (a table filled since its last ANALYZE) was
        // compiled for ~600 ms before a 0.1 ms run.
        let setup = (["SET DateStyle = 'ISO'", "SET TimeZone = 'UTC'", "SET client_encoding = 'UTF8'", "SET jit = off"]
            + sessionTimeouts.setCommands).joined(separator: "; ")
        let executor = BlockingExecutor(name: "postgres-connection")
        // A connect that fails must end the thread too: nothing else will, and
        // a pool retrying through an outage would leak one per attempt.
        do {
            let handle = try await open(conninfo, setup: setup, on: executor)
            return Connection(handle: handle, executor: executor, logger: logger)
        } catch {
            executor.stop()
            throw error
        }
    }

    /// Opens the `PGconn` and runs the session setup, on the connection's thread.
    private static func open(_ conninfo: String, setup: String, on executor: BlockingExecutor) async throws -> OpaquePointer {
        try await withCheckedThrowingContinuation { continuation in
            let accepted = executor.submit {
                guard let handle = Connection.connectWithDefaults(conninfo) else {
                    continuation.resume(throwing: PostgresError(code: .connectionFailed, message: "libpq could not allocate a connection"))
                    return
                }
                guard PQstatus(handle) == CONNECTION_OK else {
                    let message = Connection.errorMessage(handle)
                    PQfinish(handle)
                    continuation.resume(throwing: PostgresError(code: .connectionFailed, sqlState: PostgresError.connectRefusal(message),
                                                                message: message))
                    return
                }
                // Server notices go nowhere rather than to stderr.
                PQsetNoticeProcessor(handle, { _, _ in }, nil)
                let result = PQexec(handle, setup)
                let ok = PQresultStatus(result) == PGRES_COMMAND_OK
                PQclear(result)
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

    /// Whether an idle connection is inside a transaction block (open, or
    /// aborted and refusing every statement with 25P02 until it ends): libpq's
    /// own record of the server's last word, read without a round trip. The
    /// pool never keeps or lends such a connection.
    public var isInTransaction: Bool {
        // Read only between jobs: a running one may be changing it.
        guard lock.withLock({ runningJob == nil }), let handle else { return false }
        return PQtransactionStatus(handle) != PQTRANS_IDLE
    }

    /// Checks, without a round trip, that an idle connection was not closed by
    /// the server (a restart sends a termination message and closes the socket)
    /// and is not inside a transaction (`isInTransaction`).
    /// Runs on the caller's thread, not the connection's: an idle connection
    /// has no job running, and a zero-timeout `poll(2)` of its socket does not
    /// block (the pool asks at every lease, so this saves two thread hops each).
    public func isUsableForReuse() -> Bool {
        guard lock.withLock({ !closed && !brokenFlag && runningJob == nil }), !isInTransaction else { return false }
        // Readable: an idle pooled connection has nothing to hear; if the
        // server spoke, it was to end the session (shutdown, restart, kill).
        return (try? Connection.waitReadable(socket: socket, milliseconds: 0)) == false
    }

    /// The server process serving this connection (for `pg_terminate_backend` in tests and ops).
    public func backendProcessID() async throws -> Int32 {
        try await run { handle throws(PostgresError) in PQbackendPID(handle) }
    }

    // MARK: Running on the connection's thread

    /// Runs `body` on the connection's thread with the live handle; the
    /// statement is cancelled if the task is (unless `ignoringCancellation`).
    func run<T: Sendable>(
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
                        // A read-only refusal on a pool's connection is a demoted
                        // primary (a failover): the session is not trusted again.
                        if error.isConnectionBroken || error.sqlState == .readOnlySQLTransaction
                            || PQstatus(handle) != CONNECTION_OK { markBroken(sessionLost: true) }
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

    func markBroken(sessionLost: Bool = false) {
        lock.withLock {
            brokenFlag = true
            if sessionLost { sessionLostFlag = true }
        }
    }

    /// True once a statement found the server gone, shutting down or no
    /// longer a primary (not merely cancelled): the pool's other idle
    /// connections to it are suspect too.
    public var isSessionLost: Bool {
        lock.withLock { sessionLostFlag }
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

    /// `poll(2)` on the connection's socket; true when it is readable.
    static func waitReadable(_ handle: OpaquePointer, milliseconds: Int32) throws(PostgresError) -> Bool {
        try waitReadable(socket: PQsocket(handle), milliseconds: milliseconds)
    }

    static func waitReadable(socket: Int32, milliseconds: Int32) throws(PostgresError) -> Bool {
        guard socket >= 0 else { throw PostgresError(code: .connectionLost, message: "connection has no socket") }
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        while true {
            let ready = poll(&descriptor, 1, milliseconds)
            if ready < 0 && errno == EINTR { continue }
            if ready < 0 { throw PostgresError(code: .connectionLost, message: "poll failed: errno \(errno)") }
            return ready > 0
        }
    }
}

/// Passes strings to libpq as C strings valid only inside `body`: for conninfo
/// keywords. Statement parameters go through `Connection.withParameters`,
/// which does not cut a value at a NUL.
func withCStringArray<R>(_ values: [String?], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
    let copies: [UnsafeMutablePointer<CChar>?] = values.map { $0.map { strdup($0) } }
    defer { for copy in copies { free(copy) } }
    return body(copies.map { $0.map { UnsafePointer($0) } })
}
