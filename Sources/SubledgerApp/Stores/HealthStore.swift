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

    public init(_ dependencies: AppDependencies) {
        pool = dependencies.pool
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
