import EventStore
import Foundation
import Hummingbird
import HummingbirdTesting
import Ledger
@testable import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
import TestSupport
import Testing

/// sql/0035 cut the idempotency keys stored before it (the stream's
/// pseudonym, a separator, the whole 43-digit digest) to the digest's first
/// 22 digits, and sql/0044 keeps each key as the MD5 of that text, for its
/// event's id: a fact retried after both is still a duplicate, for every
/// kind of fact, and every key has the form the service stores now.
@Suite struct CompactKeyMigrationTests {
    @Test func keysStoredBeforeAreCutAndRetriedFactsStayDuplicates() async throws {
        try await withApp { client, dependencies in
            let subscribers = (0..<5).map { "keys-\($0)-" + UUID().uuidString.lowercased() }
            let run = UInt32.random(in: 0...UInt32.max)
            var facts: [(String, String)] = []
            for (index, subscriber) in subscribers.enumerated() {
                for month in 1...3 {
                    let fact = purchaseJSON("k-\(run)-\(index)-\(month)", product: "com.example.pass.30d", at: "2025-0\(month)-01T00:00:00Z",
                                            device: "device-\(month)-\(subscriber)")
                    #expect(try await client.post("/v1/subscribers/\(subscriber)/events", fact).status == .created)
                    facts.append((subscriber, fact))
                }
            }
            let stored = try await Self.ids(dependencies)
            // Back to a column of text, as before sql/0044.
            try await dependencies.pool.query("ALTER TABLE events ADD COLUMN idempotency_key text")

            // As stored before sql/0035: the pseudonym, a separator, the whole digest.
            var expected: [String] = []
            var keyedIDs: [String] = []
            try await dependencies.pool.withTransaction { connection in
                for row in try await connection.query("SELECT subscriber_id FROM subscriber_keys") {
                    let subscriber = try row.decode(String.self, at: 0)
                    let pseudonym = SubscriberPseudonyms.pseudonym(for: subscriber)
                    let key = try #require(try await SubscriberKeys.existingKey(for: subscriber, on: connection))
                    for event in try await EventStore.readStream(SubscriberStreams.streamID(for: subscriber), on: connection) {
                        let decoded = try LedgerEvent.decodeFast(type: event.type, schemaVersion: event.schemaVersion, data: event.data)
                        guard let ledgerKey = try key.openingPersonalFields(of: decoded, pseudonym: pseudonym).idempotencyKey else { continue }
                        expected.append(SubscriberStreams.storeKey(key: key, ledgerKey: ledgerKey))
                        keyedIDs.append(event.eventID.uuidString.lowercased())
                        try await connection.query("""
                            UPDATE events SET idempotency_key = \(pseudonym + "\u{1F}" + key.digest(ofLedgerKey: ledgerKey))
                            WHERE position = \(event.position)
                            """)
                    }
                }
            }
            #expect(keyedIDs.count == facts.count)
            let digests = try await dependencies.pool.query(
                "SELECT md5(k)::uuid::text FROM jsonb_array_elements_text(\(JSONArgument.strings(expected))::jsonb) k")
                .map { try $0.decode(String.self, at: 0) }
            #expect(digests == keyedIDs, "the service computes the keys it stored, as the events' ids")
            #expect(try await Self.keys(dependencies).allSatisfy { $0.count == 79 && !Set(stored).contains($0) })

            let migration = try #require(try Migrator.load(from: try SQLDirectory.locate()).first { $0.version == 35 })
            try await dependencies.pool.withConnection { try await $0.execute(unsafeSQL: migration.sql) }
            #expect(Set(try await Self.keys(dependencies)) == Set(expected), "every key is cut to the digest's first 22 digits")
            // As sql/0044 converts them: each key's digest becomes its event's id.
            try await dependencies.pool.query("""
                UPDATE events SET event_id = coalesce(md5(idempotency_key)::uuid, event_id);
                """)
            try await dependencies.pool.query("ALTER TABLE events DROP COLUMN idempotency_key")
            #expect(try await Self.ids(dependencies) == stored, "every key has the form the service stores")
            dependencies.ledgers.forget(subscribers)
            for (subscriber, fact) in facts {
                let retried = try await client.post("/v1/subscribers/\(subscriber)/events", fact)
                #expect(retried.status == .ok && retried.json["duplicate"]?.bool == true, "\(retried.text)")
            }
            #expect(try await Self.ids(dependencies) == stored)
        }
    }

    /// The ids of every event, in order.
    static func ids(_ dependencies: AppDependencies) async throws -> [String] {
        try await dependencies.pool.query("SELECT event_id::text FROM events ORDER BY position")
            .map { try $0.decode(String.self, at: 0) }
    }

    static func keys(_ dependencies: AppDependencies) async throws -> [String] {
        try await dependencies.pool.query("SELECT idempotency_key::text FROM events WHERE idempotency_key IS NOT NULL ORDER BY position")
            .map { try $0.decode(String.self, at: 0) }
    }
}
