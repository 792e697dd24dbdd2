import EventStore
import Foundation
import Hummingbird
import HummingbirdTesting
import Ledger
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
import TestSupport
import Testing

/// Erasure against the change dispatcher, which claims a delivery in a
/// transaction of its own and POSTs it after that commits: a delivery
/// claimed just before an erasure is posted before the erasure commits, or
/// never (`ChangeRows.settleDeliveries`); the subscriber's other deliveries
/// are stopped and rewritten.
@Suite("Erasure and webhook deliveries in flight", .timeLimit(.minutes(5)))
struct ErasureDeliveryTests {
    actor Flag {
        private(set) var isSet = false
        func set() { isSet = true }
    }

    /// A subscriber with published changes and a webhook endpoint at
    /// `url`, their deliveries pending.
    static func subscriberWithDeliveries(_ client: some TestClientProtocol, _ fixture: ChangeFixture, url: String) async throws -> String {
        #expect(try await client.post("/v1/webhooks", #"{"url": "\#(url)"}"#, key: Keys.admin).status == .created)
        let id = "posted-" + UUID().uuidString.lowercased()
        #expect(try await client.post("/v1/subscribers/\(id)/events", purchaseJSON("t1-\(id)", device: "d-\(id)")).status == .created)
        #expect(try await client.post("/v1/subscribers/\(id)/events", purchaseJSON("t2-\(id)", at: "2025-03-01T00:00:00Z")).status == .created)
        try await fixture.project()
        #expect(try await fixture.pendingDeliveries() >= 2)
        return id
    }

    static func deliveries(_ pool: ConnectionPool) async throws -> [(subscriberID: String, status: String, error: String?)] {
        try await pool.query("SELECT subscriber_id, status, last_error FROM webhook_deliveries ORDER BY id").map {
            (try $0.decode(String.self, at: 0), try $0.decode(String.self, at: 1), try $0.decode(String?.self, at: 2))
        }
    }

