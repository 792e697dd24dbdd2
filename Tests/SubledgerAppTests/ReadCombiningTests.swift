import EventStore
import Foundation
import Ledger
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
import Testing

/// Read combining: concurrent reads of current states share one round trip,
/// and each still gets its own answer.
@Suite("Read combining")
struct ReadCombiningTests {
    static let bought = date("2025-05-01T00:00:00Z")
    static let now = date("2025-05-10T00:00:00Z")
    static let products = ["com.example.level2", "com.example.pass.30d", "com.example.coins.100"]

    static func purchase(_ transactionID: String, _ productID: String, environment: Ledger.Environment = .production) -> FactRequest {
        .purchase(.init(transactionID: transactionID, productID: productID, purchaseDate: bought, environment: environment))
    }

    /// Subscribers s0…s19 with a purchase each (s5 and s11 in the sandbox,
    /// so their Production view is empty), reminders stored for s3
    /// (Production and Sandbox) and s7, and a reader pinned to `now`.
    static func ledger(_ dependencies: AppDependencies) async throws -> SubscriberReader {
        let writer = LedgerWriter(dependencies)
        for index in 0..<20 {
            let environment: Ledger.Environment = index == 5 || index == 11 ? .sandbox : .production
            _ = try await writer.record(purchase("t\(index)", products[index % products.count], environment: environment),
                                        subscriberID: "s\(index)")
        }
        for (id, subscriber, due, environment) in [("r1", "s3", "2025-05-20T00:00:00Z", "Production"),
                                                   ("r2", "s3", "2025-05-18T00:00:00Z", "Production"),
                                                   ("r3", "s3", "2025-05-19T00:00:00Z", "Sandbox"),
                                                   ("r4", "s7", "2025-05-21T00:00:00Z", "Production")] {
            try await dependencies.pool.query("""
                INSERT INTO reminders (id, subscriber_id, "group", product_id, type, lead, expires_at, due_at, status,
                                       next_attempt_at, environment)
                VALUES (\(id), \(subscriber), 'pass', 'com.example.pass.30d', 'renewal_reminder', 'P7D',
                        \(date(due).addingTimeInterval(7 * 86_400)), \(date(due)), 'pending', \(date(due)), \(environment))
                """)
        }
        var reader = SubscriberReader(dependencies)
        reader.now = { Self.now }
        return reader
    }

    /// Reads queued behind a read that waits for the pool's only connection
    /// are answered by one group: each answer equals the same read made
    /// alone, with its own reminders, a subscriber without facts is
    /// `subscriber_not_found` alone, and two reads of one subscriber share
    /// the answer.
    @Test func eachReadOfACombinedGroupGetsItsOwnAnswer() async throws {
        let dependencies = try await makeDependencies(poolSize: 1)
        defer { Task { await dependencies.pool.close() } }
        let alone = try await Self.ledger(dependencies)
        var expected = [String: SubscriberState]()
        for index in 0..<20 { expected["s\(index)"] = try await alone.state(of: "s\(index)") }
        expected["s3-sandbox"] = try await alone.state(of: "s3", environment: .sandbox)
        #expect(expected["s3"]?.reminders.map(\.id) == ["r2", "r1"], "the Production reminders, by due time")
        #expect(expected["s3-sandbox"]?.reminders.map(\.id) == ["r3"])
        #expect(expected["s5"]?.entitlements.isEmpty == true, "a sandbox purchase never grants Production")

        var combined = alone
        let combiner = ReadCombiner(maximumGroup: 64, maximumInFlight: 1)
        combined.combiner = combiner
        let reader = combined
        // The pool's one connection is held while the reads queue behind the first.
        let holding = Task { try await dependencies.pool.withConnection { _ in try await Task.sleep(for: .milliseconds(400)) } }
        try await Task.sleep(for: .milliseconds(50))
        let reads = ["s0"] + (1..<20).map { "s\($0)" } + ["s4", "nobody", "s3-sandbox"]
        let answers = try await withThrowingTaskGroup(of: (Int, Result<SubscriberState, LedgerError>).self) { group in
            for (index, key) in reads.enumerated() {
                group.addTask {
                    do {
                        let state = key == "s3-sandbox" ? try await reader.state(of: "s3", environment: .sandbox)
                                                         : try await reader.state(of: key)
                        return (index, .success(state))
                    } catch let error as LedgerError {
                        return (index, .failure(error))
                    }
                }
                if index == 0 { try await Task.sleep(for: .milliseconds(50)) }
            }
            return try await group.reduce(into: [Int: Result<SubscriberState, LedgerError>]()) { $0[$1.0] = $1.1 }
        }
        try await holding.value
        let statistics = await combiner.statistics
        #expect(statistics.largestGroup >= 15, "the queued reads were combined: \(statistics)")
        #expect(statistics.readAlone == 0)
        #expect(statistics.reads == reads.count)

        for (index, key) in reads.enumerated() {
            if key == "nobody" {
                guard case .failure(let error)? = answers[index] else {
                    Issue.record("a subscriber without facts was answered: \(String(describing: answers[index]))")
                    continue
                }
                #expect(error.code == "subscriber_not_found")
                continue
            }
            guard case .success(let state)? = answers[index] else {
                Issue.record("\(key) failed: \(String(describing: answers[index]))")
                continue
            }
            #expect(state == expected[key], "\(key): the combined read equals the read alone")
        }
    }

