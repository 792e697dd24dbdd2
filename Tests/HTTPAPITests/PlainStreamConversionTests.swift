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

/// A database written before erasure existed (streams `subscriber-<id>`,
/// personal fields and idempotency keys stored as sent) is converted when
/// it is prepared: every subscriber reads as before, retried facts are still
/// duplicates, nothing personal is left readable in the log, and a converted
/// subscriber can be erased.
@Suite struct PlainStreamConversionTests {
    /// Every start asks for the streams still to convert: the question reads
    /// the partial index of those (sql/0041), not every stream, and the
    /// index holds a plain stream and no converted one.
    @Test func theQuestionAtEveryStartReadsOnlyThePlainStreamsIndex() async throws {
        let dependencies = try await makeDependencies()
        defer { Task { await dependencies.pool.close() } }
        let writer = LedgerWriter(dependencies)
        var history = RandomHistory(seed: 41, subscribers: 30)
        try await writer.writeRandomBatches(20, of: 1...4, from: &history)
        try await dependencies.pool.query("INSERT INTO streams (stream_id) VALUES ('subscriber-plain-1')")
        try await dependencies.pool.query("ANALYZE streams")
        let question = PlainStreamConversion.pendingStreams(batch: 200)
        // Seq scans off: a table of 31 streams is one page, which a scan reads
        // cheaper than an index; the question is whether the index serves it.
        let plan = try await dependencies.pool.withConnection { connection in
            try await connection.query("SET enable_seqscan = off")
            let plan = try await connection.query(PostgresQuery(unsafeSQL: "EXPLAIN " + question.sql, binds: question.binds))
                .map { try $0.decode(String.self, at: 0) }.joined(separator: "\n")
            try await connection.query("RESET enable_seqscan")
            return plan
        }
        #expect(plan.contains("streams_unconverted") && !plan.contains("Seq Scan"), "\(plan)")
        #expect(try await dependencies.pool.query(question).map { try $0.decode(String.self, at: 0) } == ["subscriber-plain-1"])
        try await dependencies.pool.query("DELETE FROM streams WHERE stream_id = 'subscriber-plain-1'")
    }

    @Test func aPlainDatabaseReadsTheSameAfterConversionAndCanBeErased() async throws {
        try await withApp { client, dependencies in
            let subscribers = (0..<6).map { "old-\($0)-" + UUID().uuidString.lowercased() }
            // Transaction ids are the store's, not derived from subscribers.
            let run = UInt32.random(in: 0...UInt32.max)
            try await client.writePasses(subscribers, run: run)
            try await client.restorePass(of: 0, to: subscribers[1], run: run)
            func reads() async throws -> [String] { try await client.statesAndHistories(subscribers) }
            let before = try await reads()
            let positions = try await logPositions(dependencies)

            try await Self.writeAsBeforeErasureExisted(dependencies)
            let plain = try await dependencies.pool.query("SELECT data::text FROM events").map { try $0.decode(String.self, at: 0) }
            #expect(plain.contains { $0.contains("device-0-\(subscribers[0])") }, "the log is in the plain format before")
            dependencies.ledgers.forget(subscribers)

            let converted = try await PlainStreamConversion.run(conninfo: dependencies.pool.configuration.conninfo, batch: 4,
                                                                logger: dependencies.logger)
            #expect(converted == subscribers.count)
            #expect(try await PlainStreamConversion.run(conninfo: dependencies.pool.configuration.conninfo, logger: dependencies.logger) == 0,
                    "a second run finds nothing to convert")
            let kept = try await dependencies.pool.query("SELECT count(*) FROM unconverted_idempotency_keys").first!.decode(Int.self, at: 0)
            #expect(kept == 0, "the keys kept as written before erasure, which name the subscriber, are gone once converted")
            // Every converted event is stored under the key the service
            // stores now: its ledger key digested under the subscriber's key.
            var keyed = Set<Int64>()
            try await dependencies.pool.withConnection { connection in
                for subscriber in subscribers {
                    let key = try #require(try await SubscriberKeys.existingKey(for: subscriber, on: connection))
                    let pseudonym = SubscriberPseudonyms.pseudonym(for: subscriber)
                    for event in try await EventStore.readStream(SubscriberStreams.streamID(for: subscriber), on: connection) {
                        let decoded = try LedgerEvent.decodeFast(type: event.type, schemaVersion: event.schemaVersion, data: event.data)
                        let recorded = RecordedLedgerEvent(position: event.position, recordedAt: event.recordedAt,
                                                           event: try key.openingPersonalFields(of: decoded, pseudonym: pseudonym))
                        // A transfer's other party by id, as when its key was made.
                        let ledgerKey = try await SubscriberStreams.resolvingCounterparts([recorded], on: connection)[0].event.idempotencyKey
                        // The key is the event's id (sql/0044).
                        if let ledgerKey {
                            #expect(event.eventID == UUID(uuidString: EventStore.storedKey(SubscriberStreams.storeKey(key: key, ledgerKey: ledgerKey))),
                                    "\(event.type) at \(event.position)")
                            keyed.insert(event.position)
                        }
                    }
                }
            }

