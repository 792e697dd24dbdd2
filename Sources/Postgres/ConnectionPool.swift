import Foundation
import Logging
import ServiceLifecycle

/// How a pool connects and how large it grows.
public struct PoolConfiguration: Sendable {
    /// A `postgresql://` URL or `key=value` conninfo string.
    public var conninfo: String
    public var maximumConnections: Int
    /// How long `lease` waits for a free connection before failing with `.poolTimeout`.
    public var leaseTimeout: Duration
    /// Set on every connection the pool opens; by default the server's own.
    public var sessionTimeouts: SessionTimeouts
    /// The longest pause between two connect attempts after a failed one
    /// (they start at a tenth of it and double): short, so a new primary is
    /// found within it of accepting connections.
    public var reconnectBackoff: Duration
    /// How long a standby pool waits for its server to replay a read's
    /// `ReadConsistency.minimumPosition` before the primary answers instead.
    public var replayWait: Duration

    public init(
        conninfo: String, maximumConnections: Int = 16, leaseTimeout: Duration = .seconds(10),
        sessionTimeouts: SessionTimeouts = SessionTimeouts(), reconnectBackoff: Duration = .milliseconds(250),
        replayWait: Duration = .milliseconds(200)
    ) {
        precondition(maximumConnections > 0, "a pool needs at least one connection")
        self.conninfo = conninfo
        self.maximumConnections = maximumConnections
        self.leaseTimeout = leaseTimeout
        self.sessionTimeouts = sessionTimeouts
        self.reconnectBackoff = reconnectBackoff
        self.replayWait = replayWait
    }
}

