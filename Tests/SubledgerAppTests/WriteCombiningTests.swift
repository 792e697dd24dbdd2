import EventStore
import Foundation
import Ledger
import Postgres
import TestSupport
@testable import SubledgerApp
import SubledgerAppTesting
import Testing

/// Write combining: concurrent one-fact writes share a commit, and each
/// still gets its own answer.
@Suite("Write combining")
struct WriteCombiningTests {
    static let bought = date("2025-05-01T00:00:00Z")

    static func purchase(_ transactionID: String, productID: String = "com.example.level2") -> FactRequest {
        .purchase(.init(transactionID: transactionID, productID: productID, purchaseDate: bought))
    }

    /// Lets the first group on once `count` requests have reached the
    /// combiner (however late the machine starts them), and 300 ms after
    /// that, so the others have queued behind it for certain.
    static func release(_ gate: Gate, onceQueued count: Int, at combiner: WriteCombiner) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while await combiner.arrivedCount < count, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        try await Task.sleep(for: .milliseconds(300))
        await gate.release()
    }

    /// Refusals stay with their own request: in a group of many, one refund
    /// of an unknown transaction answers 404-kind alone, a repeat is a
    /// duplicate, and every other purchase is recorded with its own position.
    @Test func eachRequestOfACombinedGroupGetsItsOwnAnswer() async throws {
        let dependencies = try await makeDependencies(poolSize: 4)
        defer { Task { await dependencies.pool.close() } }
        var writer = LedgerWriter(dependencies)
        _ = try await writer.record(Self.purchase("seen-1"), subscriberID: "repeat")
        let combiner = WriteCombiner(maximumGroup: 64, maximumInFlight: 1)
        writer.combiner = combiner
        let gate = Gate()
        // The first group (one request) waits at the gate while the others queue behind it.
        writer.afterRead = { _ in await gate.pass() }
        let held = writer
        let answers = try await withThrowingTaskGroup(of: (String, Result<WriteResult, LedgerError>).self) { group in
            for index in 0..<20 {
                group.addTask {
                    do {
                        return ("s\(index)", .success(try await held.record(Self.purchase("t\(index)"), subscriberID: "s\(index)")))
                    } catch let error as LedgerError {
                        return ("s\(index)", .failure(error))
                    }
                }
            }
            group.addTask {
                do {
                    return ("unknown", .success(try await held.record(.refund(.init(transactionID: "never-bought")), subscriberID: "unknown")))
                } catch let error as LedgerError {
                    return ("unknown", .failure(error))
                }
            }
            group.addTask {
                do {
                    return ("repeat", .success(try await held.record(Self.purchase("seen-1"), subscriberID: "repeat")))
                } catch let error as LedgerError {
                    return ("repeat", .failure(error))
                }
            }
            try await Self.release(gate, onceQueued: 22, at: combiner)
            return try await group.reduce(into: [String: Result<WriteResult, LedgerError>]()) { $0[$1.0] = $1.1 }
        }
        let statistics = await combiner.statistics
        #expect(statistics.largestGroup > 10, "the queued requests were combined: \(statistics)")
        #expect(statistics.writtenAlone == 0)
        // The time figures count what happened: every group committed, and
        // the requests held behind the first one (queued for 300 ms and more)
        // waited for their group far longer than any group's own work took.
        #expect(statistics.groupsCommitted == statistics.groups)
        #expect(statistics.queued > .milliseconds(100), "the held requests' wait was counted: \(statistics)")
        #expect(statistics.phases.read > .zero && statistics.phases.decide > .zero && statistics.phases.commit > .zero,
                "\(statistics.phases)")

        guard case .failure(let refusal) = answers["unknown"] else {
            Issue.record("the refund of an unknown transaction was accepted: \(String(describing: answers["unknown"]))")
            return
        }
        #expect(refusal.kind == .notFound)
        guard case .success(let repeated) = answers["repeat"] else {
            Issue.record("the repeated purchase failed: \(String(describing: answers["repeat"]))")
            return
        }
        #expect(repeated.isDuplicate)
        var positions = Set<Int64>()
        for index in 0..<20 {
            guard case .success(let written) = answers["s\(index)"] else {
                Issue.record("s\(index) failed: \(String(describing: answers["s\(index)"]))")
                continue
            }
            #expect(!written.isDuplicate)
            #expect(written.state.subscriberID == "s\(index)")
            #expect(written.state.purchases.map(\.transactionID) == ["t\(index)"], "the answer shows its own fact only")
            positions.insert(written.position)
        }
        #expect(positions.count == 20, "each request has its own position")
        let stored = try await dependencies.pool.query("SELECT count(*) FROM events e JOIN streams s ON s.number = e.stream_number JOIN subscriber_keys k ON s.stream_id = 'subscriber-' || k.pseudonym WHERE k.subscriber_id LIKE 's%'")
        #expect(try stored.first?.decode(Int64.self, at: 0) == 20)
        #expect(try await dependencies.pool.query("SELECT 1 FROM streams WHERE stream_id = \(SubscriberStreams.streamID(for: "unknown"))").count == 0,
                "the refused request wrote nothing")
    }

    /// A stream moved by another writer while its group was being decided
    /// fails that request's expected version alone: it is decided again on
    /// its own, and the others commit together.
    @Test func aConflictingRequestIsRetriedAloneAndTheOthersCommit() async throws {
        let dependencies = try await makeDependencies(poolSize: 4)
        defer { Task { await dependencies.pool.close() } }
        var writer = LedgerWriter(dependencies)
        let combiner = WriteCombiner(maximumGroup: 64, maximumInFlight: 1)
        writer.combiner = combiner
        let gate = Gate()
        let moved = Moved()
        let outside = LedgerWriter(dependencies)
        writer.afterRead = { subscriberIDs in
            await gate.pass()
            // Once, under the group that holds "contested" with others: another writer gets there first.
            if subscriberIDs.count > 1, subscriberIDs.contains("contested"), await moved.first() {
                _ = try await outside.record(Self.purchase("outside-1", productID: "com.example.pass.30d"), subscriberID: "contested")
            }
        }
        let held = writer
        let results = try await withThrowingTaskGroup(of: (String, WriteResult).self) { group in
            // c0 first, alone at the gate, so "contested" queues into the group behind it.
            group.addTask { ("c0", try await held.record(Self.purchase("ct0"), subscriberID: "c0")) }
            try await Task.sleep(for: .milliseconds(200))
            for index in 1..<8 {
                group.addTask { ("c\(index)", try await held.record(Self.purchase("ct\(index)"), subscriberID: "c\(index)")) }
            }
            group.addTask { ("contested", try await held.record(Self.purchase("mine-1"), subscriberID: "contested")) }
            try await Self.release(gate, onceQueued: 9, at: combiner)
            return try await group.reduce(into: [String: WriteResult]()) { $0[$1.0] = $1.1 }
        }
        let statistics = await combiner.statistics
        #expect(await moved.happened, "the test moved the stream under a group")
        #expect(statistics.conflictsSplitOff == 1, "\(statistics)")
        #expect(statistics.writtenAlone == 1, "only the conflicting request was written alone: \(statistics)")
        let contested = try #require(results["contested"])
        #expect(!contested.isDuplicate)
        #expect(contested.state.purchases.map(\.transactionID) == ["mine-1"])
        #expect(contested.state.nonRenewingPeriods.count == 1, "decided again after the other writer's fact, and answers with it")
        for index in 0..<8 {
            let written = try #require(results["c\(index)"])
            #expect(written.state.purchases.map(\.transactionID) == ["ct\(index)"])
        }
        #expect(try await dependencies.store.streamVersion(SubscriberStreams.streamID(for: "contested")) == 2, "both facts stored, neither lost")
    }

    actor Moved {
        private(set) var happened = false
        func first() -> Bool {
            defer { happened = true }
            return !happened
        }
    }
}
