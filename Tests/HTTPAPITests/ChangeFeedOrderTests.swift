import Foundation
import HummingbirdTesting
import JSON
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
import Testing

/// The feed's global order is numeric in the transaction id: paging across a
/// power of ten (…999 → …1000, where the text "1000" sorts before "999")
/// loses and repeats nothing.
@Suite("Change feed order", .timeLimit(.minutes(3)))
struct ChangeFeedOrderTests {
    @Test func pagingAcrossATransactionIDPowerOfTenSeesEveryChangeOnceInOrder() async throws {
        try await ChangeFixture.with { client, fixture in
            // A few change transactions just below a power of ten (other
            // tests of the cluster take ids meanwhile: if they carried ours
            // past it, the next power of ten), then to just below it, and on.
            let start = Date() - 5 * 86_400
            var subscriber = 0
            func writeOne() async throws {
                subscriber += 1
                #expect(try await client.post("/v1/subscribers/s\(subscriber)/events",
                                              purchaseJSON("t\(subscriber)", at: RFC3339.format(start))).status == .created)
                try await fixture.project()
            }
            var power: UInt64 = 1000
            for _ in 0..<3 {
                let current = try await fixture.currentTransactionID()
                while power < current + 300 { power *= 10 }
                try await fixture.burnTransactionIDs(upTo: power - 200)
                for _ in 0..<3 { try await writeOne() }
                if try await fixture.changeTransactionIDs().filter({ $0 < power }).count >= 3 { break }
            }
            if try await fixture.currentTransactionID() < power - 6 { try await fixture.burnTransactionIDs(upTo: power - 6) }
            while try await fixture.changeTransactionIDs().filter({ $0 >= power }).count < 12 {
                try await writeOne()
                #expect(subscriber < 300, "the transaction ids never crossed \(power)")
                if subscriber >= 300 { return }
            }
            let transactions = try await fixture.changeTransactionIDs()
            #expect(transactions.contains { $0 < power } && transactions.contains { $0 >= power })
            #expect(transactions.filter { $0 < power }.count >= 2, "several transactions below \(power): \(transactions)")

            let stored = try await fixture.changes().map(\.id)
            for limit in [1, 7, 50, 1000] {
                let pulled = try await pageToTheEnd(client, limit: limit, expected: stored.count)
                #expect(pulled == stored, "limit \(limit): \(pulled.count) pulled of \(stored.count), every change once and in order")
                #expect(Set(pulled).count == pulled.count, "limit \(limit): a change came twice")
            }
        }
    }
}

extension ChangeFixture {
    func currentTransactionID() async throws -> UInt64 {
        UInt64(try await pool.query("SELECT pg_current_xact_id()::text").first!.decode(String.self, at: 0)) ?? 0
    }

    /// Consumes transaction ids until the next one handed out is at least
    /// `target`: each subtransaction that writes takes an id of its own from
    /// the cluster's counter, so one statement burns a thousand.
    func burnTransactionIDs(upTo target: UInt64) async throws {
        try await pool.query("CREATE TABLE IF NOT EXISTS burnt_ids (n int)")
        while try await currentTransactionID() < target {
            let count = min(1000, Int(target - (try await currentTransactionID())))
            guard count > 1 else { break }
            try await pool.query("""
                DO $$ BEGIN
                  FOR i IN 1..\(unsafeRaw: String(count - 1)) LOOP
                    BEGIN INSERT INTO burnt_ids VALUES (i); EXCEPTION WHEN others THEN NULL; END;
                  END LOOP;
                  DELETE FROM burnt_ids;
                END $$
                """)
        }
    }

    /// The distinct transaction ids of the stored changes.
    func changeTransactionIDs() async throws -> [UInt64] {
        try await pool.query("SELECT DISTINCT transaction_id::text FROM changes").map {
            UInt64(try $0.decode(String.self, at: 0)) ?? 0
        }
    }
}

/// Every id `GET /v1/changes` hands out from the beginning, with `limit`,
/// until `expected` came and a page is empty (a page may be empty for a
/// moment while another transaction of the cluster runs: then it waits).
func pageToTheEnd(_ client: some TestClientProtocol, limit: Int, query: String = "", expected: Int) async throws -> [String] {
    var cursor = ""
    var ids: [String] = []
    var reads = 0
    while reads < 100_000 {
        reads += 1
        let wait = ids.count < expected ? 2 : 0
        let response = try await client.get("/v1/changes?limit=\(limit)&wait=\(wait)&after=\(cursor)\(query)", key: Keys.support)
        #expect(response.status == .ok, "\(response.text)")
        guard let next = response.json["nextCursor"]?.string else {
            Issue.record("nextCursor missing")
            return ids
        }
        let page = response.json["changes"]?.array ?? []
        ids += page.compactMap { $0["id"]?.string }
        if page.isEmpty && next == cursor {
            if wait > 0 { Issue.record("the feed held \(ids.count) changes, \(expected) expected") }
            return ids
        }
        cursor = next
    }
    Issue.record("paging did not end")
    return ids
}
