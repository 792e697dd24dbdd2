import Foundation
import Ledger
import Metrics

/// Read combining: concurrent reads of current states share one round trip
/// and one pair of statements, so PostgreSQL starts, plans and answers a
/// statement once for a group of reads instead of once for each.
///
/// A read waits only while the database is busy with earlier groups: with
/// nothing in flight it is read at once, alone. Meanwhile arrivals queue, and
/// the next group takes every waiting read of the oldest one's environment,
/// up to `maximumGroup` subscribers (reads of the same subscriber share the
/// answer): a `GroupingCombiner` with the `sharing` rule. What a group reads
/// is the reader's, passed down with each read.
/// The group's statements start after every read in it arrived, so each
/// sees every write acknowledged before it was asked.
///
/// Each read keeps its own outcome: a subscriber without facts is answered
/// `subscriber_not_found` alone. Anything that fails the group as a whole (a
/// lost connection, a stored row that cannot be read) sends each of its
/// subscribers to be read alone, so each gets its own answer.
public final class ReadCombiner: Sendable {
    /// Subscribers in one group at most.
    public var maximumGroup: Int { groups.maximumGroup }
    /// Groups being read at once.
    public var maximumInFlight: Int { groups.maximumInFlight }

    /// What the combiner did so far (tests and the benchmark read it).
    public struct Statistics: Sendable, Equatable {
        public var groups = 0
        public var reads = 0
        public var largestGroup = 0
        /// Subscribers read alone after their group failed.
        public var readAlone = 0
    }
    public var statistics: Statistics {
        get async { await groups.statistics }
    }

    /// What a group reads, given by the reader with each read: the current
    /// states of distinct subscribers of one environment, in their order, in
    /// one round trip; each has its own result, and what fails the
    /// statement as a whole throws.
    typealias Read = @Sendable (_ subscriberIDs: [String], _ environment: Ledger.Environment) async throws
        -> [Result<SubscriberState, LedgerError>]

    private struct Item: Sendable {
        var subscriberID: String
        var environment: Ledger.Environment
    }
    private typealias Groups = GroupingCombiner<Item, SubscriberState, Statistics>
    private let groups: Groups

    public init(maximumGroup: Int = 64, maximumInFlight: Int = 2) {
        groups = Groups(maximumGroup: maximumGroup, maximumInFlight: maximumInFlight,
                        rule: .sharing { $0.environment == $1.environment }, key: { $0.subscriberID },
                        statistics: Statistics()) { statistics, subscribers, waited in
            statistics.groups += 1
            statistics.reads += waited.count
            statistics.largestGroup = max(statistics.largestGroup, subscribers)
            ReadCombiner.groupSizes.record(subscribers)
        }
    }

    /// The current state of `subscriberID` (validated by the caller), read
    /// with whatever else is waiting, by `read`.
    func state(of subscriberID: String, environment: Ledger.Environment, reading read: @escaping Read) async throws -> SubscriberState {
        try await groups.submit(Item(subscriberID: subscriberID, environment: environment)) { [groups] group in
            await Self.run(group, read: read, counting: groups)
        }
    }

    private static func run(_ group: [Groups.Slot], read: @escaping Read, counting groups: Groups) async {
        let environment = group[0].item.environment
        let subscriberIDs = group.map(\.item.subscriberID)
        do {
            let results = try await read(subscriberIDs, environment)
            for (slot, result) in zip(group, results) { slot.answer(result.mapError { $0 }) }
        } catch where subscriberIDs.count > 1 {
            // The group failed as a whole: each subscriber alone, for its own answer.
            await groups.record { $0.readAlone += subscriberIDs.count }
            let answers = await withTaskGroup(of: (String, Result<SubscriberState, Error>).self) { tasks in
                for subscriberID in subscriberIDs {
                    tasks.addTask {
                        do {
                            return (subscriberID, try await read([subscriberID], environment)[0].mapError { $0 })
                        } catch {
                            return (subscriberID, .failure(error))
                        }
                    }
                }
                var answers = [String: Result<SubscriberState, Error>]()
                for await (subscriberID, answer) in tasks { answers[subscriberID] = answer }
                return answers
            }
            for slot in group { slot.answer(answers[slot.item.subscriberID]!) }
        } catch {
            for slot in group { slot.answer(.failure(error)) }
        }
    }

    static let groupSizes = Recorder(label: "subledger_read_group_size", aggregate: true)
}
