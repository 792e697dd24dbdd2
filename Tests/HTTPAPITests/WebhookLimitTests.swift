import Foundation
import Hummingbird
import HummingbirdTesting
import Ledger
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
@testable import HTTPAPI
import Testing

/// The bounds of webhooks: how many endpoints, how long sent deliveries are
/// kept, how a failing endpoint is paused.
@Suite("Webhook limits", .timeLimit(.minutes(3)))
struct WebhookLimitTests {
    /// The 51st registration answers 409 `webhook_limit_reached`; the
    /// reminder webhook does not count; after a deletion there is room again.
    @Test func atMostFiftyEndpoints() async throws {
        try await ChangeFixture.with { client, fixture in
            try await ReminderWebhook.register(ReminderWebhook(url: "http://127.0.0.1:9/reminders", secret: "s"), pool: fixture.pool)
            var ids: [String] = []
            for index in 0..<WebhookStore.maximumEndpoints {
                let created = try await client.post("/v1/webhooks", #"{"url": "http://127.0.0.1:9/hook/\#(index)"}"#, key: Keys.admin)
                #expect(created.status == .created, "\(index): \(created.text)")
                ids.append(created.json["id"]?.string ?? "")
            }
            let refused = try await client.post("/v1/webhooks", #"{"url": "http://127.0.0.1:9/hook/more"}"#, key: Keys.admin)
            #expect(refused.status == .conflict && refused.error.code == ErrorCode.webhookLimitReached.rawValue, "\(refused.text)")
            let deleted = try await client.execute(uri: "/v1/webhooks/\(ids[7])", method: .delete, headers: Keys.bearer(Keys.admin))
            #expect(deleted.status == .noContent)
            #expect(try await client.post("/v1/webhooks", #"{"url": "http://127.0.0.1:9/hook/again"}"#, key: Keys.admin).status == .created)
            #expect(try await client.post("/v1/webhooks", #"{"url": "http://127.0.0.1:9/hook/over"}"#, key: Keys.admin).status == .conflict)
        }
    }

    /// Sent deliveries older than the retention are deleted; recent ones,
    /// pending and failed ones are kept.
    @Test func sentDeliveriesArePrunedAfterTheRetention() async throws {
        try await ChangeFixture.with { client, fixture in
            let created = try await client.post("/v1/webhooks", #"{"url": "http://127.0.0.1:9/hook"}"#, key: Keys.admin)
            let id = try #require(created.json["id"]?.string)
            try await fixture.pool.query("""
                INSERT INTO webhook_deliveries (endpoint_id, change_id, subscriber_id, sequence, status, sent_at)
                SELECT \(id), 'old-' || n, 'p' || n, 1, 'sent', now() - interval '31 days' FROM generate_series(1, 2500) AS n
                """)
            try await fixture.pool.query("""
                INSERT INTO webhook_deliveries (endpoint_id, change_id, subscriber_id, sequence, status, sent_at, next_attempt_at)
                VALUES (\(id), 'recent', 'q', 1, 'sent', now() - interval '29 days', now()),
                       (\(id), 'failed', 'r', 1, 'failed', NULL, now()),
                       (\(id), 'pending', 's', 1, 'pending', NULL, now() + interval '1 hour')
                """)
            var settings = fixture.dispatcher().settings
            settings.pruneBatch = 1000
            let dispatcher = ChangeDispatcher(pool: fixture.pool, conninfo: fixture.pool.configuration.conninfo, settings: settings)
            #expect(await dispatcher.prune() == 1000)
            #expect(await dispatcher.prune() == 1000)
            #expect(await dispatcher.prune() == 500)
            #expect(await dispatcher.prune() == 0)
            let left = try await fixture.pool.query("SELECT change_id FROM webhook_deliveries ORDER BY change_id")
                .map { try $0.decode(String.self, at: 0) }
            #expect(left == ["failed", "pending", "recent"])
        }
    }

    /// An endpoint failing every attempt is paused after `threshold`
    /// consecutive failures (its deliveries, retried every 100 ms otherwise,
    /// get no attempt during the pause and stay pending), then tried once
    /// (half-open) and paused again for twice as long. Another endpoint is
    /// served meanwhile.
    @Test func aFailingEndpointIsPausedAndTriedAgainAfterThePause() async throws {
        try await ChangeFixture.with { client, fixture in
            let failing = ChangeReceiver(failuresPerID: 1_000_000)
            let healthy = ChangeReceiver()
            try await withChangeReceiver(failing) { failingURL in
                try await withChangeReceiver(healthy) { healthyURL in
                    #expect(try await client.post("/v1/webhooks", #"{"url": "\#(failingURL)"}"#, key: Keys.admin).status == .created)
                    #expect(try await client.post("/v1/webhooks", #"{"url": "\#(healthyURL)"}"#, key: Keys.admin).status == .created)
                    for index in 0..<8 {
                        #expect(try await client.post("/v1/subscribers/br-\(index)/events",
                                                      purchaseJSON("br\(index)", product: "com.example.level2")).status == .created)
                    }
                    let breaker = WebhookLanes.BreakerSettings(threshold: 5, firstPause: .seconds(3), maximumPause: .seconds(60))
                    let running = Task { await fixture.loopingDispatcher(breaker: breaker, firstRetry: .milliseconds(100)).runUntilCancelled() }
                    defer { running.cancel() }
                    try await fixture.project()
                    let total = try await fixture.changes().count
                    let started = ContinuousClock.now
                    while await failing.requests.count < 5, ContinuousClock.now - started < .seconds(20) {
                        try await Task.sleep(for: .milliseconds(20))
                    }
                    try await Task.sleep(for: .milliseconds(300))
                    let whenPaused = await failing.requests.count
                    #expect(whenPaused >= 5, "the pause came after the threshold: \(whenPaused)")
                    try await Task.sleep(for: .seconds(2))
                    #expect(await failing.requests.count == whenPaused, "attempts were made during the pause")
                    // The healthy endpoint got everything meanwhile.
                    while await healthy.acceptedIDs.count < total, ContinuousClock.now - started < .seconds(20) {
                        try await Task.sleep(for: .milliseconds(20))
                    }
                    #expect(await healthy.acceptedIDs.count == total)
                    // After the pause: one probe, which fails, then a pause of 6 s.
                    try await Task.sleep(for: .seconds(2))
                    #expect(await failing.requests.count == whenPaused + 1, "one delivery tried after the pause")
                    try await Task.sleep(for: .seconds(2))
                    #expect(await failing.requests.count == whenPaused + 1, "paused again, longer")
                    let pending = try await fixture.pool.query("""
                        SELECT count(*) FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
                        WHERE w.url = \(failingURL) AND d.status = 'pending'
                        """).first!.decode(Int.self, at: 0)
                    #expect(pending == total, "every delivery of the paused endpoint is still pending")
                }
            }
        }
    }
}
