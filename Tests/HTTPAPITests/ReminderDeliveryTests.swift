import EventStore
import Foundation
import Hummingbird
import HummingbirdTesting
import Ledger
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
@testable import HTTPAPI
import Testing

/// Reminders are changes of the feed: published by the change sweeper when
/// due and delivered by the change dispatcher to the `SUBLEDGER_WEBHOOK_URL`
/// endpoint, with what its receivers were promised (same id on every
/// attempt, signature, the reminder's fields, retries, then `failed`).
///
/// A broken consumer or dispatcher can loop forever instead of failing:
/// the time limit turns that into a failure of the test that hung.
@Suite("Reminder delivery", .timeLimit(.minutes(5)))
struct ReminderDeliveryTests {
    @Test func aFailedDeliveryIsRetriedAndAcceptedOnceWithTheSameIdAndAValidSignature() async throws {
        try await ReminderFixture.with { fixture in
            let receiver = WebhookReceiver(failuresPerID: 1)
            try await withReceiver(receiver) { url in
                try await fixture.append("alice", [ReminderFixture.pass("t1", at: Date() - 25 * 86_400)])
                try await fixture.project()
                try await fixture.makeDue(lead: "P1D")
                // A first retry long enough to observe on a loaded machine; then made due by hand.
                let dispatcher = try await fixture.dispatcher(url: url, firstRetry: .seconds(10))
                try await fixture.publish()

                #expect(try await dispatcher.dispatchDue() == 1)
                let afterFailure = try await fixture.delivery(lead: "P1D")
                #expect(afterFailure.status == "pending" && afterFailure.attempts == 1 && afterFailure.lastError == "HTTP 500")
                #expect(afterFailure.retryIn > 0 && afterFailure.retryIn < 30, "first retry within 30 s")
                #expect(try await dispatcher.dispatchDue() == 0, "not retried before its backoff")
                try await fixture.makeDue(lead: "P1D")

                try await fixture.dispatch(dispatcher) { await receiver.accepted.count == 1 }
                let requests = await receiver.requests
                #expect(requests.map(\.status) == [500, 200])
                #expect(Set(requests.map(\.id)).count == 1, "the same id on every attempt")
                #expect(requests[0].body == requests[1].body)
                for request in requests {
                    #expect(WebhookSignature.isValid(header: request.signature ?? "", body: request.body, secret: "whsec-test"))
                }
                #expect(!WebhookSignature.isValid(header: requests[0].signature ?? "", body: requests[0].body, secret: "other"))
                let body = try JSONSerialization.jsonObject(with: requests[1].body) as? [String: Any]
                #expect(Set((body ?? [:]).keys).isSuperset(of: ["id", "type", "subscriberId", "group", "productId", "expiresAt", "lead", "dueAt", "environment"]))
                #expect(body?["id"] as? String == requests[1].id && (requests[1].id).hasPrefix("rem:"), "the reminder's id")
                #expect(body?["type"] as? String == "renewal_reminder")
                #expect(body?["subscriberId"] as? String == "alice" && body?["lead"] as? String == "P1D")

                let sent = try await fixture.delivery(lead: "P1D")
                #expect(sent.status == "sent" && sent.attempts == 2)
                #expect(try await fixture.events(type: "reminder_sent", of: "alice").count == 1)

                // Nothing is due any more; the projection agrees it was sent.
                #expect(try await dispatcher.dispatchDue() == 0)
                try await fixture.project()
                #expect(try await fixture.delivery(lead: "P1D").status == "sent")
                #expect(await receiver.requests.count == 2)
            }
        }
    }

