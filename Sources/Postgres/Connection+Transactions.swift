// Transactions as a scope, so no path out of `body` leaves one open on a
// connection that goes back to the pool.
extension Connection {
    /// Runs `body` in a transaction: committed when it returns, rolled back when
    /// it throws or the task is cancelled.
    public func withTransaction<T>(
        isolation level: IsolationLevel = .readCommitted,
        _ body: (Connection) async throws -> T
    ) async throws -> T {
        do {
            try await query(PostgresQuery(unsafeSQL: "BEGIN ISOLATION LEVEL \(level.rawValue)"))
        } catch {
            // A statement timeout can strike BEGIN after it opened the
            // block, which it leaves open and aborted.
            await rollbackQuietly()
            throw error
        }
        let value: T
        do {
            value = try await body(self)
            try Task.checkCancellation()
        } catch {
            await rollbackQuietly()
            throw error
        }
        do {
            try await run(ignoringCancellation: true) { handle throws(PostgresError) in
                _ = try Connection.execute("COMMIT", on: handle)
            }
        } catch {
            // A COMMIT the server cancelled before it ran (a statement
            // timeout) leaves the transaction open and aborted: end it, or
            // the connection goes back to the pool refusing every statement.
            await rollbackQuietly()
            throw error
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
}
