import EventStore
import Foundation
import Hummingbird
import HummingbirdTesting
import JSON
import Ledger
import Logging
import Postgres
import Prometheus
@testable import SubledgerApp
import SubledgerAppTesting
@testable import HTTPAPI
import TestSupport
import Testing

/// What the change feed promises about time, metrics and first deploys,
/// checked against a real database (and the wall clock where it says so).
@Suite("Change feed proofs", .timeLimit(.minutes(3)))
struct ChangeFeedProofTests {
    /// A Sandbox non-renewing pass's end is an instant the sweeper wakes for
    /// (it used to look at the Production periods only, so the Sandbox pass
    /// never lost its entitlement by time).
    @Test func aSandboxPassEndingIsPublishedByTheSweeper() async throws {
        try await ChangeFixture.with { client, fixture in
            let start = Date(timeIntervalSince1970: (Date() - 86_400).timeIntervalSince1970.rounded())
            let end = start + 30 * 86_400
            let created = try await client.post("/v1/subscribers/sandy/events",
                                                purchaseJSON("sb1", at: RFC3339.format(start), environment: "Sandbox"))
            #expect(created.status == .created, "\(created.text)")
            try await fixture.project()
            #expect(try await fixture.changes().map(\.type) == ["purchased", "entitlement_gained"])
            let next = try await fixture.pool.query("SELECT next_transition_at FROM change_subscribers WHERE subscriber_id = 'sandy'")
                .first?.decode(Date?.self, at: 0)
            #expect(next == end, "the pass's end is the next instant: \(String(describing: next))")

            #expect(try await fixture.sweeper(now: { end - 1 }).sweepOnce() == 0)
            #expect(try await fixture.sweeper(now: { end + 30 }).sweepOnce() == 1)
            let changes = try await fixture.changes()
            try #require(changes.map(\.type) == ["purchased", "entitlement_gained", "entitlement_lost"])
            let lost = try #require(JSONValue(json: Data(changes[2].body.utf8)))
            #expect(lost["environment"]?.string == "Sandbox" && lost["at"]?.string == RFC3339.format(end))
            #expect(lost["data"]?["reason"]?.string == "ended")
        }
    }

    /// On the wall clock: a subscription ending by time alone, with no event
    /// at its end, shows as `entitlement_lost` in the pull feed soon after
    /// the end (the sweeper wakes at the instant it knows of, and looks at
    /// least every interval), once.
    @Test func aSubscriptionEndingByTimeAloneIsPublishedWithinTheBound() async throws {
        try await ChangeFixture.with { client, fixture in
            let expires = Date(timeIntervalSince1970: (Date() + 4).timeIntervalSince1970.rounded(.up))
            #expect(try await client.post("/v1/subscribers/walt/events",
                                          monthlyJSON("w1", at: expires - 86_400, expires: expires)).status == .created)
            try await fixture.project()
            let interval = Duration.seconds(2)
            let sweeper = ChangeTimeSweeper(pool: fixture.pool, catalog: fixture.dependencies.catalog.catalog, interval: interval)
            let running = Task { await sweeper.runUntilCancelled() }
            defer { running.cancel() }

            let first = try await client.get("/v1/changes?types=entitlement_lost", key: Keys.support)
            #expect(first.json["changes"]?.array.isEmpty == true, "nothing lost before the end")
            var cursor = try #require(first.json["nextCursor"]?.string)
            var lost: [JSONValue] = []
            let deadline = ContinuousClock.now + .seconds(60)
            while lost.isEmpty, ContinuousClock.now < deadline {
                let page = try await client.get("/v1/changes?types=entitlement_lost&wait=5&after=\(cursor)", key: Keys.support)
                lost += page.json["changes"]?.array ?? []
                cursor = page.json["nextCursor"]?.string ?? cursor
            }
            let seen = Date()
            let change = try #require(lost.first, "no entitlement_lost within a minute of the end")
            #expect(change["at"]?.string == RFC3339.format(expires), "at the end itself")
            #expect(change["data"]?["reason"]?.string == "ended")
            // The contract's bound: a minute. (Alone it takes about the
            // interval at most; beside every other suite on two cores, 12 s
            // has been seen.)
            #expect(seen.timeIntervalSince(expires) < 60, "published \(seen.timeIntervalSince(expires)) s after the end")

