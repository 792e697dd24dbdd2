import Foundation
import Ledger

/// An import line that parsed: the command it asks for and its number in the file.
struct ParsedLine: Sendable {
    var number: Int
    var command: WriteCommand
}

/// A chunk of an import split among writers so that they share nothing.
///
/// Two lines are in one group when they name the same subscriber or the same
/// transaction or original transaction id, or when the ledger already links
/// the ids they name (a transaction to its original, an original to the
/// subscriber owning it): everything a decision reads or writes besides its
/// own subscriber's stream — the owners of the ids it names, a previous
/// owner's stream on a transfer — is reached that way. Groups therefore
/// neither read nor write anything of each other, and writing them in any
/// order, or at once on several connections, stores what writing the lines
/// in file order would. Within a group the lines keep their file order.
struct ImportPlan {
    /// The chunk's lines, in file order.
    var lines: [ParsedLine]
    /// Each writer's lines, as indices into `lines`: whole groups, each in file order.
    var lanes: [[Int]]
    var groups: Int

    /// Everything in one lane, in file order.
    static func single(_ lines: [ParsedLine]) -> ImportPlan {
        ImportPlan(lines: lines, lanes: lines.isEmpty ? [] : [Array(lines.indices)], groups: 1)
    }

    /// The lines of `lane` from `range` of its indices, in order.
    func lines(ofLane lane: Int, _ range: Range<Int>) -> [ParsedLine] {
        lanes[lane][range].map { lines[$0] }
    }

    /// Plans `lines` (in file order) for `writers` writers. `links` are the
    /// ledger's stored links of the ids the lines name (`OwnershipStore.links`).
    /// The plan keeps `lines` as they are and orders indices into them, so a
    /// large chunk is held once.
    static func make(_ lines: [ParsedLine], links: [OwnershipStore.Link], writers: Int) -> ImportPlan {
        var groupOfLine = [Int]()
        var sizes = [Int]()
        do {
            var sets = DisjointSets()
            // A subscriber and one or two transaction ids a line.
            sets.reserveCapacity(lines.count * 3)
            var lineNodes = [Int]()
            lineNodes.reserveCapacity(lines.count)
            for line in lines {
                let subscriber = sets.node(.subscriber(line.command.subscriberID))
                for id in line.command.referencedTransactionIDs {
                    sets.union(subscriber, sets.node(.transaction(id)))
                }
                lineNodes.append(subscriber)
            }
            for link in links {
                // Only ids some line named are looked up, so each link joins a group of this chunk.
                let id = sets.node(.transaction(link.transactionID))
                sets.union(id, sets.node(.transaction(link.originalTransactionID)))
                if let owner = link.owner { sets.union(id, sets.node(.subscriber(owner))) }
            }

            // Groups in order of first appearance, each line's group index.
            var groupOfRoot = [Int: Int]()
            groupOfLine.reserveCapacity(lines.count)
            for node in lineNodes {
                let root = sets.find(node)
                let group: Int
                if let known = groupOfRoot[root] {
                    group = known
                } else {
                    group = sizes.count
                    groupOfRoot[root] = group
                    sizes.append(0)
                }
                sizes[group] += 1
                groupOfLine.append(group)
            }
        }

        // Largest groups first, each to the least loaded writer.
        let writers = max(1, writers)
        var laneOfGroup = [Int](repeating: 0, count: sizes.count)
        var load = [Int](repeating: 0, count: writers)
        for group in sizes.indices.sorted(by: { sizes[$0] > sizes[$1] }) {
            let lane = load.indices.min { load[$0] < load[$1] }!
            laneOfGroup[group] = lane
            load[lane] += sizes[group]
        }

        // Each lane: its groups one after the other (in order of first
        // appearance), so a subscriber's lines of the chunk share few
        // batches. Where each group starts in its lane, then every line
        // placed at its group's next slot (so a group keeps file order).
        var next = [Int](repeating: 0, count: sizes.count)
        var filled = [Int](repeating: 0, count: writers)
        for group in sizes.indices {
            next[group] = filled[laneOfGroup[group]]
            filled[laneOfGroup[group]] += sizes[group]
        }
        var lanes = load.map { [Int](repeating: 0, count: $0) }
        for (line, group) in groupOfLine.enumerated() {
            lanes[laneOfGroup[group]][next[group]] = line
            next[group] += 1
        }
        return ImportPlan(lines: lines, lanes: lanes.filter { !$0.isEmpty }, groups: sizes.count)
    }
}

/// Union–find over subscribers and transaction ids.
struct DisjointSets {
    enum Key: Hashable {
        case subscriber(String)
        case transaction(String)
    }

    private var index = [Key: Int]()
    private var parent = [Int]()

    mutating func reserveCapacity(_ nodes: Int) {
        index.reserveCapacity(nodes)
        parent.reserveCapacity(nodes)
    }

    mutating func node(_ key: Key) -> Int {
        if let known = index[key] { return known }
        let new = parent.count
        index[key] = new
        parent.append(new)
        return new
    }

    mutating func find(_ node: Int) -> Int {
        var root = node
        while parent[root] != root { root = parent[root] }
        var current = node
        while parent[current] != root {
            let next = parent[current]
            parent[current] = root
            current = next
        }
        return root
    }

    mutating func union(_ a: Int, _ b: Int) {
        let (rootA, rootB) = (find(a), find(b))
        if rootA != rootB { parent[max(rootA, rootB)] = min(rootA, rootB) }
    }
}
