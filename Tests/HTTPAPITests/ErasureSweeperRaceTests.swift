import EventStore
import Foundation
import JSON
import Hummingbird
import HummingbirdTesting
import Ledger
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
import TestSupport
import Testing

/// The change feed's time sweeper against erasures: whatever the order, no
/// change, delivery or progress row names an erased subscriber's id
/// afterwards (`ChangeTimeSweeper.keyed`). Each round publishes a
/// subscriber's due reminders (`rem:<id>:…`) while it is being erased.
///
/// A sweeper that locks the subscriber and then waits for its key, or an
/// erasure that does not wait for a sweeper holding the key, hangs or
/// leaks: the time limit turns a hang into a failure.
@Suite("Erasure racing the time sweeper", .timeLimit(.minutes(5)))
struct ErasureSweeperRaceTests {
    /// A subscriber with three reminders (a pass ending in 20 days: P7D,
    /// P1D, P0D) made due now, projected and fed, not yet published.
    static func subscriberWithDueReminders(_ client: some TestClientProtocol, _ fixture: ChangeFixture, round: String) async throws -> String {
        let id = "sweep-\(round)-" + UUID().uuidString.lowercased()
        let bought = RFC3339.format(Date() - 10 * 86_400)
        #expect(try await client.post("/v1/subscribers/\(id)/events", purchaseJSON("t-" + UUID().uuidString, at: bought, device: "d-\(id)")).status == .created)
        let catalog = fixture.dependencies.catalog.catalog
        try await fixture.dependencies.project(ReminderProjection(store: fixture.dependencies.store, catalog: catalog))
        try await fixture.project()
        try await fixture.pool.query("""
            UPDATE reminders SET next_attempt_at = now() WHERE subscriber_id = \(id) AND status = 'pending'
            """)
        return id
    }

    /// What still names `id` in the feed's tables (empty: nothing).
    static func leaks(of id: String, _ pool: ConnectionPool) async throws -> [String] {
        try await pool.query("""
            SELECT 'change ' || id FROM changes
            WHERE subscriber_id = \(id) OR strpos(id, \(id)) > 0 OR strpos(body::text, \(id)) > 0
            UNION ALL
            SELECT 'delivery ' || id::text FROM webhook_deliveries WHERE subscriber_id = \(id) OR strpos(change_id, \(id)) > 0
            UNION ALL
            SELECT 'progress' FROM change_subscribers WHERE subscriber_id = \(id)
            UNION ALL
            SELECT 'reminder ' || id FROM reminders WHERE subscriber_id = \(id)
            """).map { try $0.decode(String.self, at: 0) }
    }

    static func reminderChanges(of id: String, _ pool: ConnectionPool) async throws -> Int {
        try await pool.query("""
            SELECT count(*) FROM changes
            WHERE subscriber_id = \(SubscriberPseudonyms.pseudonym(for: id)) AND type IN ('renewal_reminder', 'expiry_prompt')
              AND starts_with(id, 'rem:' || \(SubscriberPseudonyms.pseudonym(for: id)) || ':')
            """).first!.decode(Int.self, at: 0)
    }

