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

    public init(
        conninfo: String, maximumConnections: Int = 16, leaseTimeout: Duration = .seconds(10),
        sessionTimeouts: SessionTimeouts = SessionTimeouts()
    ) {
        precondition(maximumConnections > 0, "a pool needs at least one connection")
        self.conninfo = conninfo
        self.maximumConnections = maximumConnections
        self.leaseTimeout = leaseTimeout
        self.sessionTimeouts = sessionTimeouts
    }
}

/// A bounded pool of connections.
///
/// Connections are opened on demand up to `maximumConnections`. A connection
/// that broke while leased, or that the server closed while idle, is discarded
/// so the next lease opens a fresh one: the service outlives a database restart.
public actor ConnectionPool: Service {
    public nonisolated let configuration: PoolConfiguration
    private let logger: Logger
    private var idle: [Connection] = []
    private var openCount = 0
    private var waiters: [Waiter] = []
    private var nextWaiterID = 0
    private var isClosed = false

    private struct Waiter {
        let id: Int
        let continuation: CheckedContinuation<Connection?, Error>
        let timer: Task<Void, Never>
    }

    public init(configuration: PoolConfiguration, logger: Logger = Logger(label: "subledger.postgres.pool")) {
        self.configuration = configuration
        self.logger = logger
    }

    /// Leases a connection for `body` and returns it afterwards.
    public nonisolated func withConnection<T>(_ body: (Connection) async throws -> T) async throws -> T {
        let connection = try await lease()
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
                logger.debug("discarding a connection the server closed", metadata: ["db.pool.open": "\(openCount)"])
                discard(connection)
                continue
            }
            if openCount < configuration.maximumConnections {
                openCount += 1
                do {
                    return try await Connection.connect(
                        to: configuration.conninfo, sessionTimeouts: configuration.sessionTimeouts, logger: logger)
                } catch {
                    openCount -= 1
                    wakeWaiterToRetry()
                    throw error
                }
            }
            if let connection = try await waitForRelease() { return connection }
        }
    }

    /// Returns a leased connection; a broken one is closed and its slot freed.
    public func release(_ connection: Connection) {
        if connection.isBroken || isClosed {
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
