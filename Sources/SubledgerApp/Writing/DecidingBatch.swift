import EventStore
import Foundation
import Ledger
import Postgres

/// A batch being decided: the streams it touches as read, with the events
/// decided so far applied in memory under provisional positions (the store
/// assigns the real ones), and the ownership changes it makes.
struct DecidingBatch {
    struct Stream {
        /// The ledger as read, for the state after the commit.
        var read: SubscriberLedger
        /// The ledger with this batch's decisions applied.
        var ledger: SubscriberLedger
        var version: Int64
        /// The version of the stored snapshot the read started from.
        var snapshotVersion: Int64
        /// The subscriber's key: read with the stream, or made for its first
        /// events (`newKeys`).
        var key: SubscriberKey?
        /// An erased subscriber's stream (`LoadedLedger.isErased`).
        var isErased: Bool
        var pending: [(command: Int, event: LedgerEvent)] = []
    }

    private var streams: [String: Stream] = [:]
    /// Streams in the order they were first named (appends keep it).
    private var order: [String] = []
    private var owners: [String: String]
    private let ownersAsRead: [String: String]
    /// Original → owner before the batch, for each original it claims.
    private var claimed: [String: String?] = [:]
    private var nextPosition: Int64
    private var commandSubscribers: [String] = []
    /// Each subscriber's last command in the batch.
    private var lastCommand: [String: Int] = [:]
    var outcomes: [WriteOutcome]
    /// The keys made for first writes, inserted in the commit's pipeline.
    private(set) var newKeys: [(subscriberID: String, key: SubscriberKey)] = []

    /// Reads every stream the batch names (each a snapshot and the tail of
    /// its stream, all in one query) and the owners of its transactions.
    static func load(_ batch: WriteBatch, writer: LedgerWriter, on connection: Connection) async throws -> DecidingBatch {
        var ids = Set<String>(minimumCapacity: batch.commands.count * 2)
        var subscribers = [String]()
        var seen = Set<String>(minimumCapacity: batch.commands.count)
        for command in batch.commands {
            ids.formUnion(command.referencedTransactionIDs)
            if seen.insert(command.subscriberID).inserted { subscribers.append(command.subscriberID) }
        }
        // Taken out of the cache, so this batch's events apply in place; put
        // back after the commit (`result`).
        var held = writer.ledgerCache?.ledgers(subscribers, use: .take) ?? [:]
        // A later command's decision can record the position of an earlier one
        // (a transfer's `afterPosition`): with several commands, start near
        // the real head. The ledgers, the owners and the head: one round trip.
        let ownersStatement = OwnershipStore.ownersStatement(ids)
        let readsHead = batch.commands.count > 1
        var statements = [SubscriberSnapshots.loadStatement(subscribers, unlessCached: nil, held: held)]
        if let ownersStatement { statements.append(ownersStatement) }
        if readsHead { statements.append(EventStore.headPositionStatement) }
        let outputs = statements.count == 1 ? [try await connection.query(statements[0])] : try await connection.pipeline(statements)
        let loaded = try await SubscriberSnapshots.ledgers(from: outputs[0], unlessCached: nil, held: &held, on: connection)
        let owners = ownersStatement == nil ? [:] : try OwnershipStore.owners(from: outputs[1])
        let ledgers = subscribers.map { loaded[$0] ?? .empty($0) }
        let head = readsHead ? try EventStore.headPosition(from: outputs[outputs.count - 1]) : ledgers.map(\.ledger.lastPosition).max() ?? 0
        var work = DecidingBatch(owners: owners, nextPosition: head + 1, commands: batch.commands.count)
        work.streams.reserveCapacity(ledgers.count)
        work.order.reserveCapacity(ledgers.count)
        work.commandSubscribers = batch.commands.map(\.subscriberID)
        work.lastCommand.reserveCapacity(subscribers.count)
        for (index, subscriberID) in work.commandSubscribers.enumerated() { work.lastCommand[subscriberID] = index }
        for ledger in ledgers { work.add(ledger) }
        return work
    }

    private init(owners: [String: String], nextPosition: Int64, commands: Int) {
        self.owners = owners
        self.ownersAsRead = owners
        self.nextPosition = nextPosition
        self.outcomes = Array(repeating: .duplicate(position: 0), count: commands)
    }