    /// A stored event that cannot be read fails its group's statement; the
    /// group's subscribers are then read alone, so the others are answered
    /// and only the damaged one fails.
    @Test func aDamagedSubscriberFailsAloneAndTheOthersAreAnswered() async throws {
        // One connection, and the failed group's subscribers are then read one
        // after another on it: beside sixty suites on two cores the last of
        // them waited out the default 10 s lease (CI), which is not what this tests.
        let dependencies = try await makeDependencies(poolSize: 1) { $0.leaseTimeout = .seconds(120) }
        defer { Task { await dependencies.pool.close() } }
        var reader = try await Self.ledger(dependencies)
        var expected = [String: SubscriberState]()
        for index in 0..<20 where index != 9 { expected["s\(index)"] = try await reader.state(of: "s\(index)") }
        try await dependencies.pool.query("""
            UPDATE events SET data = '{"transactionId": 17}'::jsonb WHERE stream_number = (SELECT number FROM streams WHERE stream_id = \(SubscriberStreams.streamID(for: "s9")))
            """)
        await #expect(throws: (any Error).self, "the damaged subscriber cannot be read alone either") {
            _ = try await reader.state(of: "s9")
        }

        let combiner = ReadCombiner(maximumGroup: 64, maximumInFlight: 1)
        reader.combiner = combiner
        let held = reader
        let holding = Task { try await dependencies.pool.withConnection { _ in try await Task.sleep(for: .milliseconds(400)) } }
        try await Task.sleep(for: .milliseconds(50))
        let answers = try await withThrowingTaskGroup(of: (String, Result<SubscriberState, any Error>).self) { group in
            for index in 0..<20 {
                group.addTask {
                    do {
                        return ("s\(index)", .success(try await held.state(of: "s\(index)")))
                    } catch {
                        return ("s\(index)", .failure(error))
                    }
                }
                if index == 0 { try await Task.sleep(for: .milliseconds(50)) }
            }
            return try await group.reduce(into: [String: Result<SubscriberState, any Error>]()) { $0[$1.0] = $1.1 }
        }
        try await holding.value
        let statistics = await combiner.statistics
        #expect(statistics.largestGroup >= 15, "the queued reads were combined: \(statistics)")
        #expect(statistics.readAlone >= 15, "the failed group's subscribers were read alone: \(statistics)")
        for index in 0..<20 {
            let key = "s\(index)"
            switch answers[key] {
            case .success(let state)?:
                #expect(index != 9, "the damaged subscriber was answered: \(state)")
                if index != 9 { #expect(state == expected[key], "\(key): the answer is its own") }
            case .failure(let error)?:
                #expect(index == 9, "\(key) failed for another subscriber's data: \(error)")
            case nil:
                Issue.record("\(key) got no answer")
            }
        }
    }
}