    static func waitUntil(_ condition: @Sendable () async -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while await !condition() {
            guard ContinuousClock.now < deadline else { throw ProjectionTimeout() }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// The sweeper has read the subscriber (its progress and key rows
    /// locked, its reminders folded) and is held before it writes; the
    /// erasure starts, and the sweeper is let go after a while. The erasure
    /// waits for the sweeper's commit at the key row, then rewrites what it
    /// published. Without the sweeper's key lock the erasure rewrote
    /// `changes` first and the sweeper's changes kept the id.
    @Test func aSweeperHeldBetweenItsReadAndItsWriteCannotLeaveTheId() async throws {
        try await ChangeFixture.with { client, fixture in
            #expect(try await client.post("/v1/webhooks", #"{"url": "http://127.0.0.1:9/hook"}"#, key: Keys.admin).status == .created)
            for round in 0..<8 {
                let id = try await Self.subscriberWithDueReminders(client, fixture, round: "held-\(round)")
                let gate = Gate()
                var sweeper = fixture.sweeper()
                sweeper.afterRead = { await gate.pass() }
                let held = sweeper
                let sweep = Task { try await held.sweepOnce() }
                try await Self.waitUntil { await gate.entered >= 1 }
                let erasure = Task { try await client.delete("/v1/subscribers/\(id)", #"{"reason": "race"}"#, key: Keys.admin) }
                try await Task.sleep(for: .milliseconds(Int.random(in: 20...150)))
                await gate.release()
                #expect(try await sweep.value == 1, "round \(round)")
                let erased = try await erasure.value
                #expect(erased.status == .ok, "round \(round): \(erased.text)")
                let leaked = try await Self.leaks(of: id, fixture.pool)
                #expect(leaked == [], "round \(round): \(leaked)")
                #expect(try await Self.reminderChanges(of: id, fixture.pool) == 3, "round \(round): published, under the pseudonym")
            }
        }
    }

    /// The erasure holds the key row (held in its steps); a sweeper round
    /// meanwhile skips the subscriber at once rather than wait (it would
    /// wait holding the progress row the erasure rewrites: a deadlock),
    /// and nothing of the subscriber is published afterwards.
    @Test func aSweeperSkipsASubscriberBeingErased() async throws {
        try await ChangeFixture.with { client, fixture in
            #expect(try await client.post("/v1/webhooks", #"{"url": "http://127.0.0.1:9/hook"}"#, key: Keys.admin).status == .created)
            for round in 0..<4 {
                let id = try await Self.subscriberWithDueReminders(client, fixture, round: "skip-\(round)")
                let gate = Gate()
                var service = ErasureService(fixture.dependencies)
                service.steps = ErasureSteps([ErasureStep(name: "held") { _, _, _ in await gate.pass() }] + ErasureSteps.standard.steps)
                let erasing = service
                let erasure = Task {
                    try await erasing.erase(id, request: ErasureRequest(reason: "race"), by: ActorStamp(role: "admin", keyFingerprint: "test"))
                }
                try await Self.waitUntil { await gate.entered >= 1 }
                let started = ContinuousClock.now
                #expect(try await fixture.sweeper().sweepOnce() == 0, "round \(round): the subscriber is skipped")
                #expect(ContinuousClock.now - started < .seconds(5), "round \(round): without waiting for the erasure")
                await gate.release()
                _ = try await erasure.value
                let sweeper = fixture.sweeper()
                while try await sweeper.sweepOnce() > 0 {}
                let leaked = try await Self.leaks(of: id, fixture.pool)
                #expect(leaked == [], "round \(round): \(leaked)")
                #expect(try await Self.reminderChanges(of: id, fixture.pool) == 0, "round \(round): nothing published for it")
            }
        }
    }

    /// Sweepers running in a loop while subscribers are erased at random
    /// moments: every erasure succeeds, nothing names an erased id.
    @Test func sweepersLoopingBesideErasuresLeaveNoId() async throws {
        try await ChangeFixture.with { client, fixture in
            #expect(try await client.post("/v1/webhooks", #"{"url": "http://127.0.0.1:9/hook"}"#, key: Keys.admin).status == .created)
            for round in 0..<10 {
                let id = try await Self.subscriberWithDueReminders(client, fixture, round: "loop-\(round)")
                let status = try await withThrowingTaskGroup(of: Int.self) { group in
                    for _ in 0..<2 {
                        group.addTask {
                            let sweeper = fixture.sweeper()
                            for _ in 0..<20 {
                                _ = try await sweeper.sweepOnce()
                                try await Task.sleep(for: .milliseconds(Int.random(in: 0...3)))
                            }
                            return 0
                        }
                    }
                    group.addTask {
                        try await Task.sleep(for: .milliseconds(Int.random(in: 0...40)))
                        return Int(try await client.delete("/v1/subscribers/\(id)", #"{"reason": "race"}"#, key: Keys.admin).status.code)
                    }
                    return try await group.reduce(0, +)
                }
                #expect(status == 200, "round \(round)")
                let leaked = try await Self.leaks(of: id, fixture.pool)
                #expect(leaked == [], "round \(round): \(leaked)")
            }
        }
    }
}
