import EventStore
import Foundation
import Ledger
import Metrics

/// Write combining (group commit): concurrent one-fact writes for different
/// subscribers share one read and one commit, so many requests cost one WAL
/// flush instead of one each.
///
/// A write waits only while the database is busy with earlier groups: with
/// nothing in flight it is written at once, alone. Meanwhile arrivals queue,
/// and the next group takes the oldest waiting command of each subscriber
/// that no group in flight is writing (a subscriber's commands stay in
/// arrival order, one group after the other): a `GroupingCombiner` with the
/// `holding` rule. The attempt a group makes and the write of one command
/// alone are the writer's, passed down with each command.
///
/// Each command keeps its own outcome: the group is decided in order, a
/// refusal is that command's answer and the others go on (`refusals: .skip`).
/// Each stream keeps its own expected version; when one was moved by
/// another writer, the commit fails as a whole, the commands for that stream
/// are written alone (deciding again, with the usual retries) and the rest
/// form the group again. Anything else that fails a group (a value the
/// database refuses, an ownership row that changed, a lost connection) sends
/// every command of it to be written alone, so each gets its own answer.
public final class WriteCombiner: Sendable {
    /// Commands in one group at most.
    public var maximumGroup: Int { groups.maximumGroup }
    /// Groups being written at once (one reads while another commits).
    public var maximumInFlight: Int { groups.maximumInFlight }

    /// What the combiner did so far (tests and the benchmark read it).
    public struct Statistics: Sendable, Equatable {
        public var groups = 0
        public var commands = 0
        public var largestGroup = 0
        /// Commands sent to be written alone after their group failed.
        public var writtenAlone = 0
        /// Groups that failed on one stream's expected version and went on without it.
        public var conflictsSplitOff = 0
        /// Groups that committed together (each command of the others was written alone).
        public var groupsCommitted = 0
        /// The phases of those groups' committing attempts, summed.
        public var phases = WritePhases()
        /// How long commands waited for their group to start, summed.
        public var queued = Duration.zero
    }
    public var statistics: Statistics {
        get async { await groups.statistics }
    }
    /// Commands that arrived: those in groups and those waiting for one
    /// (tests wait for every request to be queued).
    var arrivedCount: Int {
        get async { await groups.arrived }
    }

    /// What a group does, given by the writer with each command.
    struct Work: Sendable {
        /// One attempt at a batch (read, decide, commit): a lost race is
        /// thrown, not retried.
        var attempt: @Sendable (WriteBatch) async throws -> WriteBatchResult
        /// One command written alone, the usual way (deciding again while
        /// other writers interfere).
        var alone: @Sendable (WriteCommand) async throws -> WriteBatchResult
    }

    private typealias Groups = GroupingCombiner<WriteCommand, WriteBatchResult, Statistics>
    private let groups: Groups

    public init(maximumGroup: Int = 64, maximumInFlight: Int = 2) {
        groups = Groups(maximumGroup: maximumGroup, maximumInFlight: maximumInFlight, rule: .holding, key: { $0.subscriberID },
                        statistics: Statistics()) { statistics, commands, waited in
            for waited in waited {
                statistics.queued += waited
                WriteCombiner.queuedDurations.record(duration: waited)
            }
            statistics.groups += 1
            statistics.commands += commands
            statistics.largestGroup = max(statistics.largestGroup, commands)
            WriteCombiner.groupSizes.record(commands)
        }
    }

    /// Writes `command` with whatever else is waiting, by `work`; the result
    /// holds its outcome alone and its subscriber's ledger.
    func write(_ command: WriteCommand, _ work: Work) async throws -> WriteBatchResult {
        try await groups.submit(command) { [groups] group in
            await Self.run(group, work, counting: groups)
        }
    }

    private static func run(_ members: [Groups.Slot], _ work: Work, counting groups: Groups) async {
        var group = members
        var alone = [Groups.Slot]()
        while !group.isEmpty {
            do {
                let started = ContinuousClock.now
                let result = try await work.attempt(WriteBatch(group.map(\.item), refusals: .skip))
                groupDurations.record(duration: ContinuousClock.now - started)
                let phases = result.phases
                await groups.record {
                    $0.groupsCommitted += 1
                    $0.phases += phases
                }
                readDurations.record(duration: phases.read)
                decideDurations.record(duration: phases.decide)
                commitDurations.record(duration: phases.commit)
                for (index, slot) in group.enumerated() {
                    let subscriberID = slot.item.subscriberID
                    slot.answer(.success(WriteBatchResult(
                        outcomes: [result.outcomes[index]], ledgers: result.ledgers[subscriberID].map { [subscriberID: $0] } ?? [:])))
                }
                group = []
            } catch let conflict as WrongExpectedVersion where group.count > 1 {
                // One stream moved under the group: it goes alone, the rest again together.
                let streamID = conflict.streamID
                let moved = group.filter { SubscriberStreams.streamID(for: $0.item.subscriberID) == streamID }
                guard !moved.isEmpty else {
                    alone += group
                    group = []
                    break
                }
                await groups.record { $0.conflictsSplitOff += 1 }
                alone += moved
                group.removeAll { SubscriberStreams.streamID(for: $0.item.subscriberID) == streamID }
            } catch {
                alone += group
                group = []
            }
        }
        if !alone.isEmpty {
            let writtenAlone = alone.count
            await groups.record { $0.writtenAlone += writtenAlone }
        }
        await withTaskGroup(of: Void.self) { tasks in
            for slot in alone {
                tasks.addTask {
                    do {
                        slot.answer(.success(try await work.alone(slot.item)))
                    } catch {
                        slot.answer(.failure(error))
                    }
                }
            }
        }
    }

    static let groupSizes = Recorder(label: "subledger_write_group_size", aggregate: true)
    static let groupDurations = Metrics.Timer(label: "subledger_write_group_duration_seconds", preferredDisplayUnit: .seconds)
    static let queuedDurations = Metrics.Timer(label: "subledger_write_queued_duration_seconds", preferredDisplayUnit: .seconds)
    static let readDurations = phaseTimer("read")
    static let decideDurations = phaseTimer("decide")
    static let commitDurations = phaseTimer("commit")

    private static func phaseTimer(_ phase: String) -> Metrics.Timer {
        Metrics.Timer(label: "subledger_write_group_phase_duration_seconds", dimensions: [("phase", phase)], preferredDisplayUnit: .seconds)
    }
}
