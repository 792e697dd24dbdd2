import EventStore
import Foundation
import Postgres

/// What `/health` reports: whether the database answers, and how far each
/// projection lags behind the event log.
public struct HealthStore: Sendable {
    let pool: ConnectionPool
    let store: EventStore
    let consumers: [String]

    public init(_ dependencies: AppDependencies) {
        pool = dependencies.pool
        store = dependencies.store
        consumers = dependencies.consumers
    }

    /// The lag of every consumer, in events; throws when the database is away.
    public func projectionLags() async throws -> [String: Int64] {
        try await pool.query("SELECT 1")
        var lags = [String: Int64]()
        for consumer in consumers {
            lags[consumer] = try await store.lag(of: consumer)
        }
        return lags
    }
}
