import TestSupport
import EventStore
import Foundation
import Postgres
import Testing

/// A broken consumer or dispatcher can loop forever instead of failing:
/// the time limit turns that into a failure of the test that hung.
@Suite("Consumers", .timeLimit(.minutes(5)))
struct ConsumerTests {
    /// A takes its transaction id first, B appends and commits: the consumer
    /// must wait for A rather than pass it, then see both once A commits.
    @Test func aConsumerNeverPassesAnOlderTransactionStillRunning() async throws {
        let (store, conninfo) = try await makeStore()
        try await CountingConsumer.createTables(on: store.pool)
        let consumer = CountingConsumer()
        let slow = try await Connection.connect(to: conninfo)
        defer { slow.close() }

        try await slow.query("BEGIN")
        try await slow.query("SELECT pg_current_xact_id()")
        let fast = try await store.append(to: "b", events: [event(value: 2)])
        #expect(try await drain(store, consumer) == 0, "the consumer went past a transaction that may still commit")

        // A appends after B (so A's position is higher) and commits.
        let late = try await store.append([StreamAppend(streamID: "a", events: [event(value: 1)])], on: slow)
        #expect(late[0].outcomes[0].position > fast.outcomes[0].position)
        try await slow.query("COMMIT")

        try await waitUntilVisible(store, 2)
        #expect(try await drain(store, consumer) == 2)
        let applied = try await store.pool.query("SELECT position FROM applied ORDER BY position").map { try $0.decode(Int64.self, at: 0) }
        #expect(applied == [fast.outcomes[0].position, late[0].outcomes[0].position])
    }

    @Test func aRolledBackAppendLeavesNoHoleThatStallsAnyone() async throws {
        let (store, conninfo) = try await makeStore()
        try await CountingConsumer.createTables(on: store.pool)
        let consumer = CountingConsumer()
        let aborted = try await Connection.connect(to: conninfo)
        defer { aborted.close() }
        try await aborted.query("BEGIN")
        _ = try await store.append([StreamAppend(streamID: "gone", events: [event(value: 100)])], on: aborted)
        try await aborted.query("ROLLBACK")
        _ = try await store.append(to: "kept", events: [event(value: 1)])
        try await waitUntilVisible(store, 1)
        #expect(try await drain(store, consumer) == 1)
        #expect(try await snapshot(store.pool) == ["kept:1:1"])
    }