            #expect(try await reads() == before)
            // Every event of the ledger has a key, which is its id and which
            // the conversion changes (checked above); positions and versions stay.
            #expect(keyed.count == positions.count, "every event's id is checked")
            #expect(try await logPositions(dependencies).map { $0.split(separator: " ")[0...1].joined(separator: " ") }
                        == positions.map { $0.split(separator: " ")[0...1].joined(separator: " ") },
                    "positions and versions stay")
            let log = try await dependencies.pool.query("SELECT s.stream_id || ' ' || e.data::text || ' ' || e.event_id::text FROM events e JOIN streams s ON s.number = e.stream_number")
                .map { try $0.decode(String.self, at: 0) }.joined(separator: "\n")
            for subscriber in subscribers {
                #expect(PersonalDataScan(subscriber).matches(in: log).isEmpty, "\(subscriber) is still readable in the log")
            }
            // A retried fact is a duplicate of the converted one.
            let retried = try await client.post("/v1/subscribers/\(subscribers[2])/events", purchaseJSON(
                "t-\(run)-2-1", product: "com.example.pass.30d", at: "2025-02-01T00:00:00Z", device: "device-1-\(subscribers[2])"))
            #expect(retried.status == .ok && retried.json["duplicate"]?.bool == true, "\(retried.text)")
            // A converted subscriber is erased like any other.
            var headers: HTTPFields = Keys.bearer(Keys.admin)
            headers[.contentType] = "application/json"
            let erased = try await client.execute(uri: "/v1/subscribers/\(subscribers[3])", method: .delete, headers: headers,
                                                  body: ByteBuffer(string: #"{"reason": "converted, then erased"}"#))
            #expect(erased.status == .ok, "\(erased.text)")
            #expect(try await client.get("/v1/subscribers/\(subscribers[3])", key: Keys.admin).error.code == "erased")
        }
    }

    /// Rewrites every subscriber stream as the service wrote it before
    /// erasure existed: the stream named by the id, personal fields opened,
    /// idempotency keys `<id> US <ledger key>` (in the log as their MD5, the
    /// text kept apart, as sql/0044 leaves them), a transfer's other party by
    /// its id, no subscriber keys.
    static func writeAsBeforeErasureExisted(_ dependencies: AppDependencies) async throws {
        try await dependencies.pool.withTransaction { connection in
            let keys = try await connection.query("SELECT subscriber_id FROM subscriber_keys").map { try $0.decode(String.self, at: 0) }
            for subscriberID in keys {
                let pseudonym = SubscriberPseudonyms.pseudonym(for: subscriberID)
                let key = try #require(try await SubscriberKeys.existingKey(for: subscriberID, on: connection))
                for event in try await EventStore.readStream(SubscriberStreams.streamID(for: subscriberID), on: connection) {
                    let decoded = try LedgerEvent.decodeFast(type: event.type, schemaVersion: event.schemaVersion, data: event.data)
                    let recorded = RecordedLedgerEvent(position: event.position, recordedAt: event.recordedAt,
                                                       event: try key.openingPersonalFields(of: decoded, pseudonym: pseudonym))
                    let opened = try await SubscriberStreams.resolvingCounterparts([recorded], on: connection)[0].event
                    // Every event as a JSON object at version 1, as builds before the records wrote them.
                    let data = String(decoding: try opened.encodedData(), as: UTF8.self)
                    let storedKey = opened.idempotencyKey.map { subscriberID + "\u{1F}" + $0 }
                    try await connection.query("""
                        UPDATE events SET data = \(data)::jsonb,
                                          schema_version = \(opened.schemaVersion),
                                          event_id = coalesce(md5(\(storedKey))::uuid, event_id)
                        WHERE position = \(event.position)
                        """)
                    // Kept apart for the conversion as sql/0044 keeps them.
                    if let storedKey {
                        try await connection.query("""
                            INSERT INTO unconverted_idempotency_keys (position, stored_key) VALUES (\(event.position), \(storedKey))
                            """)
                    }
                }
                try await connection.query("""
                    UPDATE streams SET stream_id = \("subscriber-" + subscriberID) WHERE stream_id = \(SubscriberStreams.streamID(for: subscriberID))
                    """)
            }
            try await connection.query("DELETE FROM subscriber_keys")
        }
    }
}
