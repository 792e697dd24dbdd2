import EventStore
import Foundation
import Hummingbird
import HummingbirdTesting
import JSON
import Ledger
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
@testable import HTTPAPI
import TestSupport
import Testing

@Suite("Change feed", .timeLimit(.minutes(3)))
struct ChangeFeedTests {
    /// A scripted history: every change arrives once accepted, signed with the
    /// endpoint's secret, with `Subledger-Event-Id`; the pull feed holds the
    /// same ids; sequences grow by one per subscriber.
    @Test func everyChangeOfAScriptedHistoryArrivesSignedAndThePullFeedHasTheSameIds() async throws {
        try await ChangeFixture.with { client, fixture in
            let receiver = ChangeReceiver()
            try await withChangeReceiver(receiver) { url in
                let created = try await client.post("/v1/webhooks", #"{"url": "\#(url)", "description": "backend"}"#, key: Keys.admin)
                #expect(created.status == .created, "\(created.text)")
                let secret = try #require(created.json["secret"]?.string)
                #expect(created.json["types"]?.array.isEmpty == true)

                let now = Date()
                let start = now - 10 * 86_400
                #expect(try await client.post("/v1/subscribers/alice/events",
                                              monthlyJSON("a1", at: start, expires: start + 30 * 86_400)).status == .created)
                #expect(try await client.post("/v1/subscribers/bob/events",
                                              purchaseJSON("b1", at: RFC3339.format(start))).status == .created)
                #expect(try await client.post("/v1/subscribers/bob/events", """
                    {"type": "refund", "transactionId": "b1", "revocationDate": "\(RFC3339.format(now - 86_400))"}
                    """).status == .created)
                #expect(try await client.post("/v1/subscribers/carol/events",
                                              purchaseJSON("c1", product: "com.example.level2", at: RFC3339.format(start))).status == .created)
                try await fixture.project()

                let stored = try await fixture.changes()
                let bob = stored.filter { $0.subscriberID == "bob" }
                #expect(bob.map(\.type) == ["purchased", "entitlement_gained", "refunded", "entitlement_lost"])
                for subscriber in ["alice", "bob", "carol"] {
                    let sequences = stored.filter { $0.subscriberID == subscriber }.map(\.sequence)
                    #expect(sequences == Array(1...Int64(sequences.count)), "\(subscriber): \(sequences)")
                }
                let lost = try #require(bob.last.flatMap { JSONValue(json: Data($0.body.utf8)) })
                #expect(lost["data"]?["entitlement"]?.string == "pro" && lost["data"]?["reason"]?.string == "refunded")
                #expect(lost["entitlements"]?.array.contains { $0["id"]?.string == "pro" && $0["active"]?.bool == true } == false)
                #expect(lost.keys == ["id", "sequence", "type", "subscriberId", "environment", "at", "recordedAt", "data", "entitlements",
                                      "store"])
                // Every change of bob's App Store purchase says so: the fact's, the refund's and the entitlement's.
                let stores = bob.compactMap { JSONValue(json: Data($0.body.utf8))?["store"]?.string }
                #expect(stores == ["app_store", "app_store", "app_store", "app_store"], "\(stores)")

                let dispatcher = fixture.dispatcher()
                try await fixture.dispatch(dispatcher) { await receiver.acceptedIDs.count == stored.count }
                let requests = await receiver.requests
                #expect(Set(requests.map(\.id)) == Set(stored.map(\.id)))
                for request in requests {
                    #expect(WebhookSignature.isValid(header: request.signature ?? "", body: request.body, secret: secret))
                    #expect(request.eventID == request.id)
                }
                #expect(!WebhookSignature.isValid(header: requests[0].signature ?? "", body: requests[0].body, secret: secret + "x"))
                #expect(try await fixture.pendingDeliveries() == 0)

                let pulled = try await pullAll(client, expected: stored.count)
                #expect(pulled.ids == stored.map(\.id), "one global order, every change once")
                #expect(Set(pulled.ids) == Set(requests.map(\.id)), "the pull feed has the ids the webhook saw")
                let filtered = try await pullAll(client, query: "&types=entitlement_lost,refunded&subscriberId=bob", expected: 2)
                #expect(filtered.ids == bob.suffix(2).map(\.id))

                // Listed by API as sent.
                let webhookID = try #require(created.json["id"]?.string)
                let sent = try await client.get("/v1/webhooks/\(webhookID)/deliveries?status=sent", key: Keys.admin)
                #expect(sent.json["deliveries"]?.array.count == stored.count)
                let listed = try await client.get("/v1/webhooks", key: Keys.admin)
                #expect(listed.json["webhooks"]?.array.first?["secret"] == nil, "the secret is shown once")
            }
        }
    }

    /// A receiver that fails the first attempts still sees each subscriber's
    /// changes in sequence order: a later change is not sent before the
    /// earlier one was accepted.
    @Test func aFailingReceiverStillSeesEachSubscribersChangesInOrder() async throws {
        try await ChangeFixture.with { client, fixture in
            let receiver = ChangeReceiver(failuresPerID: 2)
            try await withChangeReceiver(receiver) { url in
                #expect(try await client.post("/v1/webhooks", #"{"url": "\#(url)"}"#, key: Keys.admin).status == .created)
                let start = Date() - 20 * 86_400
                for subscriber in ["s1", "s2", "s3", "s4"] {
                    for index in 0..<3 {
                        let transaction = "\(subscriber)-t\(index)"
                        let json = index == 0
                            ? monthlyJSON(transaction, at: start, expires: start + 30 * 86_400)
                            : purchaseJSON(transaction, product: "com.example.coins.100", at: RFC3339.format(start + Double(index) * 3600))
                        #expect(try await client.post("/v1/subscribers/\(subscriber)/events", json).status == .created)
                    }
                }
                try await fixture.project()
                let stored = try await fixture.changes()
                try await fixture.dispatch(fixture.dispatcher(firstRetry: .milliseconds(20))) {
                    await receiver.acceptedIDs.count == stored.count
                }
                let requests = await receiver.requests
                for subscriber in ["s1", "s2", "s3", "s4"] {
                    let attempts = requests.filter { $0.subscriberID == subscriber }
                    // Every attempt of a change comes before any attempt of the next.
                    #expect(attempts.map(\.sequence) == attempts.map(\.sequence).sorted(), "\(subscriber): \(attempts.map(\.sequence))")
                    #expect(attempts.filter { $0.status == 200 }.map(\.sequence) == Array(1...Int64(stored.filter { $0.subscriberID == subscriber }.count)))
                }
                #expect(requests.count == stored.count * 3)
            }
        }
    }

    /// A subscription that ends by time alone: `entitlement_lost` at its
    /// `expiresDate`, once, from the sweeper (its clock moved past the end,
    /// no real waiting); the `expired` event is not needed.
    @Test func aSubscriptionEndingByTimeAloneProducesEntitlementLostOnce() async throws {
        try await ChangeFixture.with { client, fixture in
            let now = Date()
            let expires = Date(timeIntervalSince1970: (now + 3600).timeIntervalSince1970.rounded())
            #expect(try await client.post("/v1/subscribers/dana/events",
                                          monthlyJSON("d1", at: now - 86_400, expires: expires)).status == .created)
            try await fixture.project()
            #expect(try await fixture.changes().map(\.type) == ["purchased", "entitlement_gained"])

            #expect(try await fixture.sweeper(now: { expires - 1 }).sweepOnce() == 0, "nothing due before the end")
            let sweeper = fixture.sweeper(now: { expires + 30 })
            #expect(try await sweeper.sweepOnce() == 1)
            #expect(try await sweeper.sweepOnce() == 0)
            let changes = try await fixture.changes()
            try #require(changes.map(\.type) == ["purchased", "entitlement_gained", "entitlement_lost"])
            let lost = try #require(JSONValue(json: Data(changes[2].body.utf8)))
            #expect(lost["at"]?.string == RFC3339.format(expires), "at the instant of the end, not of the sweep")
            #expect(lost["data"]?["reason"]?.string == "ended" && lost["sequence"]?.int == 3)

            // A later event of the subscriber does not publish the loss again.
            #expect(try await client.post("/v1/subscribers/dana/events",
                                          purchaseJSON("d2", product: "com.example.coins.100", at: RFC3339.format(now))).status == .created)
            try await fixture.project()
            #expect(try await fixture.changes().filter { $0.type == "entitlement_lost" }.count == 1)
        }
    }

    /// Two instances (two sets of components on one database) sweeping at
    /// once publish each time-based transition exactly once.
    @Test func twoInstancesEmitEachTimeBasedTransitionOnce() async throws {
        try await ChangeFixture.with { client, fixture in
            let now = Date()
            let expires = Date(timeIntervalSince1970: (now + 600).timeIntervalSince1970.rounded())
            for index in 0..<40 {
                #expect(try await client.post("/v1/subscribers/u\(index)/events",
                                              monthlyJSON("u\(index)", at: now - 86_400, expires: expires + Double(index))).status == .created)
            }
            try await fixture.project()
            let second = PoolConfiguration(conninfo: fixture.pool.configuration.conninfo, maximumConnections: 4)
            let otherPool = ConnectionPool(configuration: second, logger: fixture.dependencies.logger)
            var first = fixture.sweeper(now: { expires + 100 })
            first.batchSize = 7
            var other = ChangeTimeSweeper(pool: otherPool, catalog: fixture.dependencies.catalog.catalog, now: { expires + 100 })
            other.batchSize = 7
            async let a: Void = { while try await first.sweepOnce() > 0 {} }()
            async let b: Void = { while try await other.sweepOnce() > 0 {} }()
            _ = try await (a, b)
            await otherPool.close()
            let lost = try await fixture.changes().filter { $0.type == "entitlement_lost" }
            #expect(lost.count == 40)
            #expect(Set(lost.map(\.subscriberID)).count == 40)
        }
    }

    /// A long-poll answers within a second of a new change.
    @Test func aLongPollAnswersWithinASecondOfANewChange() async throws {
        try await ChangeFixture.with { client, fixture in
            let caughtUp = try await client.get("/v1/changes", key: Keys.support)
            #expect(caughtUp.json["changes"]?.array.isEmpty == true)
            let cursor = try #require(caughtUp.json["nextCursor"]?.string)
            async let waited = { () async throws -> (TestResponse, ContinuousClock.Instant) in
                let response = try await client.get("/v1/changes?wait=20&after=\(cursor)", key: Keys.support)
                return (response, ContinuousClock.now)
            }()
            try await Task.sleep(for: .milliseconds(800))
            #expect(try await client.post("/v1/subscribers/erin/events", purchaseJSON("e1")).status == .created)
            try await fixture.project()
            let published = ContinuousClock.now
            let (response, answered) = try await waited
            #expect(response.json["changes"]?.array.first?["type"]?.string == "purchased")
            #expect(answered - published < .seconds(1), "answered \(answered - published) after the change")

            // Nothing new: it waits the time asked, then answers empty with a cursor.
            let next = try #require(response.json["nextCursor"]?.string)
            let before = ContinuousClock.now
            let empty = try await client.get("/v1/changes?wait=1&after=\(next)", key: Keys.support)
            #expect(ContinuousClock.now - before >= .milliseconds(900))
            #expect(empty.json["changes"]?.array.isEmpty == true && empty.json["nextCursor"]?.string == next)
        }
    }

    /// `SUBLEDGER_CHANGES_MAX_WAIT` caps what `wait` asks.
    @Test func theConfiguredMaximumWaitCapsALongPoll() async throws {
        var dependencies = try await makeDependencies()
        dependencies.configuration.changesMaximumWait = .seconds(1)
        let app = buildApplication(dependencies)
        try await app.test(.router) { client in
            let before = ContinuousClock.now
            let response = try await client.get("/v1/changes?wait=30", key: Keys.support)
            #expect(response.status == .ok && response.json["changes"]?.array.isEmpty == true)
            #expect(ContinuousClock.now - before < .seconds(10), "held \(ContinuousClock.now - before)")
        }
        await dependencies.pool.close()
        #expect(throws: ConfigurationError.self) { try SubledgerConfiguration(environment: ["SUBLEDGER_CHANGES_MAX_WAIT": "31"]) }
        #expect(try SubledgerConfiguration(environment: ["SUBLEDGER_CHANGES_MAX_WAIT": "5"]).changesMaximumWait == .seconds(5))
    }

    /// Replaying the feed's consumer over the whole log (as a rebuild
    /// would) publishes nothing again and renumbers nothing.
    @Test func aReplayOfTheLogPublishesNothingAgain() async throws {
        try await ChangeFixture.with { client, fixture in
            #expect(try await client.post("/v1/subscribers/fay/events", purchaseJSON("f1")).status == .created)
            try await fixture.project()
            let before = try await fixture.changes()
            try await fixture.dependencies.store.rebuild(ChangeFeedConsumer(catalog: fixture.dependencies.catalog.catalog))
            #expect(try await fixture.changes().map(\.id) == before.map(\.id))
            #expect(try await fixture.changes().map(\.body) == before.map(\.body))
        }
    }

    @Test func badParametersAnswer400WithTheField() async throws {
        try await ChangeFixture.with { client, _ in
            for (query, field) in [("after=nonsense", "after"), ("wait=31", "wait"), ("wait=-1", "wait"), ("limit=0", "limit"),
                                   ("limit=1001", "limit"), ("types=Bad!", "types"), ("types=a,,b", "types")] {
                let response = try await client.get("/v1/changes?\(query)", key: Keys.support)
                #expect(response.status == .badRequest && response.error.field == field, "\(query): \(response.text)")
            }
            #expect(try await client.get("/v1/changes", key: Keys.ingest).status == .forbidden)
            #expect(try await client.get("/v1/changes", key: nil).status == .unauthorized)
            for (body, field) in [(#"{"url": "ftp://x"}"#, "url"), (#"{}"#, "url"), (#"{"url": 3}"#, "url"),
                                  (#"{"url": "http://x", "types": "all"}"#, "types"),
                                  (#"{"url": "http://x", "types": ["Bad"]}"#, "types"),
                                  (#"{"url": "http://x", "description": 3}"#, "description")] {
                let response = try await client.post("/v1/webhooks", body, key: Keys.admin)
                #expect(response.status == .badRequest && response.error.field == field, "\(body): \(response.text)")
            }
            #expect(try await client.post("/v1/webhooks", "[", key: Keys.admin).status == .badRequest)
            #expect(try await client.post("/v1/webhooks", #"{"url": "http://x"}"#, key: Keys.support).status == .forbidden)
            let missing = try await client.execute(uri: "/v1/webhooks/whk_none", method: .delete, headers: Keys.bearer(Keys.admin))
            #expect(missing.status == .notFound && missing.error.code == ErrorCode.webhookNotFound.rawValue)
            let created = try await client.post("/v1/webhooks", #"{"url": "http://127.0.0.1:9/x", "types": ["entitlement_lost"]}"#,
                                                key: Keys.admin)
            let id = try #require(created.json["id"]?.string)
            let retry = try await client.post("/v1/webhooks/\(id)/deliveries/99/retry", "", key: Keys.admin)
            #expect(retry.status == .notFound && retry.error.code == ErrorCode.deliveryNotFound.rawValue)
            let status = try await client.get("/v1/webhooks/\(id)/deliveries?status=lost", key: Keys.admin)
            #expect(status.status == .badRequest && status.error.field == "status")
            let deleted = try await client.execute(uri: "/v1/webhooks/\(id)", method: .delete, headers: Keys.bearer(Keys.admin))
            #expect(deleted.status == .noContent)
        }
    }
}
