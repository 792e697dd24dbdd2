import Foundation
import Logging
import Postgres

/// The consistency tokens of write answers: the primary's WAL position read
/// after the write committed, so a standby that has replayed up to it has
/// the write (`ReadConsistency`).
///
/// Concurrent writes share one read of the position: a caller joins a read
/// that started after it arrived (which follows its commit), else waits for
/// the one running and starts the next; under load that is one short
/// statement per group of answers, not one per answer.
public actor CommitPositions {
    let pool: ConnectionPool
    private var started: UInt64 = 0
    private var running: (task: Task<WALPosition, any Error>, number: UInt64)?

    public init(pool: ConnectionPool) {
        self.pool = pool
    }

    /// A position at or past every commit that finished before this call.
    public func current() async throws -> WALPosition {
        let arrival = started
        while true {
            if let running {
                if running.number > arrival { return try await running.task.value }
                _ = try? await running.task.value
                continue
            }
            started += 1
            let number = started
            let pool = pool
            let task = Task { () async throws -> WALPosition in
                do {
                    let position = try await Self.read(pool)
                    self.finished(number)
                    return position
                } catch {
                    self.finished(number)
                    throw error
                }
            }
            running = (task, number)
            return try await task.value
        }
    }

    private func finished(_ number: UInt64) {
        if running?.number == number { running = nil }
    }

    /// The primary's position of WAL written: past the end of every commit
    /// record it has acknowledged.
    /// Asked again for up to `failoverRetry` while no primary answers or the
    /// database is at a limit: a write that went through just after a
    /// failover is answered with the new primary's position, which covers it.
    static func read(_ pool: ConnectionPool, failoverRetry: Duration = .seconds(3)) async throws -> WALPosition {
        let deadline = ContinuousClock.now + failoverRetry
        var answer: PostgresRows
        while true {
            do {
                answer = try await pool.query("SELECT pg_current_wal_lsn()::text")
                break
            } catch let error as PostgresError where (LedgerWriter.isFailover(error) || error.unavailability != nil)
                && ContinuousClock.now < deadline {
                // Also a full pool or a refused connect: right after a
                // failover every instance's retried writes crowd the pool.
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        let rows = answer
        guard let text = try rows.first?.decode(String.self, at: 0), let position = WALPosition(text) else {
            throw PostgresError(code: .decoding, message: "pg_current_wal_lsn() answered no position")
        }
        return position
    }
}
