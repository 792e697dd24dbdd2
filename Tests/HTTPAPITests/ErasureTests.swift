import AppStore
import AppStoreTesting
import EventStore
import HTTPTypes
import Foundation
import JSON
import Hummingbird
import HummingbirdTesting
import Ledger
@testable import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
import TestSupport
import Testing

/// `DELETE /v1/subscribers/{id}` through the router, on a database written
/// through the router (docs/decisions/0004-erasure-by-crypto-shredding.md;
/// docs/api.md, "Erasure"): afterwards a
/// `pg_dump` of the whole database holds no readable form of the erased
/// subscriber's id, device ids or `appAccountToken` (plain, in JSON, base64 at
/// any alignment, once or twice encoded); statistics, listings and another
/// subscriber read as before; a rebuild gives the live rows; the subscriber
/// answers 404 `erased`, new facts 410, App Store notifications 200 without
/// being applied; roles are enforced.
@Suite struct ErasureTests {
    @Test func anErasedSubscriberLeavesNoReadableTraceAndEveryCountStays() async throws {
        var dependencies = try await makeDependencies()
        dependencies.appStoreVerifier = AppStoreNotificationTests.verifier
        let ready = dependencies
        // A webhook receiver that fails every request: deliveries stay pending until the erasure.
        let receiver = ChangeReceiver(failuresPerID: .max)
        try await withChangeReceiver(receiver) { url in try await withRouter(ready) { client in
            let dependencies = ready
            let catalog = dependencies.catalog.catalog
            // An appAccountToken is a UUID; apps make the subscriber id it, lowercased.
            let erased = UUID().uuidString.lowercased()
            let other = "keep-" + UUID().uuidString.lowercased()
            let run = UInt32.random(in: 0...UInt32.max)
            #expect(try await client.post("/v1/webhooks", #"{"url": "\#(url)", "description": "backend"}"#, key: Keys.admin).status == .created)
            // A pass ending in 20 days: its reminders (`rem:<id>:…`) are published below.
            #expect(try await client.post("/v1/subscribers/\(erased)/events",
                                          purchaseJSON("a-soon-\(run)", at: RFC3339.format(Date() - 10 * 86_400), device: "phone-\(erased)")).status == .created)
            // Long enough a history for a stored snapshot and a cached state.
            for index in 0..<70 {
                #expect(try await client.post("/v1/subscribers/\(erased)/events",
                                              purchaseJSON("c-\(run)-\(index)", product: "com.example.coins.100",
                                                           at: "2025-01-01T00:00:\(String(format: "%02d", index % 60))Z",
                                                           device: "phone-\(erased)")).status == .created)
            }
            for (subscriber, prefix) in [(erased, "a"), (other, "b")] {
                #expect(try await client.post("/v1/subscribers/\(subscriber)/events",
                                              purchaseJSON("\(prefix)-pass-\(run)", at: "2025-02-01T00:00:00Z", device: "tablet-\(subscriber)")).status == .created)
                #expect(try await client.post("/v1/subscribers/\(subscriber)/events",
                                              purchaseJSON("\(prefix)-pro-\(run)", product: "com.example.pro.monthly", at: "2025-02-10T00:00:00Z",
                                                           expires: "2025-03-10T00:00:00Z")).status == .created)
            }
            // A restore from a new device: `device_seen`.
            #expect(try await client.post("/v1/subscribers/\(erased)/restore", """
                {"deviceId": "watch-\(erased)", "transactions": [{"transactionId": "a-pass-\(run)", "originalTransactionId": "a-pass-\(run)",
                 "productId": "com.example.pass.30d", "purchaseDate": "2025-02-01T00:00:00Z"}]}
                """).status == .ok)
            // The other subscriber restores one of the erased subscriber's purchases:
            // a transfer, whose events and changes name both.
            #expect(try await client.post("/v1/subscribers/\(other)/restore", """
                {"transactions": [{"transactionId": "a-pass-\(run)", "originalTransactionId": "a-pass-\(run)",
                 "productId": "com.example.pass.30d", "purchaseDate": "2025-02-01T00:00:00Z"}]}
                """).status == .ok)
            let transferredIn = try await client.get("/v1/subscribers/\(other)/history", key: Keys.support).text
            #expect(transferredIn.contains("\"fromSubscriberId\":\"\(erased)\""), "the other party is named by its id while it exists")
            // A support grant, and an App Store subscription carrying the token.
            #expect(try await client.post("/v1/subscribers/\(erased)/grants", #"{"entitlement": "pro", "duration": "P30D", "reason": "apology"}"#,
                                          key: Keys.admin).status == .created)
            var subscribed = TestAppStore.subscription(transactionID: "3\(UInt32.random(in: 0...UInt32.max))",
                                                       originalTransactionID: "3\(UInt32.random(in: 0...UInt32.max))")
            subscribed.appAccountToken = erased.uppercased()
            let app = AppStoreApp(client: client, dependencies: dependencies)
            let notified = try await app.notify(.subscribed, .initialBuy, transaction: subscribed,
                                                renewal: TestAppStore.renewalInfo(originalTransactionID: subscribed.originalTransactionID ?? ""))
            #expect(notified.json["subscriberId"]?.string == erased)
            #expect(try await client.get("/v1/subscribers/\(erased)").status == .ok)
            for device in ["phone-\(erased)", "tablet-\(other)"] {
                #expect(try await client.post("/v1/products/invalid",
                                              #"{"identifiers": ["com.example.gone"], "deviceId": "\#(device)"}"#).status == .created)
            }
            #expect(try await client.get("/v1/subscribers/\(erased)/history", key: Keys.support).status == .ok)
            #expect(try await client.get("/v1/subscribers/\(erased)/explain", key: Keys.admin).status == .ok)

            let projections: [any EventConsumer] = [SubscriptionProjection(store: dependencies.store, catalog: catalog),
                                                    ReminderProjection(store: dependencies.store, catalog: catalog),
                                                    ChangeFeedConsumer(catalog: catalog)]
            func projectAll() async throws {
                for projection in projections { try await dependencies.project(projection) }
                _ = try await dependencies.auditTrail.flush(to: dependencies.pool)
            }
            try await projectAll()
            await dependencies.ledgers.snapshotsSaved()
            let pseudonym = SubscriberPseudonyms.pseudonym(for: erased)
            // The reminders come due and the sweeper publishes them; the dispatcher
            // tries the queues' heads, which fail: every delivery stays pending.
            try await dependencies.pool.query("UPDATE reminders SET next_attempt_at = now() WHERE subscriber_id = \(erased) AND status = 'pending'")
            let sweeper = ChangeTimeSweeper(pool: dependencies.pool, catalog: catalog)
            let dispatcher = ChangeFixture(dependencies: dependencies).dispatcher()
            func sweepAndDispatch() async throws {
                while try await sweeper.sweepOnce() > 0 {}
                try await dependencies.pool.query("UPDATE webhook_deliveries SET next_attempt_at = now() WHERE status = 'pending'")
                for _ in 0..<3 { _ = try await dispatcher.dispatchDue() }
            }
            try await sweepAndDispatch()
            let reminders = try await dependencies.pool.query("""
                SELECT count(*) FROM changes c JOIN webhook_deliveries d ON d.change_id = c.id
                WHERE starts_with(c.id, 'rem:' || \(erased) || ':') AND d.status = 'pending'
                """).first!.decode(Int.self, at: 0)
            #expect(reminders == 3, "the reminders are published, their deliveries pending")
            #expect(await receiver.requests.contains { $0.subscriberID == erased && $0.status == 500 }, "the receiver was tried")

            func observed() async throws -> [String] {
                var texts = try await ErasureStepTests.acrossSubscribers(client, other: other, erased: erased, pseudonym: pseudonym)
                // The other party of the transfer reads as the id, then as the pseudonym.
                texts.append(try await client.get("/v1/subscribers/\(other)/history", key: Keys.support).text
                    .replacingOccurrences(of: erased, with: "<erased>").replacingOccurrences(of: pseudonym, with: "<erased>"))
                let notifications = try await client.get("/v1/appstore/notifications?limit=200", key: Keys.support).json
                texts.append("notifications: \((notifications["notifications"]?.array.count ?? -1))")
                // The feed's tables, not /v1/changes: the feed shows a change once no
                // older transaction of the cluster is open, which suites running beside this one delay.
                texts.append(try await dependencies.pool.query("SELECT count(*) FROM changes").first!.decode(Int.self, at: 0).description)
                texts.append(try await dependencies.pool.query("""
                    SELECT string_agg(type || ' ' || body::text, E'\\n' ORDER BY sequence) FROM changes WHERE subscriber_id = \(other)
                    """).first!.decode(String.self, at: 0)
                    .replacingOccurrences(of: erased, with: "<erased>").replacingOccurrences(of: pseudonym, with: "<erased>"))
                return texts
            }
            let expected = try await observed()

            // Roles: only an admin erases; a reason is required.
            #expect(try await client.delete("/v1/subscribers/\(erased)", #"{"reason": "x"}"#, key: Keys.support).status == .forbidden)
            #expect(try await client.delete("/v1/subscribers/\(erased)", #"{"reason": "x"}"#, key: Keys.ingest).status == .forbidden)
            let reasonless = try await client.delete("/v1/subscribers/\(erased)", #"{}"#, key: Keys.admin)
            #expect(reasonless.status == .badRequest && reasonless.error.field == "reason")
            #expect(try await client.delete("/v1/subscribers/nobody-\(run)", #"{"reason": "x"}"#, key: Keys.admin).error.code == "subscriber_not_found")

            let erasure = try await client.delete("/v1/subscribers/\(erased)", #"{"reason": "account deleted (ticket 4711)"}"#, key: Keys.admin,
                                                  actor: "Ann")
            #expect(erasure.status == .ok, "\(erasure.text)")
            #expect(erasure.json["subscriberId"]?.string == erased)
            let sentBefore = await receiver.requests.count
            try await projectAll()
            try await sweepAndDispatch()
            // Nothing the receiver gets after the erasure names the subscriber.
            for request in await receiver.requests.dropFirst(sentBefore) {
                let text = String(decoding: request.body, as: UTF8.self) + " " + (request.eventID ?? "")
                #expect(PersonalDataScan(erased).matches(in: text).isEmpty, "\(text.prefix(300))")
            }

            // The subscriber is gone for reads, writes, grants and a second erasure.
            for path in ["", "/history", "/explain"] {
                let read = try await client.get("/v1/subscribers/\(erased)\(path)", key: Keys.admin)
                #expect(read.status == .notFound && read.error.code == "erased", "\(path): \(read.text)")
            }
            let fact = try await client.post("/v1/subscribers/\(erased)/events", purchaseJSON("late-\(run)", at: "2025-02-15T00:00:00Z"),
                                             key: Keys.admin)
            #expect(fact.status == .gone && fact.error.code == "erased", "\(fact.text)")
            let grant = try await client.post("/v1/subscribers/\(erased)/grants", #"{"entitlement": "pro", "duration": "P1D", "reason": "x"}"#,
                                              key: Keys.admin)
            #expect(grant.status == .gone && grant.error.code == "erased")
            let again = try await client.delete("/v1/subscribers/\(erased)", #"{"reason": "again"}"#, key: Keys.admin)
            #expect(again.status == .notFound && again.error.code == "erased")
            // Audited reads that follow name the subscriber by its pseudonym.
            #expect(try await client.get("/v1/subscribers/\(erased)", key: Keys.support).status == .notFound)
            try await projectAll()

            // The other party's history and changes name the erased one by its pseudonym only.
            let history = try await client.get("/v1/subscribers/\(other)/history", key: Keys.support).text
            #expect(!history.contains(erased) && history.contains(pseudonym), "the other's history names the erased subscriber")
            let otherChanges = try await dependencies.pool.query("""
                SELECT string_agg(body::text, ' ') FROM changes WHERE subscriber_id = \(other) AND type = 'transferred_in'
                """).first!.decode(String.self, at: 0)
            #expect(!otherChanges.contains(erased) && otherChanges.contains(pseudonym), "the other's changes name the erased subscriber")
            let after = try await observed()
            #expect(after.count == expected.count)
            for (now, then) in zip(after, expected) { #expect(now == then) }

            // A notification about the erased subscriber (its token): 200, not applied, stored without it.
            var renewed = subscribed
            renewed.transactionID = "4\(UInt32.random(in: 0...UInt32.max))"
            renewed.purchaseDate = subscribed.expiresDate ?? subscribed.purchaseDate
            renewed.expiresDate = renewed.purchaseDate + 30 * 86_400
            let late = try await app.notify(.didRenew, transaction: renewed,
                                            renewal: TestAppStore.renewalInfo(originalTransactionID: subscribed.originalTransactionID ?? ""),
                                            signedDate: "2025-03-02T12:00:00Z")
            #expect(late.json["status"]?.string == "rejected", "\(late.text)")
            #expect(late.json["subscriberId"] == nil || late.json["subscriberId"] == .null)
            #expect(try await dependencies.pool.query("SELECT 1 FROM events WHERE stream_number = (SELECT number FROM streams WHERE stream_id = \(SubscriberStreams.streamID(for: erased))) AND type <> 'erased' AND position > \(erasure.json["position"]?.int ?? 0)").isEmpty,
                    "nothing is recorded after the erased event")
            try await projectAll()
            let notifications = try await client.get("/v1/appstore/notifications?limit=200", key: Keys.support).json
            #expect(notifications["notifications"]?.array.count == 2, "the late notification is listed, not applied")

            // The audit keeps who looked and who erased, under the pseudonym.
            let audit = try await client.get("/v1/audit?subscriberId=\(erased)&limit=500", key: Keys.admin).json["entries"]?.array ?? []
            #expect(audit.allSatisfy { $0["subscriberId"]?.string == pseudonym }, "\(audit.prefix(3))")
            #expect(audit.contains { $0["action"]?.string == "erase" && $0["actor"]?.string == "Ann" && $0["status"]?.int == 200 })
            #expect(audit.contains { $0["action"]?.string == "history" })

            // A rebuild gives the live rows.
            let live = try await dependencies.readModelRows()
            try await dependencies.store.rebuildStreamwise(SubscriptionProjection(store: dependencies.store, catalog: catalog), chunkSize: 7)
            try await dependencies.store.rebuildStreamwise(ReminderProjection(store: dependencies.store, catalog: catalog), chunkSize: 7)
            #expect(try await dependencies.readModelRows() == live)
            #expect(try await dependencies.pool.query("SELECT 1 FROM reminders WHERE subscriber_id IN (\(erased), \(pseudonym))").isEmpty)

            // The whole database: none of the erased subscriber's personal data, in any readable form.
            let dump = try ChildProcess.run(["/usr/lib/postgresql/15/bin/pg_dump", "--data-only", "-d", dependencies.pool.configuration.conninfo])
            #expect(dump.status == 0, "pg_dump: \(dump.output.prefix(500))")
            #expect(dump.output.contains(pseudonym), "the dump holds the pseudonym's rows")
            #expect(dump.output.contains("rem:\(pseudonym):") && dump.output.contains(WebhookDeliveryStore.erasedDeliveryError),
                    "the dump holds the reminders' changes and their stopped deliveries")
            #expect(dump.output.contains(other) && dump.output.contains("tablet-\(other)"), "the dump holds what is not erased")
            for value in [erased, erased.uppercased(), "phone-\(erased)", "tablet-\(erased)", "watch-\(erased)"] {
                let found = PersonalDataScan(value).matches(in: dump.output)
                #expect(found.isEmpty, "the dump holds \(value): \(dump.output.components(separatedBy: "\nCOPY ").filter { !PersonalDataScan(value).matches(in: $0).isEmpty }.map { $0.prefix(60) })")
            }
        } }
    }

    /// Writes racing an erasure: each is either recorded before it (201) or
    /// refused after it (410); nothing follows the `erased` event, and the
    /// subscriber's key is gone.
    @Test func writesRacingAnErasureAreRecordedBeforeOrRefused() async throws {
        try await withApp { client, dependencies in
            for round in 0..<5 {
                let id = "race-\(round)-" + UUID().uuidString.lowercased()
                #expect(try await client.post("/v1/subscribers/\(id)/events", purchaseJSON("r\(round)-0-\(id)", device: "d-\(id)")).status == .created)
                let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                    for index in 1...12 {
                        group.addTask {
                            Int(try await client.post("/v1/subscribers/\(id)/events",
                                                      purchaseJSON("r\(round)-\(index)-\(id)", device: "d\(index)-\(id)"),
                                                      key: Keys.admin).status.code)
                        }
                    }
                    group.addTask {
                        try await Task.sleep(for: .milliseconds(Int.random(in: 0...20)))
                        return Int(try await client.delete("/v1/subscribers/\(id)", #"{"reason": "race"}"#, key: Keys.admin).status.code) + 1000
                    }
                    return try await group.reduce(into: [Int]()) { $0.append($1) }
                }
                #expect(statuses.filter { $0 >= 1000 } == [1200], "round \(round): \(statuses)")
                #expect(statuses.filter { $0 < 1000 }.allSatisfy { $0 == 201 || $0 == 410 }, "round \(round): \(statuses)")
                let events = try await dependencies.pool.query("""
                    SELECT type FROM events WHERE stream_number = (SELECT number FROM streams WHERE stream_id = \(SubscriberStreams.streamID(for: id))) ORDER BY stream_version
                    """).map { try $0.decode(String.self, at: 0) }
                #expect(events.last == "erased", "round \(round): \(events)")
                #expect(events.count == 1 + statuses.filter { $0 == 201 }.count + 1, "round \(round): every 201 is stored, before the erasure")
                #expect(try await dependencies.pool.query("SELECT 1 FROM subscriber_keys WHERE subscriber_id = \(id)").isEmpty)
                #expect(try await dependencies.pool.query("SELECT 1 FROM subscriber_snapshots WHERE subscriber_id = \(id)").isEmpty)
            }
        }
    }
}

extension TestClientProtocol {
    /// DELETEs with a JSON body, a key and, optionally, `Subledger-Actor`.
    func delete(_ uri: String, _ json: String, key: String?, actor: String? = nil) async throws -> TestResponse {
        var headers: HTTPFields = key.map(Keys.bearer) ?? [:]
        headers[.contentType] = "application/json"
        if let actor { headers[HTTPField.Name("Subledger-Actor")!] = actor }
        return try await execute(uri: uri, method: .delete, headers: headers, body: ByteBuffer(string: json))
    }
}
