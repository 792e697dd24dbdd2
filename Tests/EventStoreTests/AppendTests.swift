import EventStore
import Foundation
import Postgres
import Testing

/// The guarantees of an append hold for both ways a batch is written: the
/// request path's `append_events` and the import's set-based
/// `append_events_set`. (Concurrent copies of one key differ by design: the
/// set-based append answers a key stored after it read the keys with a unique
/// violation, for its caller to decide again.)
@Suite("Append")
struct AppendTests {
    @Test(arguments: BatchAppend.both)
    func appendsAssignVersionsAndCheckTheExpectedOne(_ mode: BatchAppend) async throws {
        let (store, _) = try await makeStore(batchAppend: mode)
        let first = try await store.append(to: "s", expected: .noStream, events: [event(value: 1), event(value: 2)])
        #expect(first.outcomes.map(\.streamVersion) == [1, 2])
        #expect(first.outcomes.allSatisfy { !$0.isDuplicate })
        let error = await #expect(throws: WrongExpectedVersion.self) {
            try await store.append(to: "s", expected: .exact(1), events: [event()])
        }
        #expect(error?.actual == 2)
        #expect(error?.streamID == "s")
        await #expect(throws: WrongExpectedVersion.self) { try await store.append(to: "s", expected: .noStream, events: [event()]) }
        let third = try await store.append(to: "s", expected: .exact(2), events: [event(value: 3)])
        #expect(third.outcomes.map(\.streamVersion) == [3])
        #expect(try await store.readStream("s").map(\.streamVersion) == [1, 2, 3])
        #expect(try await store.readStream("s", after: 2).count == 1)
    }

    /// A stream's version is its last event's, read after the stream's lock
    /// (sql/0044), which only READ COMMITTED makes current: an append in a
    /// transaction of another level is refused and stores nothing.
    @Test(arguments: BatchAppend.both)
    func anAppendOutsideReadCommittedIsRefused(_ mode: BatchAppend) async throws {
        let (store, _) = try await makeStore(batchAppend: mode)
        _ = try await store.append(to: "s", events: [event(value: 1)])
        for level in [Connection.IsolationLevel.repeatableRead, .serializable] {
            let error = await #expect(throws: PostgresError.self) {
                try await store.pool.withConnection { connection in
                    try await connection.withTransaction(isolation: level) { connection in
                        _ = try await store.append([StreamAppend(streamID: "s", events: [event(value: 2)])], on: connection)
                    }
                }
            }
            #expect(error?.sqlState == SQLState("0A000") && error?.message.contains("READ COMMITTED") == true, "\(String(describing: error))")
        }
        #expect(try await store.readStream("s").map(\.streamVersion) == [1])
        _ = try await store.pool.withConnection { connection in
            try await connection.withTransaction(isolation: .readCommitted) { connection in
                try await store.append([StreamAppend(streamID: "s", events: [event(value: 3)])], on: connection)
            }
        }
        #expect(try await store.streamVersion("s") == 2)
    }

    /// An event appended with an idempotency key takes the key's digest for
    /// its id; one without keeps the id its writer gave (sql/0044).
    @Test(arguments: BatchAppend.both)
    func anEventsIDIsItsKeysDigestOrTheOneGiven(_ mode: BatchAppend) async throws {
        let (store, _) = try await makeStore(batchAppend: mode)
        let unkeyed = (0..<3).map { event(value: $0) }
        let keyed = (0..<3).map { event(value: 10 + $0, key: "fact-\($0)") }
        _ = try await store.append([StreamAppend(streamID: "mixed", events: [unkeyed[0], keyed[0], unkeyed[1], keyed[1]]),
                                    StreamAppend(streamID: "other", events: [keyed[2], unkeyed[2]])])
        let read = try await store.readStream("mixed") + store.readStream("other")
        let expected = [unkeyed[0].id, UUID(uuidString: EventStore.storedKey("fact-0")), unkeyed[1].id,
                        UUID(uuidString: EventStore.storedKey("fact-1")), UUID(uuidString: EventStore.storedKey("fact-2")), unkeyed[2].id]
        #expect(read.map(\.eventID) == expected)
        #expect(try await store.event(withIdempotencyKey: "fact-1")?.position == read[3].position)
        // Nothing but the key makes the id: a keyed event's own id is not stored.
        #expect(!read.map(\.eventID).contains(keyed[0].id))
    }

    /// The log keeps a key as the MD5 of its text (sql/0044): the digest the
    /// store computes is PostgreSQL's `md5(key)::uuid`, which the migration
    /// used for the keys stored before, for keys of any length and script.
    @Test func theStoredKeyIsPostgreSQLsDigestOfTheKey() async throws {
        let (store, _) = try await makeStore(batchAppend: .setBased)
        var random = SystemRandomNumberGenerator()
        let alphabet = Array("ab7:-_/\u{1F}éü日本語🙂 \"\\")
        let keys = [""] + (0..<2_000).map { index in
            String((0..<(index % 300)).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] })
        }
        let list = PostgresJSON(data: try JSONSerialization.data(withJSONObject: keys))
        let digests = try await store.pool.query("""
            SELECT md5(k)::uuid::text FROM jsonb_array_elements_text(\(list)::jsonb) WITH ORDINALITY AS x(k, n) ORDER BY n
            """).map { try $0.decode(String.self, at: 0) }
        #expect(digests == keys.map(EventStore.storedKey))
        #expect(Set(digests).count == Set(keys).count)
    }

    @Test(arguments: BatchAppend.both)
    func aLosingWriterBurnsNoPosition(_ mode: BatchAppend) async throws {
        let (store, _) = try await makeStore(batchAppend: mode)
        let first = try await store.append(to: "s", events: [event()])
        for _ in 0..<5 {
            _ = try? await store.append(to: "s", expected: .exact(0), events: [event(), event()])
        }
        let next = try await store.append(to: "s", expected: .exact(1), events: [event()])
        #expect(next.outcomes[0].position == first.outcomes[0].position + 1)
    }

    @Test(arguments: BatchAppend.both)
    func multiStreamAppendIsAllOrNothing(_ mode: BatchAppend) async throws {
        let (store, _) = try await makeStore(batchAppend: mode)
        _ = try await store.append(to: "b", events: [event()])
        await #expect(throws: WrongExpectedVersion.self) {
            try await store.append([
                StreamAppend(streamID: "a", expected: .noStream, events: [event(value: 1)]),
                StreamAppend(streamID: "b", expected: .noStream, events: [event(value: 2)]),
            ])
        }
        #expect(try await store.readStream("a").isEmpty)
        #expect(try await store.streamVersion("b") == 1)
        let results = try await store.append([
            StreamAppend(streamID: "a", expected: .noStream, events: [event(value: 1)]),
            StreamAppend(streamID: "b", expected: .exact(1), events: [event(value: 2)]),
        ])
        #expect(results.map(\.streamID) == ["a", "b"])
        #expect(results.map { $0.outcomes.map(\.streamVersion) } == [[1], [2]])
    }

    @Test(arguments: BatchAppend.both)
    func aRepeatedKeyIsADuplicateEvenWithAStaleExpectedVersion(_ mode: BatchAppend) async throws {
        let (store, _) = try await makeStore(batchAppend: mode)
        let first = try await store.append(to: "s", expected: .noStream, events: [event(key: "fact-1")])
        // The same request again: its expected version is stale now, but it is a retry, not a conflict.
        let again = try await store.append(to: "s", expected: .noStream, events: [event(key: "fact-1")])
        #expect(again.outcomes == [AppendOutcome(position: first.outcomes[0].position, streamVersion: 1, isDuplicate: true, storedStreamID: "s")])
        #expect(try await store.streamVersion("s") == 1)
        // Mixed: the known one is a duplicate, the new one is appended.
        let mixed = try await store.append(to: "s", expected: .exact(1), events: [event(key: "fact-1"), event(key: "fact-2")])
        #expect(mixed.outcomes.map(\.isDuplicate) == [true, false])
        #expect(mixed.outcomes[1].streamVersion == 2)
        // Keys are global: sent to another stream, it is still the stored one.
        let elsewhere = try await store.append(to: "t", events: [event(key: "fact-2")])
        #expect(elsewhere.outcomes[0].storedStreamID == "s")
        #expect(elsewhere.outcomes[0].isDuplicate)
        #expect(try await store.readStream("t").isEmpty)
    }

    /// 16 writers race on one stream with exact expected versions: one winner
    /// per version, typed conflicts for the others, and no gaps.
    @Test(arguments: BatchAppend.both)
    func concurrentWritersGetOneWinnerPerVersion(_ mode: BatchAppend) async throws {
        let (store, _) = try await makeStore(batchAppend: mode)
        // Round one: all expect an empty stream; exactly one may win.
        let outcomes = await withTaskGroup(of: Result<StreamAppendResult, Error>.self) { group in
            for writer in 0..<16 {
                group.addTask {
                    do {
                        return .success(try await store.append(to: "race", expected: .noStream, events: [event(value: writer)]))
                    } catch {
                        return .failure(error)
                    }
                }
            }
            return await group.reduce(into: [Result<StreamAppendResult, Error>]()) { $0.append($1) }
        }
        let winners = outcomes.filter { (try? $0.get()) != nil }
        let conflicts = outcomes.compactMap { result -> WrongExpectedVersion? in
            if case .failure(let error) = result { return error as? WrongExpectedVersion }
            return nil
        }
        #expect(winners.count == 1)
        #expect(conflicts.count == 15)
        #expect(conflicts.allSatisfy { $0.actual == 1 })

        // Round two: each writer appends 10 times, re-reading the version after a conflict.
        let conflictCount = Counter()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<16 {
                group.addTask {
                    var written = 0
                    while written < 10 {
                        let version = try await store.streamVersion("race")
                        do {
                            _ = try await store.append(to: "race", expected: .exact(version), events: [event(value: writer)])
                            written += 1
                        } catch is WrongExpectedVersion {
                            await conflictCount.add()
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let versions = try await store.readStream("race").map(\.streamVersion)
        #expect(versions == Array(1...161))
        #expect(await conflictCount.value > 0)
    }

    @Test func concurrentCopiesOfOneKeyStoreOneEvent() async throws {
        let (store, _) = try await makeStore()
        let results = try await withThrowingTaskGroup(of: StreamAppendResult.self) { group in
            for copy in 0..<20 {
                // Half to one stream, half spread over others: the unique key decides either way.
                let stream = copy % 2 == 0 ? "same" : "other-\(copy)"
                group.addTask { try await store.append(to: stream, events: [event(value: copy, key: "the-fact")]) }
            }
            return try await group.reduce(into: [StreamAppendResult]()) { $0.append($1) }
        }
        let positions = Set(results.map { $0.outcomes[0].position })
        #expect(positions.count == 1)
        #expect(results.filter { !$0.outcomes[0].isDuplicate }.count == 1)
        let stored = try await store.pool.query("SELECT count(*) FROM events WHERE event_id = md5(\("the-fact"))::uuid")
        #expect(try stored.first?.decode(Int.self, at: 0) == 1)
        let total = try await store.pool.query("SELECT count(*) FROM events")
        #expect(try total.first?.decode(Int.self, at: 0) == 1)
    }

    /// A key given twice in one batch, in two streams, is stored once: the
    /// later copy is answered with the first copy's stream and position
    /// (events name their stream by number; the answer names it by id).
    @Test(arguments: BatchAppend.both)
    func aKeyTwiceInOneBatchAnswersWithTheFirstCopysStream(_ mode: BatchAppend) async throws {
        let (store, _) = try await makeStore(batchAppend: mode)
        let results = try await store.append([
            StreamAppend(streamID: "first", events: [event(value: 1, key: "shared")]),
            StreamAppend(streamID: "second", events: [event(value: 2, key: "shared"), event(value: 3, key: "own")]),
        ])
        let first = results[0].outcomes[0], copy = results[1].outcomes[0], own = results[1].outcomes[1]
        #expect(!first.isDuplicate && first.storedStreamID == "first")
        #expect(copy == AppendOutcome(position: first.position, streamVersion: 1, isDuplicate: true, storedStreamID: "first"))
        #expect(!own.isDuplicate && own.storedStreamID == "second" && own.streamVersion == 1)
        // The log keeps the key's MD5, as the event's id (sql/0044).
        let digest = try await store.pool.query("SELECT md5(\("own"))::uuid").first!.decode(UUID.self, at: 0)
        #expect(try await store.readStream("second").map(\.eventID) == [digest])
    }

    @Test(arguments: BatchAppend.both)
    func badDataIsRefusedAndStoresNothing(_ mode: BatchAppend) async throws {
        let (store, _) = try await makeStore(batchAppend: mode)
        await #expect(throws: PostgresError.self) {
            try await store.append(to: "s", events: [NewEvent(type: "x", data: Data("not json".utf8))])
        }
        #expect(try await store.pool.query("SELECT count(*) FROM events").first?.decode(Int.self, at: 0) == 0)
    }
}

extension BatchAppend {
    static let both: [BatchAppend] = [.eventByEvent, .setBased]
}

actor Counter {
    var value = 0
    func add() { value += 1 }
}
