import EventStore
import Foundation
import Ledger
import Logging
@testable import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
import TestSupport
import Testing

/// Pseudonymous streams and subscriber keys on real databases
/// (docs/decisions/0004-erasure-by-crypto-shredding.md): pseudonyms are
/// the documented digests; a subscriber gets one key however many writers create
/// it at once; what is stored names neither the subscriber nor its devices,
/// and reads open it again.
@Suite struct SubscriberKeyWriteTests {
    /// The unkeyed scheme is SHA-256 of `subscriber` US id, as PostgreSQL
    /// computes it; the keyed one is HMAC-SHA256 under the key HKDF derives
    /// from the secret (known answers computed apart, with Python's `hmac`).
    @Test func pseudonymsAreTheDocumentedDigests() async throws {
        let dependencies = try await makeDependencies(poolSize: 2)
        var ids = ["", "a", "ö-ü", "𝄞 clef", "with'quote", String(repeating: "x", count: 256)]
        ids += (0..<200).map { index in index % 2 == 0 ? UUID().uuidString : "s\(index)-\(UUID().uuidString.prefix(index % 9))" }
        let rows = try await dependencies.pool.query("""
            SELECT x, 'ps-' || left(encode(sha256(convert_to('subscriber' || chr(31) || x, 'UTF8')), 'hex'), 32)
            FROM jsonb_array_elements_text(\(JSONArgument.strings(ids))::jsonb) AS x
            """)
        #expect(rows.count == ids.count)
        for row in rows {
            let id = try row.decode(String.self, at: 0)
            #expect(try row.decode(String.self, at: 1) == PseudonymScheme.unkeyed.pseudonym(for: id), "\(id)")
        }
        await dependencies.pool.close()
        let keyed = PseudonymScheme(try InstallationSecret("stream-naming-test-secret-a-0123456789abcdef"))
        #expect(keyed.name == "hmac-sha256:826ebbfbeefccdb7")
        #expect(keyed.pseudonym(for: "sub-1") == "ps-77269e620c9e4672f61144fbc8c2c270")
        #expect(keyed.pseudonym(for: "ö-ü") == "ps-4b593c020ab2c6f062b022a2ef6fe355")
        let other = PseudonymScheme(try InstallationSecret("stream-naming-test-secret-b-0123456789abcdef"))
        #expect(ids.allSatisfy { keyed.pseudonym(for: $0) != other.pseudonym(for: $0) && SubscriberPseudonyms.isPseudonym(keyed.pseudonym(for: $0)) })
    }

    /// Writers without a shared cache or combiner stand for instances.
    @Test func concurrentFirstWritesMakeOneKeyAndEveryEventOpens() async throws {
        let dependencies = try await makeDependencies(poolSize: 8)
        let writers = (0..<4).map { _ in
            LedgerWriter(pool: dependencies.pool, store: dependencies.store, catalog: dependencies.catalog.catalog,
                         restorePolicy: .transfer, logger: dependencies.logger)
        }
        let reader = SubscriberReader(store: dependencies.store, catalog: dependencies.catalog.catalog)
        for round in 0..<20 {
            let id = "sub-\(round)-" + UUID().uuidString.lowercased()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, writer) in writers.enumerated() {
                    group.addTask {
                        let request = try FactRequest.parse(json: Data(purchaseJSON(
                            "t-\(round)-\(index)-\(UUID().uuidString)", at: "2025-01-01T00:00:0\(index)Z", device: "device-\(index)-\(id)").utf8))
                        _ = try await writer.record(request, subscriberID: id)
                    }
                }
                try await group.waitForAll()
            }
            let keys = try await dependencies.pool.query(
                "SELECT pseudonym, subscriber_id FROM subscriber_keys WHERE subscriber_id = \(id)")
            #expect(keys.count == 1, "round \(round): \(keys.count) keys")
            #expect(try keys.first?.decode(String.self, at: 0) == SubscriberPseudonyms.pseudonym(for: id))
            // Read back: every device id opens with the one key.
            let history = try await reader.timeline(of: id)
            #expect(history.count == 4)
            let devices = Set(history.compactMap { $0.data["deviceId"]?.string })
            #expect(devices == Set((0..<4).map { "device-\($0)-\(id)" }), "round \(round)")
            // Stored: the stream, the payloads and the idempotency keys name neither.
            let stored = try await dependencies.pool.query("""
                SELECT s.stream_id || ' ' || e.data::text || ' ' || e.event_id::text
                FROM events e JOIN streams s ON s.number = e.stream_number
                WHERE s.stream_id = \(SubscriberStreams.streamID(for: id))
                """)
            #expect(stored.count == 4)
            for row in stored {
                let text = try row.decode(String.self, at: 0)
                #expect(PersonalDataScan(id).matches(in: text).isEmpty, "round \(round): the subscriber id is stored readable")
                #expect(!text.contains("device-"), "round \(round): a device id is stored readable")
            }
        }
        await dependencies.pool.close()
    }

    /// A retried fact is still a duplicate: its digested idempotency key is
    /// the same under the same subscriber key.
    @Test func aRetriedFactIsADuplicate() async throws {
        let dependencies = try await makeDependencies(poolSize: 2)
        let writer = LedgerWriter(pool: dependencies.pool, store: dependencies.store, catalog: dependencies.catalog.catalog,
                                  restorePolicy: .transfer, logger: dependencies.logger)
        let id = UUID().uuidString.lowercased()
        let request = try FactRequest.parse(json: Data(purchaseJSON("retried-\(id)", device: "device-\(id)").utf8))
        let first = try await writer.record(request, subscriberID: id)
        let second = try await writer.record(request, subscriberID: id)
        #expect(!first.isDuplicate)
        #expect(second.isDuplicate)
        #expect(second.position == first.position)
        await dependencies.pool.close()
    }

    @Test func aStoredKeyOfTheWrongLengthIsRefused() async throws {
        let dependencies = try await makeDependencies(poolSize: 2)
        let refused = await #expect(throws: PostgresError.self) {
            try await dependencies.pool.withConnection { connection in
                try await connection.query("INSERT INTO subscriber_keys (pseudonym, subscriber_id, key) VALUES ('ps-x', 'x', \(Data(repeating: 1, count: 16)))")
            }
        }
        #expect(refused != nil)
        await dependencies.pool.close()
    }
}
