import EventStore
import Foundation
import Ledger
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
@testable import HTTPAPI
import Testing

@Suite("Expiry sweeper")
struct ReminderSweeperTests {
    @Test func twoSweepersAppendOneExpiryEvent() async throws {
        try await ReminderFixture.with { fixture in
            let now = Date()
            // Two runs of coverage, both ended: 70 to 40 days ago, and 35 to 5 days ago.
            try await fixture.append("gus", [ReminderFixture.pass("g1", at: now - 70 * 86_400),
                                             ReminderFixture.pass("g2", at: now - 35 * 86_400)])
            try await fixture.append("hal", [ReminderFixture.pass("h1", at: now - 86_400)])
            try await fixture.project()
            let store = fixture.dependencies.store
            let catalog = fixture.dependencies.catalog.catalog
            let sweepers = (0..<2).map { _ in ExpirySweeper(store: store, catalog: catalog) }
            async let first = sweepers[0].sweepOnce()
            async let second = sweepers[1].sweepOnce()
            let appended = try await first + second
            #expect(appended == 2, "one per coverage end, however many sweepers")

            let expiries = try await fixture.events(type: "expired", of: "gus")
            #expect(expiries.count == 2)
            let ends = try expiries.map { try SubscriberStreams.ledgerEvent($0).event }.compactMap { event -> Date? in
                if case .expired(let fact) = event { fact.expiresDate } else { nil }
            }
            let expected = [now - 40 * 86_400, now - 5 * 86_400]
            #expect(zip(ends.sorted(), expected).allSatisfy { abs($0.timeIntervalSince($1)) < 0.002 })
            #expect(try await fixture.events(type: "expired", of: "hal").isEmpty, "hal's coverage has not ended")

            // Once the projection has seen them, nothing is left to sweep.
            try await fixture.project()
            #expect(try await sweepers[0].sweepOnce() == 0)
            let waiting = try await fixture.dependencies.pool.query("SELECT count(*) FROM reminder_subscribers WHERE next_expiry_at <= now()")
            #expect(try waiting.first?.decode(Int.self, at: 0) == 0)
        }
    }

    /// A subscriber whose stream cannot be read (here an event whose data is
    /// not a purchase) is set aside: the others' expiries are still recorded.
    /// It used to throw on that subscriber first, every round, for everyone.
    @Test func oneUnreadableSubscriberDoesNotStopTheOthersExpiries() async throws {
        try await ReminderFixture.with { fixture in
            let now = Date()
            try await fixture.append("ivy", [ReminderFixture.pass("i1", at: now - 40 * 86_400)])
            try await fixture.project()
            _ = try await fixture.dependencies.store.append(
                to: SubscriberStreams.streamID(for: "aaa-broken"),
                events: [NewEvent(type: "purchased", data: Data(#"{"transactionId": 7}"#.utf8))])
            try await fixture.dependencies.pool.query("""
                INSERT INTO reminder_subscribers (subscriber_id, stream_version, clock, next_expiry_at)
                VALUES ('aaa-broken', 1, now(), now() - interval '100 days')
                """)
            let sweeper = ExpirySweeper(store: fixture.dependencies.store, catalog: fixture.dependencies.catalog.catalog)
            #expect(try await sweeper.sweepOnce() == 1)
            #expect(try await fixture.events(type: "expired", of: "ivy").count == 1)
            let deferred = try await fixture.dependencies.pool.query("""
                SELECT next_expiry_at > now() FROM reminder_subscribers WHERE subscriber_id = 'aaa-broken'
                """)
            #expect(try deferred.first?.decode(Bool.self, at: 0) == true, "set aside until a later round")
        }
    }

    @Test func manySweepersRacingOnManySubscribersStillAppendOnePerEnd() async throws {
        try await ReminderFixture.with { fixture in
            let now = Date()
            for index in 0..<20 {
                try await fixture.append("u\(index)", [ReminderFixture.pass("u\(index)", at: now - 31 * 86_400)])
            }
            try await fixture.project()
            let store = fixture.dependencies.store
            let catalog = fixture.dependencies.catalog.catalog
            let total = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<4 { group.addTask { try await ExpirySweeper(store: store, catalog: catalog).sweepOnce() } }
                return try await group.reduce(0, +)
            }
            #expect(total == 20)
            let stored = try await fixture.dependencies.pool.query("SELECT count(*) FROM events WHERE type = 'expired'")
            #expect(try stored.first?.decode(Int.self, at: 0) == 20)
        }
    }
}
