import Foundation
import Logging
import Ledger
import Postgres
import ServiceLifecycle

/// Writes the audit trail's buffer to `audit_entries` every `flushInterval`
/// (and once more at graceful shutdown), and deletes entries older than the
/// retention every `pruneInterval` (one instance at a time:
/// `AuditStore.prune`).
public struct AuditService: Service {
    let trail: AuditTrail
    let pool: ConnectionPool
    /// nil: entries are kept for ever.
    let retention: AuditRetention?
    let logger: Logger
    public var flushInterval: Duration = .milliseconds(250)
    public var pruneInterval: Duration = .seconds(3600)
    let now: @Sendable () -> Date

    public init(trail: AuditTrail, pool: ConnectionPool, retention: AuditRetention?, logger: Logger,
                now: @escaping @Sendable () -> Date = { Date() }) {
        self.trail = trail
        self.pool = pool
        self.retention = retention
        self.logger = logger
        self.now = now
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            let clock = ContinuousClock()
            var nextPrune = clock.now
            // Rounds log their own failures; only cancellation ends them.
            try? await repeatRounds {
                await flush()
                if clock.now >= nextPrune {
                    await prune()
                    nextPrune = clock.now.advanced(by: pruneInterval)
                }
                return flushInterval
            }
        }
        // Shutting down: what the last requests recorded is written before the pool closes.
        await flush()
    }

    private func flush() async {
        guard trail.pendingCount > 0 else { return }
        do {
            try await trail.flush(to: pool)
        } catch {
            logger.warning("audit entries not written; retrying", metadata: ["error": "\(String(reflecting: error))"])
        }
    }

    /// One pruning round; returns how many entries it deleted (nil: another instance pruned).
    @discardableResult
    public func prune() async -> Int? {
        guard let retention else { return 0 }
        do {
            let deleted = try await AuditStore(pool: pool).prune(olderThan: retention.cutoff(now: now()))
            if let deleted, deleted > 0 { logger.info("audit entries pruned", metadata: ["audit.deleted": "\(deleted)"]) }
            return deleted
        } catch {
            logger.warning("audit pruning failed; next round tries again", metadata: ["error": "\(String(reflecting: error))"])
            return nil
        }
    }
}

/// How long audit entries are kept (`SUBLEDGER_AUDIT_RETENTION`, an ISO
/// 8601 duration of days, weeks, months or years).
public struct AuditRetention: Sendable, Equatable {
    public var duration: ISODuration

    public init(_ duration: ISODuration) { self.duration = duration }

    /// Entries recorded before this are deleted.
    public func cutoff(now: Date) -> Date { duration.subtracted(from: now) }
}