    /// The status decides: a 2xx with a body over the read limit is a
    /// success (it used to count as a failure, so the reminder was sent
    /// again and again and then marked failed).
    @Test func aSuccessWithALargeBodyIsSent() async throws {
        try await ReminderFixture.with { fixture in
            let receiver = WebhookReceiver(failuresPerID: 0)
            try await withReceiver(receiver) { url in
                try await fixture.append("bea", [ReminderFixture.pass("tb1", at: Date() - 25 * 86_400)])
                try await fixture.project()
                try await fixture.makeDue(lead: "P1D")
                let dispatcher = try await fixture.dispatcher(url: url.replacingOccurrences(of: "/hook", with: "/big"))
                try await fixture.publish()
                #expect(try await dispatcher.dispatchDue() == 1)
                let row = try await fixture.delivery(lead: "P1D")
                #expect(row.status == "sent" && row.attempts == 1, "\(row)")
                #expect(await receiver.requests.count == 1)
            }
        }
    }

    /// A redirect is a failed attempt with a clear error, never a success of
    /// whatever page it leads to. The receiver chooses the Location: only its
    /// start is stored (`/moved-far` sends 20,000 bytes of it).
    @Test(arguments: [("/moved", "HTTP 302 redirect to /hook:"), ("/moved-far", "HTTP 302 redirect to /hook?xxx")])
    func aRedirectIsNotFollowedAndCountsAsAFailure(path: String, error expected: String) async throws {
        try await ReminderFixture.with { fixture in
            let receiver = WebhookReceiver(failuresPerID: 0)
            try await withReceiver(receiver) { url in
                try await fixture.append("cal", [ReminderFixture.pass("tc1", at: Date() - 25 * 86_400)])
                try await fixture.project()
                try await fixture.makeDue(lead: "P1D")
                let dispatcher = try await fixture.dispatcher(url: url.replacingOccurrences(of: "/hook", with: path), firstRetry: .seconds(30))
                try await fixture.publish()
                #expect(try await dispatcher.dispatchDue() == 1)
                let row = try await fixture.delivery(lead: "P1D")
                let error = row.lastError ?? ""
                #expect(row.status == "pending" && row.attempts == 1)
                #expect(error.contains(expected), "\(error.prefix(300))")
                #expect(error.utf8.count < 400, "\(error.utf8.count) bytes stored")
                #expect(await receiver.requests.isEmpty, "the redirect target was not called")
            }
        }
    }

    /// Several dispatchers racing over the same due reminders, each claiming
    /// a few at a time: every reminder is delivered exactly once. (Without the
    /// locking claim, two claims running at the same moment both take the
    /// same rows and the receiver sees duplicates.)
    @Test func twoDispatchersRunningTogetherNeverBothDeliverTheSameReminder() async throws {
        try await ReminderFixture.with { fixture in
            let receiver = WebhookReceiver(failuresPerID: 0, delay: .milliseconds(2))
            try await withReceiver(receiver) { url in
                for index in 0..<20 {
                    try await fixture.append("s\(index)", [ReminderFixture.pass("t\(index)", at: Date() - 86_400)])
                }
                try await fixture.project()
                try await fixture.makeDue()
                let dispatcher = try await fixture.dispatcher(url: url)
                try await fixture.publish()
                let dispatchers = (0..<4).map { _ in dispatcher.with { $0.batchSize = 2 } }

                let claimed = try await withThrowingTaskGroup(of: Int.self) { group in
                    for dispatcher in dispatchers { group.addTask { try await fixture.drainDispatcher(dispatcher) } }
                    return try await group.reduce(into: [Int]()) { $0.append($1) }
                }

                let accepted = await receiver.accepted
                #expect(Set(accepted).count == 60)
                #expect(accepted.count == 60, "\(accepted.count - Set(accepted).count) reminders were delivered twice")
                #expect(claimed.reduce(0, +) == 60)
                #expect(claimed.filter { $0 > 0 }.count >= 2, "the dispatchers shared the work: \(claimed)")
                let sent = try await fixture.dependencies.pool.query("SELECT count(*) FROM events WHERE type = 'reminder_sent'")
                #expect(try sent.first?.decode(Int.self, at: 0) == 60)
            }
        }
    }