            try await Task.sleep(for: interval * 2)
            #expect(try await fixture.changes().filter { $0.type == "entitlement_lost" }.count == 1, "once")
        }
    }

    @Test func theSweepIntervalIsConfigured() async throws {
        #expect(try SubledgerConfiguration(environment: [:]).changesSweepInterval == .seconds(15))
        #expect(try SubledgerConfiguration(environment: ["SUBLEDGER_CHANGES_SWEEP_INTERVAL": "3"]).changesSweepInterval == .seconds(3))
        for bad in ["0", "61", "x", "1.5"] {
            #expect(throws: ConfigurationError.self, "\(bad)") {
                try SubledgerConfiguration(environment: ["SUBLEDGER_CHANGES_SWEEP_INTERVAL": bad])
            }
        }
        var dependencies = try await makeDependencies()
        dependencies.configuration.changesSweepInterval = .seconds(3)
        let sweepers = makeChangeFeedServices(dependencies, conninfo: "").compactMap { $0 as? ChangeTimeSweeper }
        #expect(sweepers.map(\.interval) == [.seconds(3)], "serve's sweeper runs at the configured interval")
        await dependencies.pool.close()
    }

    /// Through `GET /metrics`: deliveries by outcome, the oldest pending
    /// delivery's age per endpoint and the feed's lag move with what happens.
    /// (Counters are shared with the suites running meanwhile: they are
    /// checked to grow by at least what this test caused.)
    @Test func theChangeFeedMetricsMove() async throws {
        var dependencies = try await makeDependencies()
        dependencies.metrics = SharedMetrics.registry
        let fixture = ChangeFixture(dependencies: dependencies)
        let receiver = ChangeReceiver(failuresPerID: 1)
        try await withRouter(dependencies) { client in
            try await withChangeReceiver(receiver) { url in
                func metric(_ name: String, _ joined: String = "") async throws -> Double? {
                    let labels = joined.split(separator: "\u{0}").map(String.init)
                    await ChangeMetrics.refresh(pool: fixture.pool, logger: Logger(label: "metrics-test"))
                    let text = try await client.get("/metrics", key: nil).text
                    return text.split(separator: "\n").first { $0.hasPrefix(name) && labels.allSatisfy($0.contains) }
                        .flatMap { $0.split(separator: " ").last }.flatMap { Double($0) }
                }
                // The gauges are the process's: a suite running meanwhile may
                // refresh them from its own database between this test's
                // refresh and read. Refreshed and read again, a few times.
                func eventually(_ name: String, _ labels: String..., holds: (Double?) -> Bool) async throws -> Double? {
                    var value: Double?
                    for _ in 0..<10 {
                        value = try await metric(name, labels.joined(separator: "\u{0}"))
                        if holds(value) { return value }
                        try await Task.sleep(for: .milliseconds(50))
                    }
                    return value
                }
                let created = try await client.post("/v1/webhooks", #"{"url": "\#(url)"}"#, key: Keys.admin)
                let webhook = try #require(created.json["id"]?.string)
                // The consumer has a checkpoint (it read a first event); then
                // events it has not read yet.
                #expect(try await client.post("/v1/subscribers/m0/events", purchaseJSON("m0-first", product: "com.example.coins.100")).status == .created)
                try await fixture.project()
                for index in 0..<3 {
                    #expect(try await client.post("/v1/subscribers/m\(index)/events", purchaseJSON("m\(index)")).status == .created)
                }
                try await Task.sleep(for: .milliseconds(1200))
                #expect(try await eventually("subledger_change_feed_lag_seconds") { $0 ?? 0 >= 1 } ?? 0 >= 1, "the feed is behind")
                try await fixture.project()
                #expect(try await eventually("subledger_change_feed_lag_seconds") { $0 == 0 } == 0, "caught up")

                let stored = try await fixture.changes()
                try await Task.sleep(for: .milliseconds(1200))
                let oldest = try await metric("subledger_webhook_oldest_pending_seconds", "webhook=\"\(webhook)\"")
                #expect(oldest ?? 0 >= 1, "pending deliveries age: \(String(describing: oldest))")

                let before = (success: try await metric("subledger_webhook_deliveries_total", "outcome=\"success\"") ?? 0,
                              failure: try await metric("subledger_webhook_deliveries_total", "outcome=\"failure\"") ?? 0,
                              gaveUp: try await metric("subledger_webhook_deliveries_total", "outcome=\"gave_up\"") ?? 0)
                // A dispatcher whose retry period is over at once: every first failure gives up.
                var givingUp = fixture.dispatcher()
                givingUp.settings.retryFor = .zero
                _ = try await givingUp.dispatchDue()
                let failed = try await client.get("/v1/webhooks/\(webhook)/deliveries?status=failed", key: Keys.admin)
                let failedIDs = failed.json["deliveries"]?.array.compactMap { $0["id"]?.string } ?? []
                #expect(failedIDs.count == 3, "one first change per subscriber gave up: \(failed.text)")
                #expect(try await metric("subledger_webhook_deliveries_total", "outcome=\"gave_up\"") ?? 0 >= before.gaveUp + 3)
                for id in failedIDs {
                    #expect(try await client.post("/v1/webhooks/\(webhook)/deliveries/\(id)/retry", "", key: Keys.admin).status == .ok)
                }
                try await fixture.dispatch(fixture.dispatcher()) { await receiver.acceptedIDs.count == stored.count }
                #expect(try await metric("subledger_webhook_deliveries_total", "outcome=\"success\"") ?? 0 >= before.success + Double(stored.count))
                #expect(try await metric("subledger_webhook_deliveries_total", "outcome=\"failure\"") ?? 0 >= before.failure + Double(stored.count))
                #expect(try await eventually("subledger_webhook_oldest_pending_seconds", "webhook=\"\(webhook)\"") { $0 == 0 } == 0, "nothing pending")
            }
        }
    }

    /// A first start against an existing log: the consumer publishes the
    /// history as changes, and an endpoint registered afterwards receives
    /// only what is published after it was created, not that backlog.
    @Test func anEndpointReceivesOnlyChangesPublishedAfterItWasCreated() async throws {
        try await ChangeFixture.with { client, fixture in
            for index in 0..<4 {
                #expect(try await client.post("/v1/subscribers/h\(index)/events",
                                              purchaseJSON("h\(index)", at: RFC3339.format(Date() - 86_400))).status == .created)
            }
            try await fixture.project()
            let history = try await fixture.changes()
            #expect(history.count == 8, "the history is in the feed: \(history.map(\.type))")
            let receiver = ChangeReceiver()
            try await withChangeReceiver(receiver) { url in
                #expect(try await client.post("/v1/webhooks", #"{"url": "\#(url)"}"#, key: Keys.admin).status == .created)
                #expect(try await client.post("/v1/subscribers/h0/events",
                                              purchaseJSON("h0c", product: "com.example.coins.100")).status == .created)
                try await fixture.project()
                let fresh = try await fixture.changes().filter { change in !history.contains { $0.id == change.id } }
                #expect(fresh.count == 1)
                try await fixture.dispatch(fixture.dispatcher()) { try await fixture.pendingDeliveries() == 0 }
                #expect(await receiver.requests.map(\.id) == fresh.map(\.id), "only the change published after the endpoint")
                #expect(await receiver.requests.first?.sequence == 3, "in the subscriber's sequence after the history")
            }
        }
    }
}
