import Foundation
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
import Testing

/// The owners lookup every write makes keeps one plan per connection
/// (`subledger_owners`, sql/0018): that plan must probe the indexes even when
/// it was made while the ownership tables held a few rows, and stay right as
/// they grow.
@Suite("Owners lookup plan")
struct OwnersLookupPlanTests {
    @Test func aPlanMadeOnNearlyEmptyTablesStillProbesTheIndexesOnceTheyGrow() async throws {
        let dependencies = try await makeDependencies(poolSize: 1)
        defer { Task { await dependencies.pool.close() } }
        try await dependencies.pool.withConnection { connection in
            // Owners o<i> of s<i>, each with a renewal t<i> recorded in the log
            // as the writer stores it (a transaction record and its keys,
            // sql/0044).
            func own(_ numbers: ClosedRange<Int>) async throws {
                try await connection.query("""
                    INSERT INTO transaction_owners (original_transaction_id, subscriber_id)
                    SELECT 'o' || i, 's' || i FROM generate_series(\(numbers.lowerBound)::integer, \(numbers.upperBound)::integer) i
                    """)
                try await connection.query("""
                    INSERT INTO events (stream_number, stream_version, event_id, type, schema_version, data, lookup_key, lookup_group)
                    SELECT 1000000 + i, 1, gen_random_uuid(), 'renewed', 2,
                           to_jsonb(format('i%s:%so%s:%sp1:xb1:0s6:import', length('t' || i), 't' || i, length('o' || i), 'o' || i)),
                           't' || i, 'o' || i
                    FROM generate_series(\(numbers.lowerBound)::integer, \(numbers.upperBound)::integer) i
                    """)
            }
            // A new deployment: three owners, analyzed, as autovacuum would.
            try await own(1...3)
            try await connection.query("ANALYZE transaction_owners")
            try await connection.query("ANALYZE events")
            // The connection runs the lookup often enough to keep a generic plan.
            for _ in 0..<12 {
                #expect(try await OwnershipStore.owners(of: ["t1", "o2"], on: connection) == ["o1": "s1", "o2": "s2"])
            }
            // The tables grow, with no ANALYZE since.
            try await own(4...20_000)
            let scans = try await connection.withTransaction { connection in
                #expect(try await OwnershipStore.owners(of: ["t15000", "o19999", "nobody"], on: connection)
                    == ["o15000": "s15000", "o19999": "s19999"])
                return try await connection.query("""
                    SELECT relname, seq_scan, coalesce(idx_scan, 0) FROM pg_stat_xact_user_tables
                    WHERE relname IN ('transaction_owners', 'events') ORDER BY relname
                    """).map { (try $0.decode(String.self, at: 0), try $0.decode(Int64.self, at: 1), try $0.decode(Int64.self, at: 2)) }
            }
            #expect(scans.count == 2, "both tables were read: \(scans)")
            for (table, sequential, index) in scans {
                #expect(sequential == 0, "\(table) was scanned whole \(sequential) times")
                #expect(index > 0, "\(table) was probed by its index")
            }
        }
    }
}