    /// What keeps dispatchers apart, made to happen every time: while another
    /// claim's transaction holds some due deliveries, a claim takes others at
    /// once. (Without `SKIP LOCKED` it waits for the held ones and takes them
    /// too once they are released, so both claims would deliver them; the
    /// race above hits that window only now and then.)
    @Test func aClaimTakesOtherRemindersThanTheOnesAnotherClaimHolds() async throws {
        try await ReminderFixture.with { fixture in
            for index in 0..<4 {
                try await fixture.append("s\(index)", [ReminderFixture.pass("t\(index)", at: Date() - 86_400)])
            }
            try await fixture.project()
            try await fixture.makeDue(lead: "P0D")
            let dispatcher = try await fixture.dispatcher(url: "http://127.0.0.1:9/hook").with { $0.batchSize = 2 }
            try await fixture.publish()
            let (held, claim, claimedWhileHeld) = try await fixture.dependencies.pool.withTransaction { connection in
                let held = try await connection.query("""
                    SELECT change_id FROM webhook_deliveries WHERE status = 'pending' ORDER BY id LIMIT 2 FOR UPDATE
                    """).map { try $0.decode(String.self, at: 0) }
                let claim = Task { try await dispatcher.claim().map(\.changeID) }
                return (held, claim, try? await withDeadline(.seconds(30)) { try await claim.value })
            }
            let claimed = try await claim.value
            #expect(held.count == 2)
            #expect(claimedWhileHeld != nil, "the claim waited for the deliveries another claim held")
            #expect(claimed.count == 2 && Set(claimed).isDisjoint(with: held), "held \(held), claimed \(claimed)")
        }
    }

