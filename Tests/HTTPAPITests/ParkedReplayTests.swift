import EventStore
import Foundation
import HTTPAPI
import Hummingbird
import HummingbirdTesting
import Ledger
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
import TestSupport
import Testing

@Suite("Parked event replay")
struct ParkedReplayTests {
    /// An event the subscriptions projection cannot read is parked; replaying
    /// it before the cause is fixed says so and keeps it parked; after the fix
    /// it reaches the read models and is no longer parked.
    @Test func aParkedEventIsReplayedOnceItsCauseIsFixed() async throws {
        try await withApp { client, dependencies in
            let store = dependencies.store
            let projection = SubscriptionProjection(store: store, catalog: dependencies.catalog.catalog)
            // A subscriber's stream has its key (the write path makes it with the first events).
            _ = try await dependencies.pool.withConnection { try await SubscriberKeys.key(for: "zoe", on: $0) }
            let broken = try await store.append(to: SubscriberStreams.streamID(for: "zoe"), events: [
                NewEvent(type: "purchased", data: Data(#"{"transactionId": "z1"}"#.utf8), idempotencyKey: "zoe-z1"),
            ])
            let position = broken.outcomes[0].position
            await #expect(throws: (any Error).self) { try await dependencies.project(projection) }
            let parked = try await dependencies.pool.withConnection { try await store.park(projection, reason: "cannot decode", on: $0) }
            #expect(parked?.position == position)
            #expect(try await store.parkedPositions(of: projection.name) == [position])

            let refused = try await client.post("/v1/parked/subscriptions/\(position)/replay", "", key: Keys.admin)
            #expect(refused.status == .conflict, "\(refused.text)")
            #expect(refused.error.code == "replay_failed")
            #expect(try await store.parkedPositions(of: projection.name) == [position])
            let reason = try await dependencies.pool.query("SELECT reason FROM consumer_parked_events").first?.decode(String.self, at: 0)
            #expect(reason?.hasPrefix("replay: ") == true)

            // The fix (here: the stored payload made whole).
            let fixed = #"{"transactionId": "z1", "originalTransactionId": "z1", "productId": "com.example.level2", "productType": "non-consumable", "purchaseDate": "2025-01-01T00:00:00Z", "quantity": 1, "environment": "Production", "source": "api"}"#
            try await dependencies.pool.query("UPDATE events SET data = \(PostgresJSON(text: fixed))::jsonb WHERE position = \(position)")
            let replayed = try await client.post("/v1/parked/subscriptions/\(position)/replay", "", key: Keys.admin)
            #expect(replayed.status == .ok, "\(replayed.text)")
            #expect(replayed.json["outcome"]?.string == "replayed")
            #expect(replayed.json["streamId"]?.string == SubscriberStreams.streamID(for: "zoe"))
            #expect(try await store.parkedPositions(of: projection.name).isEmpty)
            let entitlements = try await dependencies.pool.query("SELECT entitlement FROM entitlements WHERE subscriber_id = 'zoe'")
            #expect(try entitlements.map { try $0.decode(String.self, at: 0) } == ["level2"])

            let again = try await client.post("/v1/parked/subscriptions/\(position)/replay", "", key: Keys.admin)
            #expect(again.status == .notFound && again.error.code == "parked_event_not_found")
            let unknown = try await client.post("/v1/parked/nothing/\(position)/replay", "", key: Keys.admin)
            #expect(unknown.status == .notFound && unknown.error.code == "consumer_not_found")
            let bad = try await client.post("/v1/parked/subscriptions/first/replay", "", key: Keys.admin)
            #expect(bad.status == .badRequest && bad.error.field == "position")
            #expect(try await client.post("/v1/parked/subscriptions/\(position)/replay", "", key: Keys.support).status == .forbidden)
        }
    }
}

extension EventStore {
    /// Positions of the events set aside for a consumer, oldest first.
    func parkedPositions(of consumer: String) async throws -> [Int64] {
        try await pool.query("SELECT position FROM consumer_parked_events WHERE consumer = \(consumer) ORDER BY position")
            .map { try $0.decode(Int64.self, at: 0) }
    }
}
