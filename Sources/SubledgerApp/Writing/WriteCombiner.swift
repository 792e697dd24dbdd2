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
/// arrival order, one group after the other).
///
/// Each command keeps its own outcome: the group is decided in order, a
/// refusal is that command's answer and the others go on (`refusals: .skip`).
/// Each stream keeps its own expected version; when one was moved by
/// another writer, the commit fails as a whole, the commands for that stream
/// are written alone (deciding again, with the usual retries) and the rest
/// form the group again. Anything else that fails a group (a value the
/// database refuses, an ownership row that changed, a lost connection) sends
/// every command of it to be written alone, so each gets its own answer.
public actor WriteCombiner {
    /// Commands in one group at most.
    public let maximumGroup: Int
    /// Groups being written at once (one reads while another commits).
    public let maximumInFlight: Int

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
    public private(set) var statistics = Statistics()

    private struct Waiting {
        var command: WriteCommand
        var arrived = ContinuousClock.now
        var continuation: CheckedContinuation<WriteBatchResult, Error>
    }
    private var queue: [Waiting] = []
    /// Commands that arrived: those in groups and those waiting for one
    /// (tests wait for every request to be queued).
    var arrivedCount: Int { statistics.commands + queue.count }
    private var busy: Set<String> = []
    private var inFlight = 0

    public init(maximumGroup: Int = 64, maximumInFlight: Int = 2) {
        self.maximumGroup = max(1, maximumGroup)
        self.maximumInFlight = max(1, maximumInFlight)
    }

    /// Writes `command` with whatever else is waiting; the result holds its
    /// outcome alone and its subscriber's ledger.
    func write(_ command: WriteCommand, with writer: LedgerWriter) async throws -> WriteBatchResult {
        try await withCheckedThrowingContinuation { continuation in
            queue.append(Waiting(command: command, continuation: continuation))
            startGroups(writer)
        }
    }

    private func startGroups(_ writer: LedgerWriter) {
        while inFlight < maximumInFlight, !queue.isEmpty {
            var group = [Waiting]()
            var rest = [Waiting]()
            var taken = Set<String>()
            for waiting in queue {
                let subscriberID = waiting.command.subscriberID
                if group.count < maximumGroup, !busy.contains(subscriberID), taken.insert(subscriberID).inserted {
                    group.append(waiting)
                } else {
                    rest.append(waiting)
                }
            }
            guard !group.isEmpty else { return }
            let now = ContinuousClock.now
            for waiting in group {
                let waited = now - waiting.arrived
                statistics.queued += waited
                Self.queuedDurations.record(duration: waited)
            }
            queue = rest
            busy.formUnion(taken)
            inFlight += 1
            statistics.groups += 1
            statistics.commands += group.count
            statistics.largestGroup = max(statistics.largestGroup, group.count)
            Self.groupSizes.record(group.count)
            Task { [group] in await self.run(group, writer) }
        }
    }

    private func run(_ members: [Waiting], _ writer: LedgerWriter) async {
        var group = members
        var alone = [Waiting]()
        while !group.isEmpty {
            do {
                let started = ContinuousClock.now
                let result = try await writer.attemptWrite(WriteBatch(group.map(\.command), refusals: .skip))
                Self.groupDurations.record(duration: ContinuousClock.now - started)
                statistics.groupsCommitted += 1
                statistics.phases += result.phases
                Self.readDurations.record(duration: result.phases.read)
                Self.decideDurations.record(duration: result.phases.decide)
                Self.commitDurations.record(duration: result.phases.commit)
                for (index, waiting) in group.enumerated() {
                    let subscriberID = waiting.command.subscriberID
                    waiting.continuation.resume(returning: WriteBatchResult(
                        outcomes: [result.outcomes[index]], ledgers: result.ledgers[subscriberID].map { [subscriberID: $0] } ?? [:]))
                }
                group = []
            } catch let conflict as WrongExpectedVersion where group.count > 1 {
                // One stream moved under the group: it goes alone, the rest again together.
                let streamID = conflict.streamID
                let moved = group.filter { SubscriberStreams.streamID(for: $0.command.subscriberID) == streamID }
                guard !moved.isEmpty else {
                    alone += group
                    group = []
                    break
                }
                statistics.conflictsSplitOff += 1
                alone += moved
                group.removeAll { SubscriberStreams.streamID(for: $0.command.subscriberID) == streamID }
            } catch {
                alone += group
                group = []
            }
        }
        statistics.writtenAlone += alone.count
        await withTaskGroup(of: Void.self) { tasks in
            for waiting in alone {
                tasks.addTask {
                    do {
                        waiting.continuation.resume(returning: try await writer.write(WriteBatch([waiting.command])))
                    } catch {
                        waiting.continuation.resume(throwing: error)
                    }
                }
            }
        }
        finish(group: members, writer)
    }

    private func finish(group: [Waiting], _ writer: LedgerWriter) {
        inFlight -= 1
        for waiting in group { busy.remove(waiting.command.subscriberID) }
        startGroups(writer)
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