    @Test func aDeliveryThatNeverSucceedsIsFailedAfterTheLastAttemptAndVisibleToSupport() async throws {
        try await ReminderFixture.with { fixture in
            let receiver = WebhookReceiver(failuresPerID: 1000)
            try await withReceiver(receiver) { url in
                try await fixture.append("dave", [ReminderFixture.pass("d1", at: Date() - 25 * 86_400)])
                try await fixture.project()
                try await fixture.makeDue(lead: "P0D")
                let dispatcher = try await fixture.dispatcher(url: url, maximumAttempts: 3)
                try await fixture.publish()
                try await fixture.dispatch(dispatcher) { (try? await fixture.delivery(lead: "P0D").status) == "failed" }
                #expect(await receiver.requests.count == 3)
                #expect(try await fixture.events(type: "reminder_failed", of: "dave").count == 1)
                try await fixture.project()
                #expect(try await fixture.delivery(lead: "P0D").status == "failed")

                let app = buildApplication(fixture.dependencies)
                try await app.test(.router) { client in
                    let response = try await client.execute(uri: "/v1/reminders?status=failed", method: .get, headers: [.authorization: "Bearer \(Keys.support)"])
                    #expect(response.status == .ok)
                    let body = try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any]
                    let reminders = body?["reminders"] as? [[String: Any]] ?? []
                    #expect(reminders.count == 1)
                    #expect(reminders.first?["attempts"] as? Int == 3 && reminders.first?["lastError"] as? String == "HTTP 500")
                    #expect(reminders.first?["subscriberId"] as? String == "dave")
                }
            }
        }
    }

    @Test func withoutAWebhookURLRemindersAreScheduledAndNothingIsSent() async throws {
        try await ReminderFixture.with { fixture in
            try await fixture.append("erin", [ReminderFixture.pass("e1", at: Date() - 86_400)])
            try await fixture.project()
            try await fixture.makeDue()
            let dispatcher = try await fixture.dispatcher(url: nil)
            try await fixture.publish()
            #expect(try await dispatcher.dispatchDue() == 0)
            #expect(try await fixture.rows().map(\.status) == [.pending, .pending, .pending])
            #expect(try await fixture.events(type: "reminder_sent", of: "erin").isEmpty)
            // They are changes of the feed all the same, each once.
            let published = try await fixture.dependencies.pool.query("""
                SELECT count(*) FROM changes WHERE type IN ('renewal_reminder', 'expiry_prompt')
                """).first!.decode(Int.self, at: 0)
            #expect(published == 3)
            try await fixture.publish()
            #expect(try await fixture.dependencies.pool.query("SELECT count(*) FROM changes WHERE id LIKE 'rem:%'").first!.decode(Int.self, at: 0) == 3)
        }
    }

    /// The sweeper sleeps up to its interval, but a reminder that becomes
    /// pending wakes it (NOTIFY) and it sleeps only until that one is due;
    /// the dispatcher is woken by the publication.
    @Test func theRunningDispatcherWakesOnNotifyAndSendsWhenDue() async throws {
        try await ReminderFixture.with { fixture in
            let receiver = WebhookReceiver(failuresPerID: 0)
            try await withReceiver(receiver) { url in
                // A poll far beyond the bound below: waiting for it cannot pass,
                // while a run starved of threads by the other suites still can.
                let dispatcher = try await fixture.dispatcher(url: url).with { $0.pollInterval = .seconds(600) }
                let sweeper = ChangeTimeSweeper(pool: fixture.dependencies.pool, catalog: fixture.dependencies.catalog.catalog,
                                                interval: .seconds(600),
                                                reminderWebhook: ReminderWebhook(url: url, secret: "whsec-test"), conninfo: fixture.conninfo)
                let running = Task { await dispatcher.runUntilCancelled() }
                let sweeping = Task { await sweeper.runUntilCancelled() }
                defer {
                    running.cancel()
                    sweeping.cancel()
                }
                try await Task.sleep(for: .milliseconds(300))
                // The expiry prompt is due at the expiry, a moment ahead; a
                // reminder already due when the projection schedules it is
                // skipped, never sent. On a machine the other suites starve,
                // appending and projecting have taken longer than that
                // moment: then a later subscriber is given a longer one.
                var margin = 1.5
                for attempt in 0... {
                    let now = Date()
                    try await fixture.append("fay\(attempt)", [ReminderFixture.monthly("f\(attempt)", at: now - 86_400, expires: now + margin),
                                                                ReminderFixture.autoRenew("f\(attempt)", false, at: now - 1)])
                    try await fixture.feed()
                    try await fixture.project()
                    let statuses = try await fixture.rows().filter { $0.lead == "P0D" }.map(\.status)
                    if statuses.last == .pending { break }
                    try #require(statuses.last == .skipped && margin < 48, "the expiry prompt was not scheduled: \(statuses)")
                    margin *= 2
                }
                let started = ContinuousClock.now
                while await receiver.accepted.isEmpty, ContinuousClock.now - started < .seconds(60) {
                    try await Task.sleep(for: .milliseconds(50))
                }
                #expect(ContinuousClock.now - started < .seconds(60), "it waited for the poll instead of the due time")
                #expect(await receiver.requests.map(\.lead) == ["P0D"])
            }
        }
    }

    @Test func backoffStartsWithinThirtySecondsAndIsCapped() {
        var settings = ChangeDispatcher.Settings()
        #expect(settings.firstRetry <= .seconds(30))
        #expect(settings.lease > settings.requestTimeout)
        #expect(ReminderWebhook(url: "http://x", secret: nil).maximumAttempts == 10)
        settings.maximumBackoff = .seconds(100)
        let dispatcher = ChangeDispatcher(pool: ConnectionPool(configuration: .init(conninfo: "")), conninfo: "", settings: settings)
        #expect((1...6).map { dispatcher.backoff(afterAttempt: $0) } == [.seconds(10), .seconds(20), .seconds(40), .seconds(80), .seconds(100), .seconds(100)])
    }

    @Test func theSignatureIsTheHMACOfTimestampDotBody() {
        let body = Data(#"{"id":"rem:1"}"#.utf8)
        let header = WebhookSignature.header(body: body, secret: "s3cret", timestamp: 1_700_000_000)
        // printf '1700000000.{"id":"rem:1"}' | openssl dgst -sha256 -hmac s3cret
        #expect(header == "t=1700000000,v1=" + WebhookSignature.hex(body: body, secret: "s3cret", timestamp: 1_700_000_000))
        #expect(WebhookSignature.isValid(header: header, body: body, secret: "s3cret", now: Date(timeIntervalSince1970: 1_700_000_100)))
        #expect(!WebhookSignature.isValid(header: header, body: body, secret: "s3cret", now: Date(timeIntervalSince1970: 1_700_001_000)),
                "too old")
        #expect(!WebhookSignature.isValid(header: header, body: Data(#"{"id":"rem:2"}"#.utf8), secret: "s3cret",
                                          now: Date(timeIntervalSince1970: 1_700_000_000)))
    }
}