    func hasStream(_ subscriberID: String) -> Bool { streams[subscriberID] != nil }

    /// Adds a stream read during the batch (a transfer's previous owner).
    mutating func add(_ loaded: LoadedLedger) {
        streams[loaded.subscriberID] = Stream(read: loaded.ledger, ledger: loaded.ledger, version: loaded.version,
                                              snapshotVersion: loaded.snapshotVersion, key: loaded.key, isErased: loaded.isErased)
        order.append(loaded.subscriberID)
    }

    func decide(_ command: WriteCommand, decider: Decider, now: Date) throws(LedgerError) -> Decision {
        // Nothing more is recorded for an erased subscriber.
        if streams[command.subscriberID]?.isErased == true { throw LedgerError.erased }
        let ledger = streams[command.subscriberID]?.ledger ?? SubscriberLedger(subscriberID: command.subscriberID)
        let owners = self.owners
        switch command.request {
        case .fact(let request):
            return try decider.decide(request, ledger: ledger, owner: { owners[$0] }, now: now, source: command.source)
        case .restore(let request):
            return try decider.decide(request, ledger: ledger, owner: { owners[$0] }, now: now, source: command.source)
        case .grant(let request, let grantID, let actor):
            return try decider.decide(request, grantID: grantID, by: actor, ledger: ledger, now: now, source: command.source)
        case .revokeGrant(let request, let actor):
            return try decider.decide(request, by: actor, ledger: ledger, now: now, source: command.source)
        }
    }

    /// Applies a decision in memory, so the commands after it see it.
    mutating func apply(_ decision: Decision, of command: Int, for subscriberID: String, now: Date) {
        append(decision.events, to: subscriberID, command: command, now: now)
        for transfer in decision.transfers {
            append(transfer.events, to: transfer.fromSubscriberID, command: command, now: now)
        }
        for original in decision.claims {
            if claimed[original] == nil { claimed[original] = .some(ownersAsRead[original]) }
            owners[original] = subscriberID
        }
        outcomes[command] = .recorded(position: 0)
    }

    private mutating func append(_ events: [LedgerEvent], to subscriberID: String, command: Int, now: Date) {
        // Applied in memory only for a later command of the same subscriber
        // (a decision reads its own subscriber's ledger alone): otherwise the
        // events are never read back, and applying them would copy a ledger
        // still shared with `read` (the whole history of a long one) — in an
        // import's batch of a thousand subscribers, every one of them.
        let isRead = command < lastCommand[subscriberID, default: -1]
        for event in events {
            let recorded = RecordedLedgerEvent(position: nextPosition, recordedAt: now, event: event)
            if isRead { streams[subscriberID]?.ledger.apply(recorded) }
            streams[subscriberID]?.pending.append((command, event))
            nextPosition += 1
        }
    }

    /// The streams with new events, in order.
    private var appendedStreams: [String] { order.filter { !(streams[$0]?.pending.isEmpty ?? true) } }

    /// Every stream's new events, each expecting the version it was read
    /// at, personal fields sealed with the subscriber's key; a subscriber
    /// written for the first time gets a key (in `newKeys`).
    mutating func appends(sources: [String]) throws -> [StreamAppend] {
        let appended = appendedStreams
        var fresh = SubscriberKey.generate(count: appended.count(where: { streams[$0]!.key == nil }))
        return try appended.map { subscriberID in
            var stream = streams[subscriberID]!
            let key: SubscriberKey
            if let existing = stream.key {
                key = existing
            } else {
                // A stream with events always has its key, unless erased
                // (refused by `decide`; a transfer's previous owner is refused here).
                guard stream.version == 0, !stream.isErased else { throw LedgerError.erased }
                key = fresh.removeLast()
                stream.key = key
                streams[subscriberID] = stream
                newKeys.append((subscriberID, key))
            }
            // Hashed once per stream, not once per event.
            let pseudonym = SubscriberPseudonyms.pseudonym(for: subscriberID)
            let events = try stream.pending.map { pending in
                try SubscriberStreams.newEvent(pending.event, subscriberID: subscriberID, pseudonym: pseudonym, key: key,
                                               source: sources[pending.command])
            }
            return StreamAppend(streamID: SubscriberStreams.prefix + pseudonym, expected: .exact(stream.version), events: events)
        }
    }

