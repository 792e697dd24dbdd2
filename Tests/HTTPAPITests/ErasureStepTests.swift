import AppStore
import AppStoreTesting
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

/// The standard erasure steps on a database written through the router:
/// afterwards the tables they cover hold the erased subscriber under its
/// pseudonym only (a `pg_dump` of them holds no readable form of the id, its
/// device id or its `appAccountToken`), while the statistics, the listings'
/// counts and another subscriber read exactly as before.
@Suite struct ErasureStepTests {
    /// Each table a step covers, with the column naming the subscriber.
    static let covered: [(table: String, column: String)] = [
        ("subscriptions", "subscriber_id"), ("non_renewing_periods", "subscriber_id"), ("entitlements", "subscriber_id"),
        ("product_activity", "subscriber_id"), ("subscriber_snapshots", "subscriber_id"), ("subscriber_state_cache", "subscriber_id"),
        ("reminders", "subscriber_id"), ("reminder_subscribers", "subscriber_id"), ("transaction_owners", "subscriber_id"),
        ("appstore_notifications", "subscriber_id"), ("consumer_parked_events", "stream_id"),
        ("changes", "subscriber_id"), ("change_subscribers", "subscriber_id"), ("webhook_deliveries", "subscriber_id"),
        ("audit_entries", "subscriber_id"),
    ]
    /// The tables whose rows stay, under the pseudonym.
    static let kept: Set<String> = ["subscriptions", "non_renewing_periods", "entitlements", "product_activity",
                                    "appstore_notifications",
                                    "changes", "change_subscribers", "webhook_deliveries", "audit_entries"]

    /// Tables naming devices, not subscribers: rewritten, and dumped.
    static let deviceTables = ["invalid_product_reports", "invalid_product_devices", "invalid_product_identifiers"]

    /// What must read the same before and after an erasure: statistics in
    /// both environments, the other subscriber's state, the subscriptions
    /// listing (a set of rows, the erased subscriber named alike) and the
    /// invalid-product listing.
    static func acrossSubscribers(_ client: any TestClientProtocol, other: String, erased: String,
                                  pseudonym: String) async throws -> [String] {
        var texts: [String] = []
        for at in ["2025-01-15T00:00:00Z", "2025-02-05T00:00:00Z", "2025-02-20T00:00:00Z", "2025-03-05T00:00:00Z"] {
            texts.append(try await client.get("/v1/stats?at=\(at)", key: Keys.support).text)
            texts.append(try await client.get("/v1/stats?at=\(at)&environment=Sandbox", key: Keys.support).text)
        }
        texts.append(try await client.get("/v1/stats/active?from=2025-01-01T00:00:00Z&to=2025-04-01T00:00:00Z&interval=week",
                                          key: Keys.support).text)
        texts.append(try await client.get("/v1/subscribers/\(other)?at=2025-02-20T00:00:00Z", key: Keys.support).text)
        let listing = try await client.get("/v1/subscriptions?limit=100", key: Keys.support).json
        texts.append((listing["subscriptions"]?.array ?? []).map { row in
            row.keys.sorted().map { "\($0)=\(row[$0] ?? .null)" }.joined(separator: ",")
                .replacingOccurrences(of: erased, with: "<erased>").replacingOccurrences(of: pseudonym, with: "<erased>")
        }.sorted().joined(separator: "\n"))
        texts.append(try await client.get("/v1/products/invalid", key: Keys.support).text)
        return texts
    }

