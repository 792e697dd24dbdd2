import AppStore
import AppStoreTesting
import Foundation
import Hummingbird
import HummingbirdTesting
import JSON
import Ledger
import Postgres
import HTTPAPI
import SubledgerApp
import SubledgerAppTesting
import Testing

extension AppStoreNotificationTests {
    /// `GET /v1/appstore/notifications`: support sees what became of each
    /// notification, by subscriber and by status, never the signed payload.
    @Test func supportListsStoredNotificationsWithoutTheirPayloads() async throws {
        try await withAppStore { app in
            let applied = try await app.notify(.subscribed, .initialBuy, transaction: first, renewal: renewal())
            var orphan = TestAppStore.subscription(transactionID: "4000000000000002", originalTransactionID: "4000000000000001",
                                                   purchaseDate: TestAppStore.date("2025-04-01T11:59:00Z"),
                                                   expiresDate: TestAppStore.date("2025-05-01T11:59:00Z"))
            orphan.appAccountToken = nil
            let pending = try await app.notify(.didRenew, transaction: orphan, signedDate: "2025-04-01T12:00:00Z")
            let subscriber = TestAppStore.subscriberID.lowercased()

            func list(_ query: String, key: String = Keys.support) async throws -> [JSONValue] {
                let response = try await app.client.get("/v1/appstore/notifications" + query, key: key)
                #expect(response.status == .ok, "\(response.text)")
                #expect(!response.text.contains("signedPayload") && !response.text.contains("eyJ"), "a payload leaked")
                return response.json["notifications"]?.array ?? []
            }
            let all = try await list("")
            #expect(all.map { $0["notificationUUID"]?.string } == [pending.json["notificationUUID"]?.string, applied.json["notificationUUID"]?.string])
            #expect(all.first?.keys == [
                "notificationUUID", "type", "subtype", "status", "attribution", "environment", "subscriberId", "transactionId",
                "originalTransactionId", "productId", "summary", "errorCode", "errorMessage", "signedDate", "receivedAt", "appliedAt",
            ])

            let unattributed = try await list("?status=pending", key: Keys.admin)
            #expect(unattributed.count == 1)
            #expect(unattributed.first?["attribution"]?.string == "unattributed")
            #expect(unattributed.first?["subscriberId"] == .null)
            #expect(unattributed.first?["originalTransactionId"]?.string == "4000000000000001")
            #expect(unattributed.first?["appliedAt"] == .null)

            let mine = try await list("?subscriberId=\(subscriber)")
            #expect(mine.map { $0["status"]?.string } == ["applied"])
            #expect(mine.first?["type"]?.string == "SUBSCRIBED")
            #expect(mine.first?["subtype"]?.string == "INITIAL_BUY")
            #expect(mine.first?["environment"]?.string == "Sandbox")
            #expect(mine.first?["appliedAt"]?.string != nil)
            #expect(try await list("?limit=1").count == 1)
            #expect(try await list("?subscriberId=nobody").isEmpty)

            for (query, field) in [("?status=late", "status"), ("?limit=0", "limit"), ("?limit=1001", "limit"), ("?subscriberId=", "subscriberId")] {
                let response = try await app.client.get("/v1/appstore/notifications" + query, key: Keys.support)
                #expect(response.status == .badRequest, "\(query)")
                #expect(response.error.field == field, "\(query)")
            }
            #expect(try await app.client.get("/v1/appstore/notifications", key: Keys.ingest).status == .forbidden)
            #expect(try await app.client.get("/v1/appstore/notifications", key: nil).status == .unauthorized)
        }
    }
}

@Suite("GET /v1/parked")
struct ParkedRouteTests {
    @Test func adminsSeeWhatProjectionsSetAside() async throws {
        try await withApp { client, dependencies in
            // A parked event names its stream (a pseudonym); the listing names the subscriber while its key exists.
            for subscriber in ["alice", "bob"] {
                _ = try await dependencies.pool.withConnection { try await SubscriberKeys.key(for: subscriber, on: $0) }
            }
            try await dependencies.pool.query("""
                INSERT INTO consumer_parked_events (consumer, position, stream_id, stream_version, type, reason, parked_at) VALUES
                ('reminders', 7, \(SubscriberStreams.streamID(for: "alice")), 3, 'purchased', 'cannot compute the period', '2025-01-01T00:00:00Z'),
                ('reminders', 9, \(SubscriberStreams.streamID(for: "bob")), 1, 'renewed', 'the row was locked', '2025-01-02T00:00:00Z'),
                ('other', 4, 'elsewhere', 1, 'odd', 'no handler', '2025-01-03T00:00:00Z')
                """)
            let response = try await client.get("/v1/parked", key: Keys.admin)
            #expect(response.status == .ok)
            let parked = response.json["parked"]?.array ?? []
            #expect(parked.map { $0["position"]?.int } == [4, 9, 7])
            #expect(parked.last?.keys == ["consumer", "position", "streamId", "streamVersion", "subscriberId", "type", "reason", "parkedAt"])
            #expect(parked.last?["subscriberId"]?.string == "alice")
            #expect(parked.last?["parkedAt"]?.string == "2025-01-01T00:00:00Z")
            #expect(parked.last?["reason"]?.string == "cannot compute the period")
            #expect(parked.first?["subscriberId"] == .null)

            let reminders = try await client.get("/v1/parked?consumer=reminders&limit=1", key: Keys.admin)
            #expect(reminders.json["parked"]?.array.map { $0["position"]?.int } == [9])
            #expect(try await client.get("/v1/parked?consumer=", key: Keys.admin).error.field == "consumer")
            #expect(try await client.get("/v1/parked?limit=x", key: Keys.admin).error.field == "limit")
            #expect(try await client.get("/v1/parked", key: Keys.support).status == .forbidden)
            #expect(try await client.get("/v1/parked", key: Keys.ingest).status == .forbidden)
            #expect(try await client.get("/v1/parked", key: nil).status == .unauthorized)
        }
    }
}
