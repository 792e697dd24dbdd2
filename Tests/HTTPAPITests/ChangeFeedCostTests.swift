import Foundation
import HummingbirdTesting
import JSON
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
import Testing

/// A read of the feed examines a bounded window of the order, whatever the
/// filter: a `types` filter matching nothing costs the same small read each
/// time and still moves the cursor to the end.
@Suite("Change feed cost", .timeLimit(.minutes(3)))
struct ChangeFeedCostTests {
    static let total = 20_000

    @Test func aTypesFilterMatchingNothingMakesProgressAtConstantCostPerRead() async throws {
        try await ChangeFixture.with { client, fixture in
            try await fixture.insertChanges(Self.total, type: "renewed", subscribers: 50)
            // Wait until all are visible (older transactions of the cluster ended).
            #expect(try await pageToTheEnd(client, limit: 1000, expected: Self.total).count == Self.total)

            let window = ChangeFeedReader.examinedPerRead
            let started = ContinuousClock.now
            let first = try await client.get("/v1/changes?types=refunded&limit=100", key: Keys.support)
            let firstRead = ContinuousClock.now - started
            #expect(first.status == .ok)
            #expect(first.json["changes"]?.array.isEmpty == true)
            let moved = try #require(first.json["nextCursor"]?.string)
            #expect(moved != ChangeCursor.start.token, "the cursor moved past what was examined")
            print("one read of types=refunded over \(Self.total) changes of another type: \(firstRead)")

            // Paging with the filter reaches the end in ceil(total / window) reads, then stays.
            var cursor = "", reads = 0
            while reads <= Self.total / window + 5 {
                let page = try await client.get("/v1/changes?types=refunded&limit=100&after=\(cursor)", key: Keys.support)
                #expect(page.json["changes"]?.array.isEmpty == true)
                let next = try #require(page.json["nextCursor"]?.string)
                if next == cursor { break }
                cursor = next
                reads += 1
            }
            #expect(reads == (Self.total + window - 1) / window, "\(reads) reads that moved the cursor")

            // A change of the wanted type after all of them is found from that cursor.
            try await fixture.insertChanges(1, type: "refunded", subscribers: 1, prefix: "late", sequenceBase: 1_000_000)
            let found = try await pageToTheEnd(client, limit: 100, query: "&types=refunded", expected: 1)
            #expect(found == ["late-0"])

            // A subscriber filter reads that subscriber's changes, not the whole order.
            let one = try await pageToTheEnd(client, limit: 1000, query: "&subscriberId=sub-7", expected: Self.total / 50)
            #expect(one.count == Self.total / 50)
        }
    }

    /// A page keeps at most `limit` changes and ends at its last one: a
    /// filter keeping some changes of each window loses none of them.
    @Test func aFilteredPageEndsAtItsLastChangeAndLosesNothing() async throws {
        try await ChangeFixture.with { client, fixture in
            try await fixture.insertChanges(2_500, type: "renewed", subscribers: 5, everyNth: (7, "refunded"))
            let wanted = try await fixture.changes().filter { $0.type == "refunded" }.map(\.id)
            #expect(wanted.count == 2_500 / 7 + 1)
            for limit in [1, 7, 50, 1000] {
                let pulled = try await pageToTheEnd(client, limit: limit, query: "&types=refunded", expected: wanted.count)
                #expect(pulled == wanted, "limit \(limit)")
            }
        }
    }

    /// A filtered long-poll woken by changes it does not want waits on from
    /// past them (its answer's cursor has moved), and answers at once when a
    /// wanted one comes.
    @Test func aFilteredLongPollWaitsOnPastChangesItDoesNotWant() async throws {
        try await ChangeFixture.with { client, fixture in
            let start = try #require(try await client.get("/v1/changes?types=refunded", key: Keys.support).json["nextCursor"]?.string)
            let clock = ContinuousClock()
            let began = clock.now
            async let held = client.get("/v1/changes?types=refunded&wait=3&after=\(start)", key: Keys.support)
            try await Task.sleep(for: .milliseconds(500))
            try await fixture.insertChanges(5, type: "renewed", subscribers: 1)
            try await fixture.pool.query("SELECT pg_notify('subledger_changes', '')")
            let answer = try await held
            #expect(clock.now - began >= .milliseconds(2800), "held for the whole wait")
            #expect(answer.json["changes"]?.array.isEmpty == true)
            let moved = try #require(answer.json["nextCursor"]?.string)
            #expect(moved != start, "the cursor moved past the changes examined")

            async let wanted = client.get("/v1/changes?types=refunded&wait=10&after=\(moved)", key: Keys.support)
            try await Task.sleep(for: .milliseconds(500))
            let published = clock.now
            try await fixture.insertChanges(1, type: "refunded", subscribers: 1, prefix: "wanted", sequenceBase: 1000)
            try await fixture.pool.query("SELECT pg_notify('subledger_changes', '')")
            let found = try await wanted
            #expect(found.json["changes"]?.array.compactMap { $0["id"]?.string } == ["wanted-0"])
            #expect(clock.now - published < .seconds(2))
        }
    }
}

extension ChangeFixture {
    /// Inserts `count` changes straight into the feed, in batches of 1000
    /// transactions (ids `<prefix>-<n>`), subscribers `sub-<n % subscribers>`;
    /// every `everyNth.0`-th has the type `everyNth.1`.
    func insertChanges(_ count: Int, type: String, subscribers: Int, prefix: String = "c",
                       everyNth: (Int, String)? = nil, sequenceBase: Int = 0) async throws {
        var start = 0
        while start < count {
            let end = min(count, start + 1000)
            try await pool.query("""
                INSERT INTO changes (id, subscriber_id, sequence, type, environment, recorded_at, body)
                SELECT \(prefix)::text || '-' || n, 'sub-' || (n % \(subscribers)::bigint), n + 1 + \(sequenceBase)::bigint,
                       CASE WHEN \(everyNth?.0 ?? 0)::bigint > 0 AND n % greatest(\(everyNth?.0 ?? 1)::bigint, 1) = 0
                            THEN \(everyNth?.1 ?? type)::text ELSE \(type)::text END,
                       'Production', now(),
                       jsonb_build_object('id', \(prefix)::text || '-' || n, 'type', \(type)::text, 'sequence', n + 1)
                FROM generate_series(\(start)::bigint, \(end - 1)::bigint) AS n
                """)
            start = end
        }
    }
}