    /// The handler writes its read model, then throws before the checkpoint
    /// moves: nothing of the batch stays, and the retry applies it once.
    @Test func aFailingHandlerLeavesNeitherAHalfWriteNorADoubleApplication() async throws {
        let (store, _) = try await makeStore()
        try await CountingConsumer.createTables(on: store.pool)
        for index in 0..<30 { _ = try await store.append(to: "s\(index % 3)", events: [event(value: index)]) }
        try await waitUntilVisible(store, 30)
        let failing = CountingConsumer(failures: FailureBudget(1))
        await #expect(throws: InjectedFailure.self) {
            try await store.pool.withConnection { try await store.processBatch(failing, limit: 10, on: $0) }
        }
        #expect(try await snapshot(store.pool).isEmpty)
        #expect(try await store.checkpoint(of: failing.name) == .start)
        #expect(try await drain(store, failing, batch: 7) == 30)
        let duplicates = try await store.pool.query("SELECT count(*) - count(DISTINCT position) FROM applied")
        #expect(try duplicates.first?.decode(Int.self, at: 0) == 0)
        #expect(try await snapshot(store.pool) == ["s0:10:135", "s1:10:145", "s2:10:155"])
        #expect(try await store.lag(of: failing.name) == 0)
    }

    /// A few thousand random events over many streams, some appended
    /// concurrently: the rebuilt read model equals the live one.
    @Test func rebuildEqualsLive() async throws {
        let (store, _) = try await makeStore()
        try await CountingConsumer.createTables(on: store.pool)
        let consumer = CountingConsumer()
        var generator = SplitMix64(seed: 20261122)
        var batches = [[StreamAppend]]()
        for _ in 0..<200 {
            let streams = Int.random(in: 1...3, using: &generator)
            batches.append((0..<streams).map { _ in
                StreamAppend(streamID: "stream-\(Int.random(in: 0..<150, using: &generator))",
                             events: (0..<Int.random(in: 1...12, using: &generator)).map { _ in
                                 event(value: Int.random(in: -1000...1000, using: &generator))
                             })
            })
        }
        let total = batches.reduce(0) { $0 + $1.reduce(0) { $0 + $1.events.count } }
        #expect(total > 2000)
        // Appends in four concurrent lanes while the live consumer keeps up.
        // A batch locks its streams in its own order, so two batches naming
        // two streams in opposite orders can deadlock; PostgreSQL then rolls
        // one back whole, and it is sent again, as the ledger's writer does
        // with every transient error.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for lane in 0..<4 {
                let mine = batches.enumerated().filter { $0.offset % 4 == lane }.map(\.element)
                group.addTask {
                    for batch in mine {
                        while true {
                            do {
                                _ = try await store.append(batch)
                                break
                            } catch let error as PostgresError where error.sqlState == .deadlockDetected {
                                continue
                            }
                        }
                    }
                }
            }
            group.addTask { for _ in 0..<20 { try await drain(store, consumer, batch: 50) } }
            try await group.waitForAll()
        }
        try await waitUntilVisible(store, total)
        try await drain(store, consumer)
        let live = try await snapshot(store.pool)
        let liveCheckpoint = try await store.checkpoint(of: consumer.name)
        #expect(live.reduce(0) { $0 + Int($1.split(separator: ":")[1])! } == total)

        let replayed = try await store.rebuild(consumer, batchSize: 97)
        #expect(replayed == total)
        #expect(try await snapshot(store.pool) == live)
        #expect(try await store.checkpoint(of: consumer.name) == liveCheckpoint)
    }

    /// Two runners of one consumer (two service instances): one leads, every
    /// event is applied exactly once, and the standby takes over when the
    /// leader stops.
    @Test func onlyOneRunnerWorksAndAStandbyTakesOver() async throws {
        let (store, conninfo) = try await makeStore()
        try await CountingConsumer.createTables(on: store.pool)
        let consumer = CountingConsumer()
        let first = ConsumerRunner(store: store, consumer: consumer, conninfo: conninfo, batchSize: 10, pollInterval: .milliseconds(50))
        let second = ConsumerRunner(store: store, consumer: consumer, conninfo: conninfo, batchSize: 10, pollInterval: .milliseconds(50))
        let leader = Task { await first.runUntilCancelled() }
        try await Task.sleep(for: .milliseconds(300))
        let standby = Task { await second.runUntilCancelled() }
        for index in 0..<100 { _ = try await store.append(to: "s\(index % 5)", events: [event(value: 1)]) }
        try await waitUntilCaughtUp(store, consumer.name)
        leader.cancel()
        await leader.value
        for index in 0..<50 { _ = try await store.append(to: "s\(index % 5)", events: [event(value: 1)]) }
        try await waitUntilCaughtUp(store, consumer.name)
        standby.cancel()
        await standby.value
        let counts = try await store.pool.query("SELECT count(*), count(DISTINCT position) FROM applied").first
        #expect(try counts?.decode(Int.self, at: 0) == 150)
        #expect(try counts?.decode(Int.self, at: 1) == 150)
    }

    /// An event the handler always refuses is set aside after its attempts,
    /// and the consumer goes on with the events behind it.
    @Test func anEventTheHandlerKeepsRefusingIsParkedAndTheRestFlows() async throws {
        let (store, conninfo) = try await makeStore()
        try await CountingConsumer.createTables(on: store.pool)
        let consumer = RefusingConsumer(inner: CountingConsumer(), refusedType: "poison")
        var runner = ConsumerRunner(store: store, consumer: consumer, conninfo: conninfo, batchSize: 10, pollInterval: .milliseconds(50))
        runner.maximumAttempts = 3
        runner.retryDelay = .milliseconds(10)
        let before = try await store.append(to: "a", events: [event(value: 1), event(value: 2)])
        let poison = try await store.append(to: "b", events: [event("poison", value: 100)])
        let after = try await store.append(to: "a", events: [event(value: 3)])
        let task = Task { await runner.runUntilCancelled() }
        try await waitUntilCaughtUp(store, consumer.name)
        task.cancel()
        await task.value
        #expect(try await store.parkedPositions(of: consumer.name) == [poison.outcomes[0].position])
        let applied = try await store.pool.query("SELECT position FROM applied ORDER BY position").map { try $0.decode(Int64.self, at: 0) }
        #expect(applied == before.outcomes.map(\.position) + after.outcomes.map(\.position))
        #expect(try await snapshot(store.pool) == ["a:3:6"])
    }

    /// Two batches of one consumer at once take turns on its checkpoint row:
    /// while the first is handling its events, the second waits instead of
    /// handling the same ones, then finds nothing left. (The runner's advisory
    /// lock keeps two runners from this; the row lock holds for any caller.)
    @Test func twoBatchesOfOneConsumerAtOnceTakeTurns() async throws {
        let (store, _) = try await makeStore()
        try await CountingConsumer.createTables(on: store.pool)
        let gate = Gate()
        let consumer = GatedConsumer(inner: CountingConsumer(), gate: gate)
        /// Batches until one handles events: other suites' open transactions
        /// can hold back what a consumer may see for a while.
        @Sendable func firstNonEmptyBatch(of consumer: some EventConsumer) async throws -> Int {
            let deadline = ContinuousClock.now + .seconds(120)
            while ContinuousClock.now < deadline {
                let handled = try await store.pool.withConnection { try await store.processBatch(consumer, limit: 10, on: $0) }
                if handled > 0 { return handled }
                try await Task.sleep(for: .milliseconds(20))
            }
            return 0
        }
        // A first batch, so the checkpoint row exists (creating it makes a
        // second creator wait too, lock or not).
        _ = try await store.append(to: "a", events: [event(value: 1)])
        #expect(try await firstNonEmptyBatch(of: CountingConsumer()) == 1)
        _ = try await store.append(to: "a", events: [event(value: 2), event(value: 3)])
        let first = Task { try await firstNonEmptyBatch(of: consumer) }
        let deadline = ContinuousClock.now + .seconds(120)
        while await gate.entered < 1, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        let second = Task { try await store.pool.withConnection { try await store.processBatch(consumer, limit: 10, on: $0) } }
        // Long enough for the second to reach the handler if nothing held it back.
        try await Task.sleep(for: .milliseconds(500))
        let enteredWhileFirstHeld = await gate.entered
        await gate.release()
        #expect(enteredWhileFirstHeld == 1, "the second batch handled events while the first held the checkpoint")
        #expect(try await first.value == 2)
        #expect(try await second.value == 0)
        let applied = try await store.pool.query("SELECT count(*) FROM applied").first?.decode(Int.self, at: 0)
        #expect(applied == 3)
    }

    /// Waits for the consumer to have no lag. The bound only ends a consumer
    /// that never catches up; beside every other suite on two cores, catching
    /// up on a handful of events has taken over 20 s.
    func waitUntilCaughtUp(_ store: EventStore, _ name: String) async throws {
        let deadline = ContinuousClock.now + .seconds(120)
        while try await store.lag(of: name) > 0 {
            guard ContinuousClock.now < deadline else { Issue.record("the consumer did not catch up"); return }
            try await Task.sleep(for: .milliseconds(20))
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