    /// The dispatcher claims the subscriber's first delivery and is slow to
    /// post it; the erasure comes meanwhile and waits. The POST (the old
    /// body, sent before the erasure) then goes, and the erasure commits
    /// after it; nothing is sent after. Without the wait the erasure
    /// answered at once and the body naming the subscriber was posted after.
    @Test func aDeliveryClaimedBeforeTheErasureIsPostedBeforeItCommits() async throws {
        try await ChangeFixture.with { client, fixture in
            let receiver = ChangeReceiver()
            try await withChangeReceiver(receiver) { url in
                let id = try await Self.subscriberWithDeliveries(client, fixture, url: url)
                let dispatcher = fixture.dispatcher()
                let claims = try await dispatcher.claim()
                #expect(claims.count == 1 && claims.first?.subscriberID == id)
                let finished = Flag()
                let erasure = Task {
                    let response = try await client.delete("/v1/subscribers/\(id)", #"{"reason": "claimed"}"#, key: Keys.admin)
                    await finished.set()
                    return response
                }
                try await Task.sleep(for: .milliseconds(800))
                #expect(await !finished.isSet, "the erasure waits for the delivery being posted")
                for claimed in claims { await dispatcher.deliver(claimed) }
                let erased = try await erasure.value
                #expect(erased.status == .ok, "\(erased.text)")
                let posted = await receiver.requests
                #expect(posted.count == 1 && posted.first?.subscriberID == id, "posted before the erasure")

                try await fixture.pool.query("UPDATE webhook_deliveries SET next_attempt_at = now()")
                #expect(try await dispatcher.dispatchDue() == 0, "nothing of the subscriber is pending")
                #expect(await receiver.requests.count == 1)
                let pseudonym = SubscriberPseudonyms.pseudonym(for: id)
                let rows = try await Self.deliveries(fixture.pool)
                #expect(rows.allSatisfy { $0.subscriberID == pseudonym }, "\(rows)")
                #expect(rows.first?.status == "sent")
                #expect(rows.dropFirst().allSatisfy { $0.status == "failed" && $0.error == WebhookDeliveryStore.erasedDeliveryError }, "\(rows)")
            }
        }
    }

    /// A claim whose dispatcher died: the erasure waits for the lease to
    /// run out (no POST can outlast it), answering 503 `contention` if that
    /// is longer than it waits; the delivery is then stopped, never sent.
    @Test func aClaimWhoseDispatcherDiedHoldsTheErasureUntilItsLease() async throws {
        try await ChangeFixture.with { client, fixture in
            let receiver = ChangeReceiver()
            try await withChangeReceiver(receiver) { url in
                let id = try await Self.subscriberWithDeliveries(client, fixture, url: url)
                var dispatcher = fixture.dispatcher()
                dispatcher.settings.lease = .seconds(6)
                dispatcher.settings.requestTimeout = .seconds(1)
                #expect(try await dispatcher.claim().count == 1)
                let claimedAt = ContinuousClock.now

                var impatient = ErasureService(fixture.dependencies)
                impatient.deliveryWait = .milliseconds(300)
                do {
                    _ = try await impatient.erase(id, request: ErasureRequest(reason: "x"), by: ActorStamp(role: "admin", keyFingerprint: "t"))
                    Issue.record("erased while a delivery was claimed")
                } catch let error as ServiceError {
                    #expect(error.code == .contention && error.kind == .upstreamUnavailable && error.retryAfter != nil)
                }
                #expect(try await client.get("/v1/subscribers/\(id)", key: Keys.support).status == .ok, "rolled back")

                let erased = try await client.delete("/v1/subscribers/\(id)", #"{"reason": "died"}"#, key: Keys.admin)
                #expect(erased.status == .ok, "\(erased.text)")
                #expect(ContinuousClock.now - claimedAt >= .milliseconds(5900), "after the lease")
                try await fixture.pool.query("UPDATE webhook_deliveries SET next_attempt_at = now()")
                #expect(try await dispatcher.dispatchDue() == 0)
                #expect(await receiver.requests.isEmpty)
                let rows = try await Self.deliveries(fixture.pool)
                #expect(rows.allSatisfy { $0.status == "failed" && $0.error == WebhookDeliveryStore.erasedDeliveryError }, "\(rows)")
            }
        }
    }

    /// The same with a reminder to the reminder webhook, whose outcome the
    /// dispatcher records in the reminder's row and as `reminder_sent` in the
    /// subscriber's stream: the erasure waits for it without holding either
    /// (it locks the stream only after), and `erased` follows it.
    @Test func aReminderClaimedBeforeTheErasureIsRecordedBeforeIt() async throws {
        try await ReminderFixture.with { fixture in
            let receiver = WebhookReceiver(failuresPerID: 0)
            try await withReceiver(receiver) { url in
                let id = "reminded-" + UUID().uuidString.lowercased()
                try await fixture.append(id, [ReminderFixture.pass("rt-" + UUID().uuidString, at: Date() - 25 * 86_400)])
                try await fixture.project()
                try await fixture.makeDue(lead: "P1D")
                let dispatcher = try await fixture.dispatcher(url: url)
                try await fixture.publish()
                let claims = try await dispatcher.claim()
                #expect(claims.count == 1 && claims.first?.isReminder == true)
                let finished = Flag()
                let erasure = Task {
                    let result = try await ErasureService(fixture.dependencies)
                        .erase(id, request: ErasureRequest(reason: "reminded"), by: ActorStamp(role: "admin", keyFingerprint: "t"))
                    await finished.set()
                    return result
                }
                try await Task.sleep(for: .milliseconds(800))
                #expect(await !finished.isSet, "the erasure waits for the reminder being posted")
                for claimed in claims { await dispatcher.deliver(claimed) }
                _ = try await erasure.value
                #expect(await receiver.requests.count == 1)
                let types = try await fixture.dependencies.pool.query("""
                    SELECT type FROM events WHERE stream_number = (SELECT number FROM streams WHERE stream_id = \(SubscriberStreams.streamID(for: id))) ORDER BY stream_version
                    """).map { try $0.decode(String.self, at: 0) }
                #expect(types.suffix(2) == ["reminder_sent", "erased"], "\(types)")
                try await fixture.dependencies.pool.query("UPDATE webhook_deliveries SET next_attempt_at = now()")
                #expect(try await dispatcher.dispatchDue() == 0)
                #expect(await receiver.requests.count == 1, "nothing is sent after the erasure")
            }
        }
    }
}
