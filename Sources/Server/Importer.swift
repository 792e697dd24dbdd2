import EventStore
import Foundation
import Ledger
import Logging
import Postgres

/// One line of an NDJSON import, with its 1-based number in the file.
public struct ImportLine: Sendable {
    public var number: Int
    public var text: Data

    public init(number: Int, text: Data) {
        self.number = number
        self.text = text
    }
}

/// A line `subledger import` did not apply, and why.
public struct RejectedLine: Sendable, Equatable, CustomStringConvertible {
    public var line: Int
    public var reason: String

    public var description: String { "line \(line): \(reason)" }
}

/// What importing some lines did.
public struct ImportSummary: Sendable, Equatable, CustomStringConvertible {
    public var lines = 0
    public var imported = 0
    public var duplicates = 0
    public var rejected: [RejectedLine] = []

    public init() {}

    mutating func add(_ other: ImportSummary) {
        lines += other.lines
        imported += other.imported
        duplicates += other.duplicates
        rejected += other.rejected
    }

    public var description: String { "imported \(imported), duplicates \(duplicates), rejected \(rejected.count)" }
}

public struct ImportError: Error, CustomStringConvertible, Sendable {
    public var description: String
}

/// Loads facts in batches (`subledger import`), under the API's rules and
/// idempotency keys, so importing a file twice changes nothing.
///
/// Each batch reads the streams of its subscribers once, decides line by line
/// against those states kept in memory (a line sees the lines before it), and
/// appends every stream's new events in one transaction with the versions it
/// read, the ownership rows beside them. A concurrent writer makes the batch
/// read and decide again. A line the rules refuse is reported, not fatal.
public struct Importer: Sendable {
    public let pool: ConnectionPool
    public let store: EventStore
    public let catalog: Catalog
    public let decider: Decider
    let logger: Logger
    public var batchSize = 500
    public var maximumAttempts = 20
    public var now: @Sendable () -> Date = { Date() }
    /// Told of the original transactions a batch claimed, after it commits
    /// (App Store notifications waiting for them are applied).
    public var claimObserver: (@Sendable (_ originalTransactionIDs: [String], _ subscriberID: String) async -> Void)?

    public init(pool: ConnectionPool, store: EventStore, catalog: Catalog, restorePolicy: RestorePolicy, logger: Logger) {
        self.pool = pool
        self.store = store
        self.catalog = catalog
        self.decider = Decider(catalog: catalog, restorePolicy: restorePolicy)
        self.logger = logger
    }

    /// Imports every line, a batch at a time; `progress` sees the running total after each batch.
    public func importLines(_ lines: some Sequence<ImportLine>,
                            progress: (ImportSummary) -> Void = { _ in }) async throws -> ImportSummary {
        var total = ImportSummary()
        var batch = [ImportLine]()
        batch.reserveCapacity(batchSize)
        for line in lines {
            batch.append(line)
            if batch.count >= batchSize {
                total.add(try await importBatch(batch))
                batch.removeAll(keepingCapacity: true)
                progress(total)
            }
        }
        if !batch.isEmpty {
            total.add(try await importBatch(batch))
            progress(total)
        }
        return total
    }

    struct ParsedLine {
        var number: Int
        var subscriberID: String
        var request: FactRequest
    }

    /// Imports one batch, deciding again if a concurrent writer interferes.
    public func importBatch(_ lines: [ImportLine]) async throws -> ImportSummary {
        var summary = ImportSummary()
        var parsed = [ParsedLine]()
        for line in lines {
            guard line.text.contains(where: { !($0 == 0x20 || $0 == 0x09 || $0 == 0x0D) }) else { continue }
            summary.lines += 1
            do {
                let (subscriberID, request) = try FactRequest.parseImportLine(line.text)
                try LedgerStreams.validate(subscriberID: subscriberID)
                parsed.append(ParsedLine(number: line.number, subscriberID: subscriberID, request: request))
            } catch {
                summary.rejected.append(RejectedLine(line: line.number, reason: Self.reason(error)))
            }
        }
        guard !parsed.isEmpty else { return summary }
        for attempt in 1...maximumAttempts {
            do {
                var decided = try await decideAndAppend(parsed)
                decided.lines = summary.lines
                decided.rejected = (summary.rejected + decided.rejected).sorted { $0.line < $1.line }
                return decided
            } catch where OwnershipLookup.isContention(error) {
                logger.debug("import batch lost a race; deciding again", metadata: ["import.attempt": "\(attempt)", "error": "\(error)"])
                try await Task.sleep(for: .milliseconds(Int.random(in: 1...(5 * min(attempt, 10)))))
            }
        }
        throw ImportError(description: "the batch of lines \(lines.first!.number)–\(lines.last!.number) kept conflicting with concurrent writers; nothing of it was stored")
    }

    /// The in-memory state of one stream during a batch.
    struct StreamWork {
        var ledger: SubscriberLedger
        var version: Int64
        var pending: [(line: Int, event: LedgerEvent)] = []
    }