extension ChangeDispatcher {
    func with(_ change: (inout Settings) -> Void) -> ChangeDispatcher {
        var settings = self.settings
        change(&settings)
        return ChangeDispatcher(pool: pool, conninfo: conninfo, settings: settings, client: client, logger: logger)
    }
}

extension ReminderFixture {
    /// Stores the reminder webhook (`url`; nil: none) as `serve` does before
    /// its first sweep, and returns a change dispatcher.
    func dispatcher(url: String?, firstRetry: Duration = .milliseconds(100), maximumAttempts: Int = 10) async throws -> ChangeDispatcher {
        try await ReminderWebhook.register(url.map { ReminderWebhook(url: $0, secret: "whsec-test", maximumAttempts: maximumAttempts) },
                                           pool: dependencies.pool)
        var settings = ChangeDispatcher.Settings()
        settings.firstRetry = firstRetry
        settings.pollInterval = .milliseconds(200)
        // These tests hold the claim and the receiver to account, not the
        // timeout: a receiver that answers after the timeout counts as failed
        // and is sent again (at least once, as documented), which a run
        // starved by the other suites reached after 10 s (62 of 60 accepted).
        settings.requestTimeout = .seconds(90)
        settings.lease = .seconds(180)
        return ChangeDispatcher(pool: dependencies.pool, conninfo: conninfo, settings: settings)
    }

    /// The change feed's consumer, run to the end.
    func feed() async throws {
        try await dependencies.project(ChangeFeedConsumer(catalog: dependencies.catalog.catalog), batch: 500)
    }

    /// Publishes what is due: the feed's consumer, then sweeps.
    func publish() async throws {
        try await feed()
        let sweeper = ChangeTimeSweeper(pool: dependencies.pool, catalog: dependencies.catalog.catalog)
        while try await sweeper.sweepOnce() > 0 {}
    }

    /// Makes pending reminders due now (all, or those of one lead), and
    /// their pending deliveries.
    func makeDue(lead: String? = nil) async throws {
        try await dependencies.pool.query("""
            UPDATE reminders SET next_attempt_at = now() WHERE status = 'pending' AND (\(lead)::text IS NULL OR lead = \(lead))
            """)
        try await dependencies.pool.query("""
            UPDATE webhook_deliveries d SET next_attempt_at = now() FROM reminders r
            WHERE d.change_id = r.id AND d.status = 'pending' AND (\(lead)::text IS NULL OR r.lead = \(lead))
            """)
    }

    /// Runs rounds until `done`, for at most 20 s.
    /// Runs rounds until `done`. The bound only ends a dispatch that never
    /// finishes: beside every other suite on two cores, three failed attempts
    /// with their retry waits have taken over 20 s.
    func dispatch(_ dispatcher: ChangeDispatcher, until done: () async -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(120)
        while await !done() {
            guard ContinuousClock.now < deadline else { throw ProjectionTimeout() }
            if try await dispatcher.dispatchDue() == 0 { try await Task.sleep(for: .milliseconds(20)) }
        }
    }

