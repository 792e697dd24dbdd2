/// A share of a pool's connections for one kind of work: at most `limit` of
/// them at once, so that work, however much of it arrives, leaves the rest
/// of the pool to everything else. A caller past the share waits up to the
/// pool's lease timeout, then fails as a full pool does (`.poolTimeout`).
public actor PoolShare {
    public nonisolated let pool: ConnectionPool
    public nonisolated let limit: Int
    private var inUse = 0
    private var waiters: [Waiter] = []
    private var nextWaiterID = 0

    private struct Waiter {
        let id: Int
        let continuation: CheckedContinuation<Void, Error>
        let timer: Task<Void, Never>
    }

    public init(of pool: ConnectionPool, limit: Int) {
        precondition(limit > 0, "a share needs at least one connection")
        self.pool = pool
        self.limit = limit
    }

    /// Leases a connection of the share for `body`.
    public nonisolated func withConnection<T>(_ body: (Connection) async throws -> T) async throws -> T {
        try await enter()
        do {
            let value = try await pool.withConnection(body)
            await leave()
            return value
        } catch {
            await leave()
            throw error
        }
    }

    /// Runs one statement on a connection of the share.
    @discardableResult
    public nonisolated func query(_ query: PostgresQuery) async throws -> PostgresRows {
        try await withConnection { try await $0.query(query) }
    }

    /// Connections of the share leased now (tests).
    public var leased: Int { inUse }

    private func enter() async throws {
        try Task.checkCancellation()
        if inUse < limit {
            inUse += 1
            return
        }
        let id = nextWaiterID
        nextWaiterID += 1
        let timeout = pool.configuration.leaseTimeout
        let limit = limit
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
                let timer = Task { [weak self] in
                    try? await Task.sleep(for: timeout)
                    guard !Task.isCancelled else { return }
                    await self?.fail(id, with: PostgresError(
                        code: .poolTimeout, message: "all \(limit) connections of this share stayed busy for \(timeout)"))
                }
                waiters.append(Waiter(id: id, continuation: continuation, timer: timer))
            }
        } onCancel: {
            Task { await self.fail(id, with: CancellationError()) }
        }
    }

    /// Hands the place to the first waiter, or frees it.
    private func leave() {
        guard !waiters.isEmpty else {
            inUse -= 1
            return
        }
        let waiter = waiters.removeFirst()
        waiter.timer.cancel()
        waiter.continuation.resume()
    }

    private func fail(_ id: Int, with error: Error) {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return }
        let waiter = waiters.remove(at: index)
        waiter.timer.cancel()
        waiter.continuation.resume(throwing: error)
    }
}