    private func decideAndAppend(_ lines: [ParsedLine]) async throws -> ImportSummary {
        var ids = Set<String>()
        var subscriberOrder = [String]()
        for line in lines {
            ids.formUnion(RequestIDs.of(line.request))
            if !subscriberOrder.contains(line.subscriberID) { subscriberOrder.append(line.subscriberID) }
        }
        var streams = [String: StreamWork]()
        var owners = [String: String]()
        var nextPosition: Int64 = 0
        try await pool.withConnection { connection in
            for subscriberID in subscriberOrder {
                streams[subscriberID] = try await load(subscriberID, on: connection)
            }
            owners = try await OwnershipLookup.owners(of: ids, on: connection)
            let head = try await connection.query("SELECT coalesce(max(position), 0) FROM events")
            nextPosition = (try head.first?.decode(Int64.self, at: 0) ?? 0) + 1
        }
        let initialOwners = owners
        var claimed = [String: String?]()  // original → owner before the batch
        var summary = ImportSummary()
        let now = self.now()

        func apply(_ events: [LedgerEvent], to subscriberID: String, line: Int) {
            for event in events {
                // Provisional positions keep each stream's order; the store assigns the real ones.
                streams[subscriberID]!.ledger.apply(RecordedLedgerEvent(position: nextPosition, recordedAt: now, event: event))
                streams[subscriberID]!.pending.append((line, event))
                nextPosition += 1
            }
        }

        var importedLines = Set<Int>()
        for line in lines {
            let decision: Decision
            do {
                decision = try decider.decide(line.request, ledger: streams[line.subscriberID]!.ledger,
                                              owner: { owners[$0] }, now: now, source: FactSource.import)
            } catch {
                summary.rejected.append(RejectedLine(line: line.number, reason: Self.reason(error)))
                continue
            }
            if decision.isDuplicate {
                summary.duplicates += 1
                continue
            }
            for transfer in decision.transfers where streams[transfer.fromSubscriberID] == nil {
                streams[transfer.fromSubscriberID] = try await pool.withConnection { try await load(transfer.fromSubscriberID, on: $0) }
                subscriberOrder.append(transfer.fromSubscriberID)
            }
            apply(decision.events, to: line.subscriberID, line: line.number)
            for transfer in decision.transfers { apply(transfer.events, to: transfer.fromSubscriberID, line: line.number) }
            for original in decision.claims {
                if claimed[original] == nil { claimed[original] = .some(initialOwners[original]) }
                owners[original] = line.subscriberID
            }
            importedLines.insert(line.number)
        }

        var appends = [StreamAppend]()
        var lineOfEvent = [[Int]]()
        var rows = [TransactionRow]()
        for subscriberID in subscriberOrder {
            guard let work = streams[subscriberID], !work.pending.isEmpty else { continue }
            let events = work.pending.map(\.event)
            appends.append(StreamAppend(streamID: LedgerStreams.streamID(for: subscriberID), expected: .exact(work.version),
                                        events: try LedgerStreams.newEvents(events, subscriberID: subscriberID, source: FactSource.import)))
            lineOfEvent.append(work.pending.map(\.line))
            rows += OwnershipLookup.transactionRows(for: events, subscriberID: subscriberID)
        }
        let claims = claimed.map { original, previous in
            OwnershipClaim(originalTransactionID: original, previousOwner: previous, newOwner: owners[original]!)
        }
        if !appends.isEmpty {
            let results = try await store.transaction { connection in
                let results = try await store.append(appends, on: connection)
                try await OwnershipLookup.write(claims: claims, transactions: rows, on: connection)
                return results
            }
            if let claimObserver {
                for (subscriberID, claimed) in Dictionary(grouping: claims.filter { $0.previousOwner != $0.newOwner }, by: \.newOwner) {
                    await claimObserver(claimed.map(\.originalTransactionID), subscriberID)
                }
            }
            // A line a concurrent writer had already stored counts as a duplicate.
            for (result, lines) in zip(results, lineOfEvent) {
                for (outcome, line) in zip(result.outcomes, lines) where outcome.isDuplicate {
                    if importedLines.remove(line) != nil { summary.duplicates += 1 }
                }
            }
        }
        summary.imported = importedLines.count
        return summary
    }

    static func reason(_ error: any Error) -> String {
        guard let error = error as? LedgerError else { return "\(error)" }
        return "\(error.code): \(error.message)"
    }

    private func load(_ subscriberID: String, on connection: Connection) async throws -> StreamWork {
        let history = try SubscriberHistory(
            subscriberID: subscriberID, stored: try await store.readStream(LedgerStreams.streamID(for: subscriberID), on: connection))
        return StreamWork(ledger: SubscriberLedger(subscriberID: subscriberID, events: history.events), version: history.version)
    }
}

/// Reads lines from a file handle in chunks (a file or standard input),
/// numbering them from 1. Reads block: meant for the CLI's import.
public struct NDJSONReader: Sequence, IteratorProtocol {
    private let handle: FileHandle
    private var buffer = Data()
    private var finished = false
    private var number = 0

    public init(handle: FileHandle) {
        self.handle = handle
    }

    public mutating func next() -> ImportLine? {
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let text = buffer[buffer.startIndex..<newline]
                buffer = buffer[(newline + 1)...]
                number += 1
                return ImportLine(number: number, text: Data(text))
            }
            if finished {
                guard !buffer.isEmpty else { return nil }
                defer { buffer = Data() }
                number += 1
                return ImportLine(number: number, text: Data(buffer))
            }
            let chunk = (try? handle.read(upToCount: 1 << 16)) ?? nil
            if let chunk, !chunk.isEmpty {
                buffer = Data(buffer) + chunk
            } else {
                finished = true
            }
        }
    }
}