    var claims: [OwnershipClaim] {
        claimed.map { original, previous in
            OwnershipClaim(originalTransactionID: original, previousOwner: previous, newOwner: owners[original]!)
        }
    }

    /// The outcomes with the positions the store gave, and the ledgers after
    /// the commit, each with its stream version (for the ledger cache and
    /// the snapshots). An event the store already had (a concurrent copy
    /// stored first) makes its command a duplicate of that copy, and its
    /// stream's ledger unknown until read again.
    ///
    /// `exactFrom`: from this stream version on, apply the events as the
    /// store holds them (decoded from what was appended), so a ledger kept
    /// in memory equals a fold of the stored stream; a stream whose snapshot
    /// is due always is. Only those ledgers are returned.
    /// Takes the ledgers as read out of the work (so the events are applied
    /// to them in place, not to a copy); the work is spent after it.
    mutating func result(appendResults: [StreamAppendResult], appends: [StreamAppend], exactFrom: Int64,
                         now: Date) -> (result: WriteBatchResult, ledgers: [LoadedLedger]) {
        var outcomes = self.outcomes
        var ledgers = [String: SubscriberLedger]()
        var after = [LoadedLedger]()
        for subscriberID in order where streams[subscriberID]!.pending.isEmpty {
            let stream = streams[subscriberID]!
            ledgers[subscriberID] = stream.read
            after.append(LoadedLedger(ledger: stream.read, version: stream.version, snapshotVersion: stream.snapshotVersion, key: stream.key))
        }
        let appendedIDs = appendedStreams
        for ((subscriberID, appended), append) in zip(zip(appendedIDs, appendResults), appends) {
            guard var stream = streams.removeValue(forKey: subscriberID) else { continue }
            var ledger = stream.read
            stream.read = SubscriberLedger(subscriberID: subscriberID)
            stream.ledger = stream.read
            let version = appended.outcomes.last?.streamVersion ?? stream.version
            var stored = version >= exactFrom || SubscriberSnapshots.isDue(version: version, snapshotVersion: stream.snapshotVersion)
            var isKnown = true
            let pseudonym = SubscriberPseudonyms.pseudonym(for: subscriberID)
            for ((outcome, pending), event) in zip(zip(appended.outcomes, stream.pending), append.events) {
                let ownStream = isOwn(pending.command, subscriberID)
                if outcome.isDuplicate {
                    isKnown = false
                    if ownStream { outcomes[pending.command] = .duplicate(position: outcome.position) }
                    continue
                }
                var applied = pending.event
                if stored {
                    // What this build just encoded decodes; if it ever did not, the
                    // ledger is only good for this answer, not to keep.
                    // Personal fields are opened again: the ledger holds them as
                    // a read of the stream does.
                    if let decoded = try? LedgerEvent.decodeFast(type: event.type, schemaVersion: event.schemaVersion, data: event.data),
                       let opened = try? stream.key.map({ try $0.openingPersonalFields(of: decoded, pseudonym: pseudonym) }) ?? decoded {
                        applied = opened
                    } else {
                        stored = false
                    }
                }
                ledger.apply(RecordedLedgerEvent(position: outcome.position, recordedAt: now, event: applied))
                if ownStream, case .recorded = outcomes[pending.command] {
                    outcomes[pending.command] = .recorded(position: outcome.position)
                }
            }
            if isKnown {
                ledgers[subscriberID] = ledger
                if stored {
                    after.append(LoadedLedger(ledger: ledger, version: version, snapshotVersion: stream.snapshotVersion, key: stream.key))
                }
            }
        }
        return (WriteBatchResult(outcomes: outcomes, ledgers: ledgers), after)
    }

    /// Whether `subscriberID` is the subscriber command `index` was for (not a
    /// previous owner receiving `transferred_out`).
    private func isOwn(_ index: Int, _ subscriberID: String) -> Bool {
        commandSubscribers[index] == subscriberID
    }
}

extension WriteCommand {
    /// The transaction ids whose owners the decision may ask about.
    var referencedTransactionIDs: Set<String> {
        switch request {
        case .fact(let request): request.referencedTransactionIDs
        case .restore(let request): request.referencedTransactionIDs
        case .grant, .revokeGrant: []
        }
    }
}