/// A bounded pool of connections.
///
/// Connections are opened on demand up to `maximumConnections`. A connection
/// that broke while leased, or that the server closed while idle, is discarded
/// so the next lease opens a fresh one: the service outlives a database restart.
///
/// Failover: a connection that lost its session (the server went away, shut
/// down, or refused a write as a demoted primary) makes the pool drop every
/// idle connection too, so the next lease connects afresh through the
/// conninfo's host list (`target_session_attrs=read-write` finds the new
/// primary). While connecting fails, one attempt runs at a time, the next
/// after a pause growing to `reconnectBackoff`; meanwhile leases fail at
/// once with the last connect error (a 503 at the HTTP edge).
///
/// A pool made with a `primary` is a standby pool (`DATABASE_READ_URL`): a
/// read needing a position its server has not replayed (see
/// `ReadConsistency`) waits up to `replayWait`, then runs on the primary; so
/// does a read while no standby can be reached.
public actor ConnectionPool: Service {
    public nonisolated let configuration: PoolConfiguration
    /// For a standby pool, the pool of the primary that answers the reads it cannot.
    public nonisolated let primary: ConnectionPool?
    private let logger: Logger
    private var idle: [Connection] = []
    private var openCount = 0
    private var waiters: [Waiter] = []
    private var nextWaiterID = 0
    private var isClosed = false
    /// Connect attempts that failed in a row, the last one's error, when the
    /// next may start, and whether one is running.
    private var failedConnects = 0
    private var lastConnectError: (any Error)?
    private var reconnectAt: ContinuousClock.Instant?
    private var isConnecting = false
    private var standbyReadsOnPrimary = 0

    private struct Waiter {
        let id: Int
        let continuation: CheckedContinuation<Connection?, Error>
        let timer: Task<Void, Never>
    }

    public init(configuration: PoolConfiguration, primary: ConnectionPool? = nil,
                logger: Logger = Logger(label: "subledger.postgres.pool")) {
        self.configuration = configuration
        self.primary = primary
        self.logger = logger
    }

    /// Leases a connection for `body` and returns it afterwards. On a standby
    /// pool, `body` runs on the primary when the standby cannot serve it.
    public nonisolated func withConnection<T>(_ body: (Connection) async throws -> T) async throws -> T {
        guard let primary else { return try await withLeasedConnection(body) }
        if ReadConsistency.minimumPosition == .primaryOnly {
            await countReadOnPrimary()
            return try await primary.withConnection(body)
        }
        let connection: Connection
        do {
            connection = try await lease()
        } catch let error as PostgresError where error.isConnectionBroken {
            await countReadOnPrimary()
            return try await primary.withConnection(body)
        }
        if let minimum = ReadConsistency.minimumPosition {
            let replayed: Bool
            do {
                replayed = try await Self.waitForReplay(of: minimum, on: connection, within: configuration.replayWait)
            } catch {
                await release(connection)
                throw error
            }
            if !replayed {
                await release(connection)
                await countReadOnPrimary()
                return try await primary.withConnection(body)
            }
        }
        return try await run(body, on: connection)
    }

    private nonisolated func withLeasedConnection<T>(_ body: (Connection) async throws -> T) async throws -> T {
        try await run(body, on: try await lease())
    }

    /// Reads a standby pool handed to the primary (tests, metrics).
    public var readsOnPrimary: Int { standbyReadsOnPrimary }

    private func countReadOnPrimary() { standbyReadsOnPrimary += 1 }

    /// True once the connection's server has replayed the WAL up to
    /// `position` (or is a primary, which has it all); false if not within `wait`.
    static func waitForReplay(of position: WALPosition, on connection: Connection, within wait: Duration) async throws -> Bool {
        let deadline = ContinuousClock.now + wait
        while true {
            let rows = try await connection.query("SELECT pg_last_wal_replay_lsn()::text")
            guard let text = try rows.first?.decode(String?.self, at: 0) else { return true }
            if let replayed = WALPosition(text), replayed >= position { return true }
            if ContinuousClock.now >= deadline { return false }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    private nonisolated func run<T>(_ body: (Connection) async throws -> T, on connection: Connection) async throws -> T {
        do {
            let value = try await body(connection)
            await release(connection)
            return value
        } catch {
            await release(connection)
            throw error
        }
    }

    /// Leases a connection and runs `body` in a transaction on it.
    public nonisolated func withTransaction<T>(
        isolation level: Connection.IsolationLevel = .readCommitted,
        _ body: (Connection) async throws -> T
    ) async throws -> T {
        try await withConnection { connection in
            try await connection.withTransaction(isolation: level, body)
        }
    }

    /// Runs one statement on a leased connection.
    @discardableResult
    public nonisolated func query(_ query: PostgresQuery) async throws -> PostgresRows {
        try await withConnection { try await $0.query(query) }
    }

    /// Takes a connection; pair with `release`.
    public func lease() async throws -> Connection {
        while true {
            try Task.checkCancellation()
            guard !isClosed else { throw PostgresError(code: .poolClosed, message: "the connection pool is closed") }
            if let connection = idle.popLast() {
                if connection.isUsableForReuse() { return connection }
                logger.debug("discarding a connection the server closed or left in a transaction",
                             metadata: ["db.pool.open": "\(openCount)"])
                discard(connection)
                continue
            }
            if openCount < configuration.maximumConnections {
                if failedConnects > 0, let lastConnectError {
                    // The server was unreachable: one attempt at a time, paced.
                    if isConnecting { throw lastConnectError }
                    if let reconnectAt, reconnectAt > ContinuousClock.now {
                        isConnecting = true
                        try? await Task.sleep(until: reconnectAt)
                        isConnecting = false
                        continue
                    }
                }
                openCount += 1
                isConnecting = true
                do {
                    let connection = try await Connection.connect(
                        to: configuration.conninfo, sessionTimeouts: configuration.sessionTimeouts, logger: logger)
                    isConnecting = false
                    if failedConnects > 0 {
                        logger.info("database reachable again", metadata: ["db.connect.failures": "\(failedConnects)"])
                    }
                    failedConnects = 0
                    lastConnectError = nil
                    reconnectAt = nil
                    return connection
                } catch {
                    isConnecting = false
                    openCount -= 1
                    connectFailed(error)
                    wakeWaiterToRetry()
                    throw error
                }
            }
            if let connection = try await waitForRelease() { return connection }
        }
    }

    /// Returns a leased connection; a broken one, or one left inside a
    /// transaction (which would hold its snapshot and locks while idle), is
    /// closed and its slot freed.
    public func release(_ connection: Connection) {
        if connection.isBroken || isClosed || connection.isInTransaction {
            if connection.isSessionLost { dropIdle(reason: "a connection lost its session") }
            discard(connection)
            wakeWaiterToRetry()
            return
        }
        if !waiters.isEmpty {
            let waiter = waiters.removeFirst()
            waiter.timer.cancel()
            waiter.continuation.resume(returning: connection)
        } else {
            idle.append(connection)
        }
    }

    /// Closes idle connections and fails waiters; leased ones close on release.
    public func close() {
        isClosed = true
        for connection in idle { connection.close() }
        openCount -= idle.count
        idle.removeAll()
        for waiter in waiters {
            waiter.timer.cancel()
            waiter.continuation.resume(throwing: PostgresError(code: .poolClosed, message: "the connection pool is closed"))
        }
        waiters.removeAll()
    }

    /// Open connections, leased or idle (for metrics and tests).
    public var openConnections: Int { openCount }

    public func run() async throws {
        try? await gracefulShutdown()
        close()
    }

    /// Closes every idle connection: after one lost its session, the others
    /// are to the same server, which is gone or no longer the primary.
    private func dropIdle(reason: String) {
        guard !idle.isEmpty else { return }
        logger.warning("dropping idle connections", metadata: ["db.pool.idle": "\(idle.count)", "reason": "\(reason)"])
        for connection in idle { connection.close() }
        openCount -= idle.count
        idle.removeAll()
    }

    private func connectFailed(_ error: any Error) {
        failedConnects += 1
        lastConnectError = error
        let first = configuration.reconnectBackoff / 10
        let pause = min(first * (1 << min(failedConnects - 1, 10)), configuration.reconnectBackoff)
        reconnectAt = ContinuousClock.now + pause
        if failedConnects == 1 {
            logger.warning("cannot connect to the database; retrying", metadata: ["error": "\(error)"])
        }
        dropIdle(reason: "a connect attempt failed")
    }

    private func discard(_ connection: Connection) {
        connection.close()
        openCount -= 1
    }

    /// Parks the caller until a connection is released (returned), a slot frees
    /// up (nil: try again), or the lease timeout passes.
    private func waitForRelease() async throws -> Connection? {
        let id = nextWaiterID
        nextWaiterID += 1
        let timeout = configuration.leaseTimeout
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Connection?, Error>) in
                let timer = Task { [weak self] in
                    try? await Task.sleep(for: timeout)
                    guard !Task.isCancelled else { return }
                    await self?.failWaiter(id, with: PostgresError(
                        code: .poolTimeout,
                        message: "no database connection became free within \(timeout) (pool size \(self?.configuration.maximumConnections ?? 0))"))
                }
                waiters.append(Waiter(id: id, continuation: continuation, timer: timer))
            }
        } onCancel: {
            Task { await self.failWaiter(id, with: CancellationError()) }
        }
    }

    private func failWaiter(_ id: Int, with error: Error) {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return }
        let waiter = waiters.remove(at: index)
        waiter.timer.cancel()
        waiter.continuation.resume(throwing: error)
    }

    private func wakeWaiterToRetry() {
        guard !waiters.isEmpty else { return }
        let waiter = waiters.removeFirst()
        waiter.timer.cancel()
        waiter.continuation.resume(returning: nil)
    }
}
