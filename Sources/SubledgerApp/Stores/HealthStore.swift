import EventStore
import Foundation
import Postgres

/// What `/health` reports: whether the database answers, and how far each
/// projection lags behind the event log.
///
/// Probes are shared: one runs at a time and its answer serves every caller
/// that came while it ran, so however often `/health` is called it holds at
/// most one connection of the pool the writes use.
public struct HealthStore: Sendable {
    let pool: ConnectionPool
    let store: EventStore
    let consumers: [String]
    let cache: HealthCache
    let standbyPool: ConnectionPool?

    public init(_ dependencies: AppDependencies) {
        pool = dependencies.pool
        standbyPool = dependencies.standbyPool
        store = dependencies.store
        consumers = dependencies.consumers
        cache = HealthCache()
    }

    /// The lag of every consumer, in events; throws when the database is away.
    public func projectionLags() async throws -> [String: Int64] {
        try await cache.value { [pool, store, consumers] in
            try await pool.query("SELECT 1")
            var lags = [String: Int64]()
            for consumer in consumers {
                lags[consumer] = try await store.lag(of: consumer)
            }
            return lags
        }
    }

    /// How many probes reached the database (for tests and `/metrics`).
    public var probes: Int { get async { await cache.probes } }
}

/// One probe in flight at a time; callers that come while it runs share it.
actor HealthCache {
    private var running: Task<[String: Int64], any Error>?
    private(set) var probes = 0

    func value(_ probe: @escaping @Sendable () async throws -> [String: Int64]) async throws -> [String: Int64] {
        if let running { return try await running.value }
        probes += 1
        let task = Task { try await probe() }
        running = task
        defer { running = nil }
        return try await task.value
    }
}

/// How far the database's standbys are behind it.
public struct ReplicationStatus: Sendable, Encodable {
    /// One streaming standby as the primary sees it (`pg_stat_replication`).
    public struct Standby: Sendable, Encodable {
        /// Its `application_name` (pg_auto_failover names it after the node).
        public var name: String
        /// `streaming`, `catchup`, …
        public var state: String
        /// `sync`, `quorum`, `potential` or `async`.
        public var sync: String
        /// WAL written by the primary and not yet replayed there.
        public var lagBytes: Int64
        /// The replay lag PostgreSQL measured; 0 when it is caught up.
        public var replayLagSeconds: Double
    }

    public var standbys: [Standby]
    /// With `DATABASE_READ_URL`: the WAL the standby answering reads has not
    /// replayed yet (nil without one, or when it cannot be reached).
    public var readStandbyLagBytes: Int64?
}

extension HealthStore {
    /// The standbys' lag; throws when the primary is away. The primary's
    /// `pg_stat_replication` shows positions to superusers and `pg_monitor`.
    public func replication() async throws -> ReplicationStatus {
        let rows = try await pool.query("""
            SELECT COALESCE(application_name, ''), COALESCE(state, ''), COALESCE(sync_state, ''),
                   COALESCE(pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn), 0)::int8,
                   COALESCE(extract(epoch FROM replay_lag), 0)::float8, pg_current_wal_lsn()::text
            FROM pg_stat_replication ORDER BY application_name
            """)
        var status = ReplicationStatus(standbys: [], readStandbyLagBytes: nil)
        for row in rows {
            status.standbys.append(ReplicationStatus.Standby(
                name: try row.decode(String.self, at: 0), state: try row.decode(String.self, at: 1),
                sync: try row.decode(String.self, at: 2), lagBytes: try row.decode(Int64.self, at: 3),
                replayLagSeconds: try row.decode(Double.self, at: 4)))
        }
        guard let standbyPool else { return status }
        let primaryRows = try await pool.query("SELECT pg_current_wal_lsn()::text")
        guard let primaryText = try primaryRows.first?.decode(String.self, at: 0), let primary = WALPosition(primaryText) else {
            return status
        }
        // Asked of the standby pool's own connection, not its fallback to the primary.
        if let connection = try? await standbyPool.lease() {
            defer { Task { await standbyPool.release(connection) } }
            do {
                let rows = try await connection.query("SELECT pg_last_wal_replay_lsn()::text")
                // NULL: the server is not in recovery (a promoted standby), so it has everything.
                let replayed = try rows.first?.decode(String?.self, at: 0)
                let position = replayed.flatMap { WALPosition($0) } ?? primary
                status.readStandbyLagBytes = position >= primary ? 0 : Int64(primary.value - position.value)
            } catch {
                // The standby is away: its lag is unknown (left out).
            }
        }
        return status
    }
}
