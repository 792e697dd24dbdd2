/// The skeleton of the read and write combiners: concurrent requests wait in
/// one queue, and whenever fewer than `maximumInFlight` groups are under way
/// the next group starts with the waiting items its `Rule` takes, up to
/// `maximumGroup` keys (subscribers). With nothing in flight an item starts
/// a group at once, alone: an item waits only while earlier groups are busy.
///
/// The combiner knows nothing of its owner. Each item comes with the work its
/// group does (a group does the work its oldest item came with); the work
/// gets the group's slots, one per key in arrival order, and answers each
/// slot exactly once, which resumes every waiter of that slot with that
/// answer. The group's place is freed (and its keys let go) once the work
/// returns, and the next groups start.
///
/// `Statistics` is the owner's record of what the combiner did: `started`
/// counts each group as it starts (in the actor, before its work runs), and
/// the work counts what it did through `record`.
actor GroupingCombiner<Item: Sendable, Answer: Sendable, Statistics: Sendable> {
    /// How the next group is taken from the waiting items, oldest first.
    enum Rule: Sendable {
        /// Every waiting item that `joins` the oldest one's group, up to
        /// `maximumGroup` keys; the items of one key share one slot, and so
        /// one answer (reads: those of the oldest read's environment).
        case sharing(joins: @Sendable (_ item: Item, _ oldest: Item) -> Bool)
        /// The oldest waiting item of each key that no group in flight
        /// holds, up to `maximumGroup` items; a key stays held until its
        /// group finishes, so one key's items go one group after the other,
        /// in arrival order (writes).
        case holding
    }

    /// One key's place in a group: the item its work is about (the oldest
    /// waiting one of its key) and the waiters its answer goes to.
    struct Slot: Sendable {
        let item: Item
        fileprivate let waiters: [CheckedContinuation<Answer, any Error>]

        /// Resumes each of the slot's waiters with `result`; once per slot.
        func answer(_ result: Result<Answer, any Error>) {
            for waiter in waiters { waiter.resume(with: result) }
        }
    }

    /// What a group does with its slots (answering every one of them).
    typealias Work = @Sendable (_ group: [Slot]) async -> Void

    /// Keys (subscribers) in one group at most.
    let maximumGroup: Int
    /// Groups under way at once.
    let maximumInFlight: Int
    private(set) var statistics: Statistics
    /// Items that arrived: those in groups and those waiting for one.
    private(set) var arrived = 0

    private let rule: Rule
    private let key: @Sendable (Item) -> String
    /// Counts a group as it starts: its number of slots, and how long each
    /// of its waiters waited for it.
    private let started: @Sendable (_ statistics: inout Statistics, _ slots: Int, _ waited: [Duration]) -> Void

    private struct Waiting {
        var item: Item
        var work: Work
        var arrived = ContinuousClock.now
        var continuation: CheckedContinuation<Answer, any Error>
    }
    private var queue: [Waiting] = []
    private var held: Set<String> = []
    private var inFlight = 0

    init(maximumGroup: Int, maximumInFlight: Int, rule: Rule, key: @escaping @Sendable (Item) -> String, statistics: Statistics,
         started: @escaping @Sendable (_ statistics: inout Statistics, _ slots: Int, _ waited: [Duration]) -> Void) {
        self.maximumGroup = max(1, maximumGroup)
        self.maximumInFlight = max(1, maximumInFlight)
        self.rule = rule
        self.key = key
        self.statistics = statistics
        self.started = started
    }

    /// `item`'s answer, from the group it joins; `work` is what that group
    /// does when `item` is its oldest.
    func submit(_ item: Item, work: @escaping Work) async throws -> Answer {
        try await withCheckedThrowingContinuation { continuation in
            queue.append(Waiting(item: item, work: work, continuation: continuation))
            arrived += 1
            startGroups()
        }
    }

    /// Counts what a group's work did.
    func record(_ change: @Sendable (inout Statistics) -> Void) {
        change(&statistics)
    }

    private func startGroups() {
        while inFlight < maximumInFlight, let next = nextGroup() {
            inFlight += 1
            started(&statistics, next.slots.count, next.waited)
            Task { [next] in
                await next.work(next.slots)
                self.finished(next.slots)
            }
        }
    }

    /// Takes the next group out of the queue, by the rule; nil when no
    /// waiting item may start one now.
    private func nextGroup() -> Group? {
        guard let oldest = queue.first else { return nil }
        var slots: [(item: Item, waiting: [Waiting])] = []
        var slotOfKey: [String: Int] = [:]
        var rest: [Waiting] = []
        for waiting in queue {
            let key = key(waiting.item)
            switch rule {
            case .sharing(let joins) where joins(waiting.item, oldest.item):
                if let slot = slotOfKey[key] {
                    slots[slot].waiting.append(waiting)
                    continue
                }
                if slots.count < maximumGroup {
                    slotOfKey[key] = slots.count
                    slots.append((waiting.item, [waiting]))
                    continue
                }
            case .holding where slots.count < maximumGroup && !held.contains(key) && slotOfKey[key] == nil:
                slotOfKey[key] = slots.count
                slots.append((waiting.item, [waiting]))
                continue
            default:
                break
            }
            rest.append(waiting)
        }
        guard let first = slots.first?.waiting.first else { return nil }
        queue = rest
        if case .holding = rule { held.formUnion(slotOfKey.keys) }
        let now = ContinuousClock.now
        let waited = slots.flatMap { $0.waiting.map { now - $0.arrived } }
        return Group(slots: slots.map { Slot(item: $0.item, waiters: $0.waiting.map(\.continuation)) }, work: first.work, waited: waited)
    }

    /// A group as it starts: its slots, the work of its oldest item, and how
    /// long each of its waiters waited.
    private struct Group: Sendable {
        var slots: [Slot]
        var work: Work
        var waited: [Duration]
    }

    private func finished(_ group: [Slot]) {
        inFlight -= 1
        if case .holding = rule {
            for slot in group { held.remove(key(slot.item)) }
        }
        startGroups()
    }
}