    /// Runs rounds until nothing is pending; returns how many reminders this
    /// one claimed. The bound only ends a drain that never finishes: beside
    /// every other suite on two cores, 60 deliveries have taken over 20 s.
    func drainDispatcher(_ dispatcher: ChangeDispatcher) async throws -> Int {
        let deadline = ContinuousClock.now + .seconds(120)
        var claimed = 0
        while try await dependencies.pool.query("SELECT 1 FROM reminders WHERE status = 'pending' LIMIT 1").count > 0 {
            guard ContinuousClock.now < deadline else { throw ProjectionTimeout() }
            let round = try await dispatcher.dispatchDue()
            claimed += round
            if round == 0 { try await Task.sleep(for: .milliseconds(5)) }
        }
        return claimed
    }

    struct DeliveryRow {
        var status: String
        var attempts: Int
        var lastError: String?
        /// Seconds until the next attempt may start.
        var retryIn: Double
    }

    func delivery(lead: String) async throws -> DeliveryRow {
        let row = try await dependencies.pool.query("""
            SELECT status, attempts, last_error, extract(epoch FROM next_attempt_at - now())::float8
            FROM reminders WHERE lead = \(lead) ORDER BY due_at DESC LIMIT 1
            """).first!
        return DeliveryRow(status: try row.decode(String.self, at: 0), attempts: try row.decode(Int.self, at: 1),
                           lastError: try row.decode(String?.self, at: 2), retryIn: try row.decode(Double.self, at: 3))
    }

    /// The data of a subscriber's events of one type.
    func events(type: String, of subscriberID: String) async throws -> [RecordedEvent] {
        try await dependencies.store.readStream(SubscriberStreams.streamID(for: subscriberID)).filter { $0.type == type }
    }
}

/// A webhook endpoint on loopback that records what it gets and fails the
/// first `failuresPerID` requests of each reminder with a 500.
actor WebhookReceiver {
    struct Received: Sendable {
        var id: String
        var lead: String
        var signature: String?
        var body: Data
        var status: Int
    }

    let failuresPerID: Int
    let delay: Duration
    private(set) var requests: [Received] = []
    private var seen: [String: Int] = [:]

    init(failuresPerID: Int, delay: Duration = .zero) {
        self.failuresPerID = failuresPerID
        self.delay = delay
    }

    var accepted: [String] { requests.filter { $0.status == 200 }.map(\.id) }

    func receive(body: Data, signature: String?) -> Int {
        let fields = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
        let id = fields?["id"] as? String ?? ""
        let count = seen[id, default: 0]
        seen[id] = count + 1
        let status = count < failuresPerID ? 500 : 200
        requests.append(Received(id: id, lead: fields?["lead"] as? String ?? "", signature: signature, body: body, status: status))
        return status
    }
}

/// Runs `body` with the receiver listening on a free loopback port.
func withReceiver(_ receiver: WebhookReceiver, _ body: @escaping @Sendable (String) async throws -> Void) async throws {
    let router = Router()
    router.post("/hook") { request, _ -> Response in
        let bytes = try await request.body.collect(upTo: 1 << 20)
        let signature = request.headers.first { $0.name.canonicalName == "subledger-signature" }?.value
        if receiver.delay > .zero { try await Task.sleep(for: receiver.delay) }
        let status = await receiver.receive(body: Data(bytes.readableBytesView), signature: signature)
        return Response(status: .init(code: status))
    }
    // A receiver that answers 2xx with a body far over the read limit.
    router.post("/big") { request, _ -> Response in
        let bytes = try await request.body.collect(upTo: 1 << 20)
        _ = await receiver.receive(body: Data(bytes.readableBytesView), signature: nil)
        return Response(status: .ok, body: .init(byteBuffer: ByteBuffer(repeating: UInt8(ascii: "x"), count: 300 * 1024)))
    }
    // A redirect to a page that would answer 200.
    router.post("/moved") { _, _ -> Response in
        Response(status: .found, headers: [.location: "/hook"])
    }
    // A redirect whose Location is far longer than anything worth storing.
    router.post("/moved-far") { _, _ -> Response in
        Response(status: .found, headers: [.location: "/hook?" + String(repeating: "x", count: 20_000)])
    }
    let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
    try await app.test(.live) { client in
        try await body("http://127.0.0.1:\(client.port!)/hook")
    }
}
