import Foundation
import Ledger
import Logging
import Postgres
import Synchronization

/// Subscribers' ledgers kept in memory between requests, each with the
/// stream version it folds, so that a read or a write of a long history
/// reads only the events after that version — not its stored snapshot (a
/// megabyte for 10,000 renewals, and milliseconds to decode).
///
/// Never trusted blindly: every load still asks the database for the stream
/// past the cached version (in the same statement that would have read the
/// snapshot), so events another process appended are applied, and a stream
/// that is shorter than the cached version (a restored database) drops the
/// entry. A write still expects the version it read when it appends.
///
/// Only ledgers of `minimumVersion` events or more are kept: a short one is
/// read and folded as fast as it is looked up. Memory is bounded by
/// `budget`, counted in facts held (idempotency keys and transactions, and
/// eight for each ledger's own tables); past it the least recently used
/// ledgers are dropped.
public final class LedgerCache: Sendable {
    struct Entry {
        var loaded: LoadedLedger
        var weight: Int
        var lastUse: UInt64
    }

    struct Contents {
        var entries: [String: Entry] = [:]
        var weight = 0
        var clock: UInt64 = 0
    }

    /// Facts held at most, over all ledgers.
    public let budget: Int
    /// The stream version from which a ledger is kept.
    public let minimumVersion: Int64
    private let contents = Mutex(Contents())
    /// Snapshot saves under way.
    private let saving = Mutex([UUID: Saving]())

    struct Saving {
        var subscriberIDs: Set<String>
        var task: Task<Void, Never>
    }

    /// - Parameters:
    ///   - budget: facts held at most (measured at about 0.15-0.2 KB each in
    ///     memory for renewals); the default, 200,000 facts (ten subscribers
    ///     of 10,000 renewals), is some 35 MB, well inside `serve`'s memory target.
    ///   - minimumVersion: the shortest stream kept.
    public init(budget: Int = 200_000, minimumVersion: Int64 = 16) {
        self.budget = budget
        self.minimumVersion = minimumVersion
    }

    /// How a load uses a cached ledger.
    enum Use {
        /// Shares it: for a read, which does not change it (applying a tail
        /// copies it, and the newer ledger is put back).
        case share
        /// Takes it out: for a write, which applies its events in place and
        /// puts the ledger back after its commit. A write that fails leaves
        /// the entry out, so its retry reads the database afresh.
        case take
    }

    /// The cached ledgers of `subscriberIDs` (those held).
    func ledgers(_ subscriberIDs: [String], use: Use) -> [String: LoadedLedger] {
        contents.withLock { contents in
            var found = [String: LoadedLedger]()
            for subscriberID in subscriberIDs {
                guard var entry = contents.entries[subscriberID] else { continue }
                found[subscriberID] = entry.loaded
                switch use {
                case .share:
                    contents.clock += 1
                    entry.lastUse = contents.clock
                    contents.entries[subscriberID] = entry
                case .take:
                    contents.entries[subscriberID] = nil
                    contents.weight -= entry.weight
                }
            }
            return found
        }
    }

    /// Keeps `loaded` (when long enough), unless a later version of the
    /// same stream is already held (or the same one, with as recent a
    /// stored snapshot). A ledger read again because its stream was shorter
    /// than the one held replaces it whatever its version.
    func keep(_ loaded: LoadedLedger) {
        guard loaded.cachedState == nil else { return }
        // An erased subscriber's ledger is not kept under its id (nor one held before).
        if loaded.supersedesHeld || loaded.isErased { forget([loaded.subscriberID]) }
        guard !loaded.isErased else { return }
        // A ledger's own tables cost about as much as a few facts, whatever it holds.
        let weight = loaded.ledger.factCount + 8
        guard loaded.version >= minimumVersion, weight <= budget else { return }
        contents.withLock { contents in
            if let held = contents.entries[loaded.subscriberID] {
                guard (held.loaded.version, held.loaded.snapshotVersion) < (loaded.version, loaded.snapshotVersion) else { return }
                contents.weight -= held.weight
            }
            contents.clock += 1
            contents.entries[loaded.subscriberID] = Entry(loaded: loaded, weight: weight, lastUse: contents.clock)
            contents.weight += weight
            if contents.weight > budget { Self.evict(&contents, downTo: budget * 3 / 4) }
        }
    }

    /// Stores `due` as their subscribers' snapshots in the background (one
    /// statement, on a connection of `pool`), so the write that made them due
    /// does not wait for encoding and sending long ledgers; then records
    /// each snapshot's version on the ledger held. A subscriber whose save is
    /// under way is left out: the next write finds its snapshot still due. A
    /// save that fails is only logged (a snapshot is derived: a lost one is a
    /// longer tail for a reader without this cache).
    func saveSnapshots(_ due: [LoadedLedger], pool: ConnectionPool, logger: Logger) {
        let key = UUID()
        saving.withLock { saving in
            let ledgers = due.filter { ledger in !saving.values.contains { $0.subscriberIDs.contains(ledger.subscriberID) } }
            guard !ledgers.isEmpty else { return }
            let task = Task.detached { [self] in
                do {
                    try await pool.withConnection { try await SubscriberSnapshots.save(ledgers, on: $0) }
                    contents.withLock { contents in
                        for saved in ledgers {
                            guard var entry = contents.entries[saved.subscriberID], entry.loaded.version >= saved.version,
                                  entry.loaded.snapshotVersion < saved.version else { continue }
                            entry.loaded.snapshotVersion = saved.version
                            contents.entries[saved.subscriberID] = entry
                        }
                    }
                } catch {
                    logger.warning("storing snapshots failed", metadata: ["error": "\(error)"])
                }
                _ = self.saving.withLock { $0.removeValue(forKey: key) }
            }
            saving[key] = Saving(subscriberIDs: Set(ledgers.map(\.subscriberID)), task: task)
        }
    }

    /// Waits for the snapshot saves under way (tests, and a clean shutdown).
    public func snapshotsSaved() async {
        while let saving = saving.withLock({ $0.values.first }) { await saving.task.value }
    }

    /// Drops the ledgers of `subscriberIDs`.
    func forget(_ subscriberIDs: [String]) {
        contents.withLock { contents in
            for subscriberID in subscriberIDs {
                if let entry = contents.entries.removeValue(forKey: subscriberID) { contents.weight -= entry.weight }
            }
        }
    }

    /// Drops every ledger (tests that change the database behind the service).
    public func removeAll() {
        contents.withLock { $0 = Contents() }
    }

    /// Ledgers held, and the facts they hold.
    public var count: (ledgers: Int, facts: Int) {
        contents.withLock { ($0.entries.count, $0.weight) }
    }

    /// Drops the least recently used entries until `target` facts are held;
    /// a quarter of the budget at a time, so the sort is paid rarely.
    private static func evict(_ contents: inout Contents, downTo target: Int) {
        let oldestFirst = contents.entries.sorted { $0.value.lastUse < $1.value.lastUse }
        for (subscriberID, entry) in oldestFirst where contents.weight > target {
            contents.entries[subscriberID] = nil
            contents.weight -= entry.weight
        }
    }
}