    @Test func standardStepsKeepCountsAndLeaveNoReadableID() async throws {
        var dependencies = try await makeDependencies()
        dependencies.appStoreVerifier = AppStoreNotificationTests.verifier
        let ready = dependencies
        try await withRouter(ready) { client in
            let dependencies = ready
            // An appAccountToken is a UUID; the subscriber id is it lowercased.
            let erased = UUID().uuidString.lowercased()
            let other = "keep-" + UUID().uuidString.lowercased()
            // Transaction ids are the store's, not derived from the subscriber.
            let run = UInt32.random(in: 0...UInt32.max)
            // A registered webhook: publishing a change makes its delivery row
            // (nothing sends it here: the dispatcher is not running).
            #expect(try await client.post("/v1/webhooks", #"{"url": "http://127.0.0.1:9/hook", "description": "backend"}"#,
                                          key: Keys.admin).status == .created)
            // Long enough a history for a snapshot and a cached state.
            for index in 0..<70 {
                let response = try await client.post("/v1/subscribers/\(erased)/events",
                                                     purchaseJSON("c-\(run)-\(index)", product: "com.example.coins.100",
                                                                  at: "2025-01-01T00:00:\(String(format: "%02d", index % 60))Z"))
                #expect(response.status == .created, "\(response.text)")
            }
            for (subscriber, prefix) in [(erased, "a"), (other, "b")] {
                #expect(try await client.post("/v1/subscribers/\(subscriber)/events",
                                              purchaseJSON("\(prefix)-pass-\(run)", at: "2025-02-01T00:00:00Z", device: "device-\(subscriber)")).status == .created)
                #expect(try await client.post("/v1/subscribers/\(subscriber)/events",
                                              purchaseJSON("\(prefix)-pro-\(run)", product: "com.example.pro.monthly", at: "2025-02-10T00:00:00Z",
                                                           expires: "2025-03-10T00:00:00Z")).status == .created)
            }
            #expect(try await client.post("/v1/subscribers/\(other)/events",
                                          purchaseJSON("b-level2", product: "com.example.level2", at: "2025-02-11T00:00:00Z")).status == .created)
            // A pass ending in 20 days, whose reminders the sweeper publishes below.
            #expect(try await client.post("/v1/subscribers/\(erased)/events",
                                          purchaseJSON("a-soon-\(run)", at: RFC3339.format(Date() - 10 * 86_400))).status == .created)
            var subscribed = TestAppStore.subscription(transactionID: "3\(UInt32.random(in: 0...UInt32.max))",
                                                       originalTransactionID: "3\(UInt32.random(in: 0...UInt32.max))")
            subscribed.appAccountToken = erased.uppercased()
            let app = AppStoreApp(client: client, dependencies: dependencies)
            let notified = try await app.notify(.subscribed, .initialBuy, transaction: subscribed,
                                                renewal: TestAppStore.renewalInfo(originalTransactionID: subscribed.originalTransactionID ?? ""))
            #expect(notified.json["subscriberId"]?.string == erased)
            #expect(try await client.get("/v1/subscribers/\(erased)").status == .ok)
            let catalog = dependencies.catalog.catalog
            try await dependencies.project(SubscriptionProjection(store: dependencies.store, catalog: catalog))
            try await dependencies.project(ReminderProjection(store: dependencies.store, catalog: catalog))
            try await dependencies.project(ChangeFeedConsumer(catalog: catalog))
            try await dependencies.pool.query("UPDATE reminders SET next_attempt_at = now() WHERE subscriber_id = \(erased) AND status = 'pending'")
            let sweeper = ChangeTimeSweeper(pool: dependencies.pool, catalog: catalog)
            while try await sweeper.sweepOnce() > 0 {}
            let published = try await dependencies.pool.query("""
                SELECT count(*) FROM webhook_deliveries WHERE starts_with(change_id, 'rem:' || \(erased) || ':')
                """).first!.decode(Int.self, at: 0)
            #expect(published == 3, "the reminders are published, with their deliveries")
            // Invalid-product reports from the subscriber's device (twice) and another one.
            for device in ["device-\(erased)", "device-\(erased)", "device-\(other)"] {
                #expect(try await client.post("/v1/products/invalid",
                                              #"{"identifiers": ["com.example.gone"], "deviceId": "\#(device)"}"#).status == .created)
            }
            // Audited reads of the subscriber, written to audit_entries.
            #expect(try await client.get("/v1/subscribers/\(erased)/history", key: Keys.support).status == .ok)
            #expect(try await client.get("/v1/subscribers/\(erased)/explain", key: Keys.admin).status == .ok)
            _ = try await dependencies.auditTrail.flush(to: dependencies.pool)
            try await dependencies.pool.query("""
                INSERT INTO consumer_parked_events (consumer, position, stream_id, stream_version, type, reason)
                VALUES ('subscriptions', 1, \(SubscriberStreams.streamID(for: erased)), 1, 'purchased', 'unreadable')
                """)

            func count(_ table: String, _ subscriberID: String) async throws -> Int {
                let column = Self.covered.first { $0.table == table }?.column ?? "subscriber_id"
                let value = column == "stream_id" ? SubscriberStreams.streamID(for: subscriberID) : subscriberID
                return try await dependencies.pool.query("SELECT count(*) FROM \(unsafeRaw: table) WHERE \(unsafeRaw: column) = \(value)")
                    .first!.decode(Int.self, at: 0)
            }
            func dump() throws -> String {
                let dump = try ChildProcess.run(["/usr/lib/postgresql/15/bin/pg_dump", "--data-only"]
                    + (Self.covered.map(\.table) + Self.deviceTables).flatMap { ["-t", $0] } + ["-d", dependencies.pool.configuration.conninfo])
                #expect(dump.status == 0, "pg_dump: \(dump.output.prefix(500))")
                return dump.output
            }
            let personal = [erased, erased.uppercased(), "device-\(erased)"]

            // The snapshot is stored after its commit, off the request path.
            let deadline = ContinuousClock.now + .seconds(10)
            while try await count("subscriber_snapshots", erased) == 0, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            var before: [String: Int] = [:]
            for (table, _) in Self.covered { before[table] = try await count(table, erased) }
            #expect(before.values.allSatisfy { $0 > 0 }, "every covered table holds the subscriber before: \(before)")
            // The scan sees the token inside the stored JWS before the steps run.
            let dumpedBefore = try dump()
            for value in personal { #expect(!PersonalDataScan(value).matches(in: dumpedBefore).isEmpty, "\(value) before") }

            let pseudonym = SubscriberPseudonyms.pseudonym(for: erased)
            func observed() async throws -> [String] {
                var texts = try await Self.acrossSubscribers(client, other: other, erased: erased, pseudonym: pseudonym)
                // An erased subscriber's reminders go (nothing is sent to it); its notifications stay.
                let notifications = try await client.get("/v1/appstore/notifications?limit=200", key: Keys.support).json
                texts.append("notifications: \(notifications["notifications"]?.array.count ?? -1)")
                return texts + (try await dependencies.readModelRows()).filter { $0.contains(other) }
            }
            let expected = try await observed()

            try await dependencies.pool.withTransaction { connection in
                try await ErasureSteps.standard.run(subscriberID: erased, pseudonym: pseudonym, on: connection)
            }

            for (table, _) in Self.covered {
                #expect(try await count(table, erased) == 0, "\(table) still names the subscriber")
                #expect(try await count(table, pseudonym) == (Self.kept.contains(table) ? before[table] : 0),
                        "\(table) keeps its rows under the pseudonym, or deletes them")
            }
            let pending = try await dependencies.pool.query(
                "SELECT count(*) FROM reminders WHERE subscriber_id = \(pseudonym) AND status = 'pending'")
            #expect(try pending.first!.decode(Int.self, at: 0) == 0, "no reminder of an erased subscriber is sent")

            let after = try await observed()
            #expect(after.count == expected.count)
            for (now, then) in zip(after, expected) {
                #expect(now == then)
            }
            let dumpedAfter = try dump()
            #expect(dumpedAfter.contains(pseudonym), "the dump covers the rewritten rows")
            #expect(dumpedAfter.contains("rem:\(pseudonym):"), "the reminders' changes and deliveries are kept under the pseudonym")
            #expect(dumpedAfter.contains(other))
            for value in personal {
                #expect(PersonalDataScan(value).matches(in: dumpedAfter).isEmpty,
                        "the covered tables still hold \(value): \(dumpedAfter.components(separatedBy: "\nCOPY ").filter { !PersonalDataScan(value).matches(in: $0).isEmpty }.map { $0.prefix(60) })")
            }
        }
    }

    /// sql/0028's rewrite of a change id and body: the `rem:<id>:` prefix
    /// compared whole (no pattern: `%`, `_`, `:` and quotes in an id are
    /// plain characters), strings equal to the id replaced at any depth,
    /// personal members dropped, everything else kept.
    @Test func changeIdsAndBodiesAreRewrittenExactly() async throws {
        let dependencies = try await makeDependencies()
        defer { Task { [pool = dependencies.pool] in await pool.close() } }
        for id in ["a", "a:b", "50%_off", #"o'\"q\\"#, "caf\u{E9}-\u{1F600}", String(repeating: "z", count: 200)] {
            let pseudonym = SubscriberPseudonyms.pseudonym(for: id)
            let cases: [(String, String)] = [
                ("rem:\(id):pass:2026-12-18T00:00:00Z:P1D", "rem:\(pseudonym):pass:2026-12-18T00:00:00Z:P1D"),
                ("rem:\(id):pass:2026-12-18T00:00:00Z:P0D:Sandbox", "rem:\(pseudonym):pass:2026-12-18T00:00:00Z:P0D:Sandbox"),
                ("rem:\(id)", "rem:\(id)"), ("rem:x\(id):g", "rem:x\(id):g"), ("chg_7_\(id)", "chg_7_\(id)"),
            ]
            for (given, expected) in cases {
                let rewritten = try await dependencies.pool.query("SELECT subledger_erased_change_id(\(given), \(id), \(pseudonym))")
                #expect(try rewritten.first!.decode(String.self, at: 0) == expected, "\(id): \(given)")
            }
            let body: JSONValue = .object([
                "id": .string(cases[0].0), "subscriberId": .string(id), "type": .string("renewal_reminder"),
                "data": .object(["id": .string(cases[0].0), "subscriberId": .string(id), "deviceId": .string("d-\(id)"),
                                 "list": .array([.string(id), .string("keep \(id)"), .integer(7), .null])]),
            ])
            let text = String(decoding: try JSONEncoder().encode(body), as: UTF8.self)
            let rows = try await dependencies.pool.query("""
                SELECT subledger_erased_change_body(\(text)::jsonb, \(id), \(pseudonym), \(unsafeRaw: ChangeRows.personalMembersSQL))::text
                """)
            let rewritten = try JSONDecoder().decode(JSONValue.self, from: Data(try rows.first!.decode(String.self, at: 0).utf8))
            let expected: JSONValue = .object([
                "id": .string(cases[0].1), "subscriberId": .string(pseudonym), "type": .string("renewal_reminder"),
                "data": .object(["id": .string(cases[0].1), "subscriberId": .string(pseudonym),
                                 "list": .array([.string(pseudonym), .string("keep \(id)"), .integer(7), .null])]),
            ])
            #expect(rewritten == expected, "\(id)")
        }
    }
}
