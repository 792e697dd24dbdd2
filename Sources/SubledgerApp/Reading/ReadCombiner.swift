import Foundation
import Ledger
import Metrics

/// Read combining: concurrent reads of current states share one round trip
/// and one pair of statements, so PostgreSQL starts, plans and answers a
/// statement once for a group of reads instead of once for each.
///
/// A read waits only while the database is busy with earlier groups: with
/// nothing in flight it is read at once, alone. Meanwhile arrivals queue, and
/// the next group takes every waiting read of one environment, up to
/// `maximumGroup` subscribers (reads of the same subscriber share the answer).
/// The group's statements start after every read in it arrived, so each
/// sees every write acknowledged before it was asked.
///
/// Each read keeps its own outcome: a subscriber without facts is answered
/// `subscriber_not_found` alone. Anything that fails the group as a whole (a
/// lost connection, a stored row that cannot be read) sends each of its
/// subscribers to be read alone, so each gets its own answer.
public actor ReadCombiner {
    /// Subscribers in one group at most.
    public let maximumGroup: Int
    /// Groups being read at once.
    public let maximumInFlight: Int

    /// What the combiner did so far (tests and the benchmark read it).
    public struct Statistics: Sendable, Equatable {
        public var groups = 0
        public var reads = 0
        public var largestGroup = 0
        /// Subscribers read alone after their group failed.
        public var readAlone = 0
    }
    public private(set) var statistics = Statistics()

    private struct Waiting {
        var subscriberID: String
        var environment: Ledger.Environment
        var continuation: CheckedContinuation<SubscriberState, Error>
    }
    private var queue: [Waiting] = []
    private var inFlight = 0

    public init(maximumGroup: Int = 64, maximumInFlight: Int = 2) {
        self.maximumGroup = max(1, maximumGroup)
        self.maximumInFlight = max(1, maximumInFlight)
    }

    /// The current state of `subscriberID` (validated by the caller), read
    /// with whatever else is waiting.
    func state(of subscriberID: String, environment: Ledger.Environment, with reader: SubscriberReader) async throws -> SubscriberState {
        try await withCheckedThrowingContinuation { continuation in
            queue.append(Waiting(subscriberID: subscriberID, environment: environment, continuation: continuation))
            startGroups(reader)
        }
    }

    private func startGroups(_ reader: SubscriberReader) {
        while inFlight < maximumInFlight, let environment = queue.first?.environment {
            var group = [Waiting]()
            var rest = [Waiting]()
            var subscribers = Set<String>()
            for waiting in queue {
                if waiting.environment == environment,
                   subscribers.contains(waiting.subscriberID) || subscribers.count < maximumGroup {
                    subscribers.insert(waiting.subscriberID)
                    group.append(waiting)
                } else {
                    rest.append(waiting)
                }
            }
            queue = rest
            inFlight += 1
            statistics.groups += 1
            statistics.reads += group.count
            statistics.largestGroup = max(statistics.largestGroup, subscribers.count)
            Self.groupSizes.record(subscribers.count)
            Task { [group] in await self.run(group, environment, reader) }
        }
    }

    private func run(_ group: [Waiting], _ environment: Ledger.Environment, _ reader: SubscriberReader) async {
        var subscriberIDs = [String]()
        var seen = Set<String>()
        for waiting in group where seen.insert(waiting.subscriberID).inserted { subscriberIDs.append(waiting.subscriberID) }
        do {
            let results = try await reader.store.pool.withConnection {
                try await reader.states(of: subscriberIDs, at: nil, environment: environment, on: $0)
            }
            let answers = Dictionary(uniqueKeysWithValues: zip(subscriberIDs, results))
            for waiting in group { waiting.continuation.resume(with: answers[waiting.subscriberID]!.mapError { $0 }) }
        } catch where subscriberIDs.count > 1 {
            // The group failed as a whole: each subscriber alone, for its own answer.
            statistics.readAlone += subscriberIDs.count
            let answers = await withTaskGroup(of: (String, Result<SubscriberState, Error>).self) { tasks in
                for subscriberID in subscriberIDs {
                    tasks.addTask {
                        do {
                            let results = try await reader.store.pool.withConnection {
                                try await reader.states(of: [subscriberID], at: nil, environment: environment, on: $0)
                            }
                            return (subscriberID, results[0].mapError { $0 })
                        } catch {
                            return (subscriberID, .failure(error))
                        }
                    }
                }
                var answers = [String: Result<SubscriberState, Error>]()
                for await (subscriberID, answer) in tasks { answers[subscriberID] = answer }
                return answers
            }
            for waiting in group { waiting.continuation.resume(with: answers[waiting.subscriberID]!) }
        } catch {
            for waiting in group { waiting.continuation.resume(throwing: error) }
        }
        inFlight -= 1
        startGroups(reader)
    }

    static let groupSizes = Recorder(label: "subledger_read_group_size", aggregate: true)
}
