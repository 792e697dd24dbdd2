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

/// sql/0035 cuts the idempotency keys stored before it (the stream's
/// pseudonym, a separator, the whole 43-digit digest) to the form the
/// service stores now (the digest's first 22 digits): a fact retried after
/// the migration is still a duplicate, for every kind of fact, and every key
/// has the new form.
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
            let stored = try await Self.keys(dependencies)
            #expect(stored.count == facts.count && stored.allSatisfy { $0.count == SubscriberStreams.storeKeyLength })

            // As stored before sql/0035: the pseudonym, a separator, the whole digest.
            var expected: [String] = []
            try await dependencies.pool.withTransaction { connection in
                for row in try await connection.query("SELECT subscriber_id FROM subscriber_keys") {
                    let subscriber = try row.decode(String.self, at: 0)
                    let pseudonym = SubscriberPseudonyms.pseudonym(for: subscriber)
                    let key = try #require(try await SubscriberKeys.existingKey(for: subscriber, on: connection))
                    for event in try await EventStore.readStream(SubscriberStreams.streamID(for: subscriber), on: connection) {
                        let decoded = try LedgerEvent.decodeFast(type: event.type, schemaVersion: event.schemaVersion, data: event.data)
                        guard let ledgerKey = try key.openingPersonalFields(of: decoded, pseudonym: pseudonym).idempotencyKey else { continue }
                        expected.append(SubscriberStreams.storeKey(key: key, ledgerKey: ledgerKey))
                        try await connection.query("""
                            UPDATE events SET idempotency_key = \(pseudonym + "\u{1F}" + key.digest(ofLedgerKey: ledgerKey))
                            WHERE position = \(event.position)
                            """)
                    }
                }
            }
            #expect(expected.count == stored.count && Set(expected) == Set(stored), "the service computes the keys it stored")
            #expect(try await Self.keys(dependencies).allSatisfy { $0.count == 79 && !Set(stored).contains($0) })

            let migration = try #require(try Migrator.load(from: try SQLDirectory.locate()).first { $0.version == 35 })
            try await dependencies.pool.withConnection { try await $0.execute(unsafeSQL: migration.sql) }
            #expect(try await Self.keys(dependencies) == stored, "every key is cut to the form the service computes")
            dependencies.ledgers.forget(subscribers)
            for (subscriber, fact) in facts {
                let retried = try await client.post("/v1/subscribers/\(subscriber)/events", fact)
                #expect(retried.status == .ok && retried.json["duplicate"]?.bool == true, "\(retried.text)")
            }
            #expect(try await Self.keys(dependencies) == stored)
        }
    }

    static func keys(_ dependencies: AppDependencies) async throws -> [String] {
        try await dependencies.pool.query("SELECT idempotency_key FROM events WHERE idempotency_key IS NOT NULL ORDER BY position")
            .map { try $0.decode(String.self, at: 0) }
    }
}
