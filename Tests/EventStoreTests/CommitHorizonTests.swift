import Foundation
import Postgres
import Testing
@testable import EventStore

@Suite("Commit horizon")
struct CommitHorizonTests {
    /// Transaction ids of different lengths: the horizon is the numerically
    /// last one, not the last one as text ("9" after "10").
    @Test func theHorizonComparesTransactionIDsAsNumbers() async throws {
        let (store, _) = try await makeStore(poolSize: 2)
        defer { Task { await store.pool.close() } }
        // Ids of transactions long finished in any cluster (normal ids start at 3).
        let stream = try await store.pool.query("INSERT INTO streams (stream_id) VALUES ('horizon') RETURNING number")
            .first!.decode(Int64.self, at: 0)
        for (version, transactionID) in [(1, "9"), (2, "10"), (3, "8")] {
            try await store.pool.query("""
                INSERT INTO events (stream_number, stream_version, event_id, type, data, transaction_id)
                VALUES (\(stream), \(version), \(UUID()), 'happened', '{}', \(transactionID)::xid8)
                """)
        }
        let last = try await store.pool.query("SELECT position FROM events WHERE transaction_id = '10'::xid8")
            .first?.decode(Int64.self, at: 0)
        let horizon = try await store.pool.withConnection { try await store.commitHorizon(on: $0) }
        #expect(horizon == Checkpoint(transactionID: 10, position: try #require(last)))
    }
}
