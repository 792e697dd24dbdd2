import Foundation
import Ledger
import Postgres

/// The SQL of App Store reconciliation (sql/0006_appstore_reconcile.sql):
/// checkpoints per environment and the leader's advisory lock.
enum ReconcileStore {
    struct Checkpoint: Sendable, Equatable {
        var reconciledUntil: Date
        var lastWindowStart: Date
        var lastWindowEnd: Date
        var lastSuccessAt: Date
        var recoveredTotal: Int64
    }

    static func checkpoint(_ environment: Ledger.Environment, on connection: Connection) async throws -> Checkpoint? {
        let rows = try await connection.query("""
            SELECT reconciled_until, last_window_start, last_window_end, last_success_at, recovered_total
            FROM appstore_reconcile_checkpoints WHERE environment = \(environment.rawValue)
            """)
        return try rows.first.map {
            Checkpoint(reconciledUntil: try $0.decode(Date.self, at: 0), lastWindowStart: try $0.decode(Date.self, at: 1),
                       lastWindowEnd: try $0.decode(Date.self, at: 2), lastSuccessAt: try $0.decode(Date.self, at: 3),
                       recoveredTotal: try $0.decode(Int64.self, at: 4))
        }
    }

    /// Records a successful window. The checkpoint moves to its end only when
    /// the window began at or before it (no gap left behind), and never back.
    @discardableResult
    static func save(_ environment: Ledger.Environment, windowStart: Date, windowEnd: Date, recovered: Int,
                     on connection: Connection) async throws -> Date {
        let rows = try await connection.query("""
            INSERT INTO appstore_reconcile_checkpoints AS c
                (environment, reconciled_until, last_window_start, last_window_end, recovered_total)
            VALUES (\(environment.rawValue), \(windowEnd), \(windowStart), \(windowEnd), \(Int64(recovered)))
            ON CONFLICT (environment) DO UPDATE SET
                reconciled_until = CASE WHEN EXCLUDED.last_window_start <= c.reconciled_until
                                        THEN greatest(c.reconciled_until, EXCLUDED.reconciled_until)
                                        ELSE c.reconciled_until END,
                last_window_start = EXCLUDED.last_window_start,
                last_window_end = EXCLUDED.last_window_end,
                last_success_at = now(),
                recovered_total = c.recovered_total + EXCLUDED.recovered_total
            RETURNING reconciled_until
            """)
        return try rows.first!.decode(Date.self, at: 0)
    }

    /// Tries to become the one reconciler of the fleet: a session advisory
    /// lock, held while `connection` lives.
    static func tryLeadership(on connection: Connection) async throws -> Bool {
        try await connection.tryLock(.appStoreReconcile)
    }

    /// A round trip on the leader's connection, so a lost session (and lock) is noticed.
    static func ping(_ connection: Connection) async throws {
        try await connection.query("SELECT 1")
    }
}
