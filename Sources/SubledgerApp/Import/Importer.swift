import EventStore
import Foundation
import Ledger
import Logging
import Postgres

/// One line of an NDJSON import, with its 1-based number in the file.
public struct ImportLine: Sendable {
    public var number: Int
    public var text: Data
    /// Set when the line was longer than the reader's limit: its bytes
    /// were skipped, not kept, and `text` is empty.
    public var skippedLength: Int?

    public init(number: Int, text: Data, skippedLength: Int? = nil) {
        self.number = number
        self.text = text
        self.skippedLength = skippedLength
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

/// Loads facts (`subledger import`) through the ledger's one write path,
/// under the API's rules and idempotency keys, so importing a file twice
/// changes nothing.
///
/// The file is read a chunk at a time (memory does not grow with it): a
/// chunk's lines are parsed on every core while the chunk before is being
/// written, then split into groups that share no subscriber and no
/// transaction (`ImportPlan`), which `writers` connections write at once.
/// Each writes its groups in `LedgerWriter` batches that skip refusals: a
/// line sees the lines of its group before it, a line the rules (or the
/// database) refuse is reported by number, and the rest is written. A
/// chunk's writes end before the next chunk is planned, so every line sees
/// all the chunks before it.
public struct Importer: Sendable {
    public var writer: LedgerWriter
    /// Lines per `LedgerWriter` batch (one transaction each).
    public var batchSize = 500
    /// Connections writing at once.
    public var writers = 1
    /// Lines read, planned and split among the writers together: the
    /// larger, the more of a subscriber's lines share a batch (one read of
    /// their ledger, one stream in the append). Held parsed, a few hundred
    /// bytes a line, twice (the chunk written and the next).
    public var chunkSize = 100_000
    /// Raw lines parsed at once, at most (they are let go after).
    public var parseSliceSize = 5_000
    /// Whether the tables are analyzed once every line is written (when any
    /// was imported): `subledger import` does, so that a service reading
    /// the loaded tables plans with their size, not with the statistics of
    /// before the load (`PlannerStatistics`). The bench's import
    /// measurement does not: it times the writes.
    public var analyzesWhenDone = false

    public init(writer: LedgerWriter) {
        self.writer = writer
    }

    /// An importer whose appends are set-based (`BatchAppend.setBased`).
    public init(pool: ConnectionPool, store: EventStore, catalog: Catalog, restorePolicy: RestorePolicy, logger: Logger) {
        var store = store
        store.batchAppend = .setBased
        self.init(writer: LedgerWriter(pool: pool, store: store, catalog: catalog, restorePolicy: restorePolicy, logger: logger))
    }

    /// Told of the original transactions a batch claimed, after it commits.
    public var claimObserver: (@Sendable (_ originalTransactionIDs: [String], _ subscriberID: String) async -> Void)? {
        get { writer.claimObserver }
        set { writer.claimObserver = newValue }
    }

    /// Imports every line; `progress` sees the running total after each chunk.
    ///
    /// What a chunk holds in memory is its parsed lines (in the plan while
    /// they are written, and the next chunk's while it is parsed): the raw
    /// lines are parsed a slice of at most `parseSliceSize` at a time and
    /// let go, so they do not add to it.
    public func importLines(_ lines: some Sequence<ImportLine>,
                            progress: (ImportSummary) -> Void = { _ in }) async throws -> ImportSummary {
        var iterator = lines.makeIterator()
        let chunkSize = max(1, self.chunkSize)
        /// The next chunk, parsed; nil at the end of the input.
        func nextChunk() async -> ParsedChunk? {
            var parsed = ParsedChunk()
            parsed.lines.reserveCapacity(chunkSize)
            var read = 0
            while read < chunkSize {
                var slice = [ImportLine]()
                slice.reserveCapacity(min(chunkSize - read, parseSliceSize))
                while slice.count < min(chunkSize - read, parseSliceSize), let line = iterator.next() { slice.append(line) }
                guard !slice.isEmpty else { break }
                read += slice.count
                let part = await parse(slice)
                parsed.lines += part.lines
                parsed.summary.add(part.summary)
            }
            return read == 0 ? nil : parsed
        }
        var total = ImportSummary()
        var current = await nextChunk()
        while var chunk = current {
            current = nil
            let plan = try await self.plan(chunk.lines)
            // The plan holds the lines now: the chunk's array goes before the next is parsed.
            chunk.lines = []
            var summary = chunk.summary
            async let written = write(plan)
            let next = await nextChunk()
            summary.add(try await written)
            summary.rejected.sort { $0.line < $1.line }
            total.add(summary)
            progress(total)
            current = next
        }
        if analyzesWhenDone, total.imported > 0 { try await PlannerStatistics.refresh(on: writer.pool) }
        return total
    }

    // MARK: Steps

    struct ParsedChunk: Sendable {
        var lines: [ParsedLine] = []
        /// Lines counted, and those refused before any decision.
        var summary = ImportSummary()
    }

    /// Parses a chunk in as many slices as there are writers, at once.
    func parse(_ chunk: [ImportLine]) async -> ParsedChunk {
        let slices = max(1, min(writers, chunk.count / 1000))
        guard slices > 1 else { return Self.parse(chunk[...]) }
        let size = (chunk.count + slices - 1) / slices
        let parts = await withTaskGroup(of: (Int, ParsedChunk).self) { group in
            for slice in 0..<slices {
                let part = chunk[(slice * size)..<min(chunk.count, (slice + 1) * size)]
                group.addTask { (slice, Self.parse(part)) }
            }
            var parts = [ParsedChunk?](repeating: nil, count: slices)
            for await (slice, part) in group { parts[slice] = part }
            return parts
        }
        var whole = ParsedChunk()
        for part in parts {
            whole.lines += part!.lines
            whole.summary.add(part!.summary)
        }
        return whole
    }

    static func parse(_ lines: ArraySlice<ImportLine>) -> ParsedChunk {
        var parsed = ParsedChunk()
        parsed.lines.reserveCapacity(lines.count)
        for line in lines {
            if let length = line.skippedLength {
                parsed.summary.lines += 1
                parsed.summary.rejected.append(RejectedLine(
                    line: line.number, reason: "invalid_field: the line is \(length) bytes or more, over the limit of a request body"))
                continue
            }
            guard line.text.contains(where: { !($0 == 0x20 || $0 == 0x09 || $0 == 0x0D) }) else { continue }
            parsed.summary.lines += 1
            do {
                let (parsedID, request) = try FactRequest.parseImportLine(line.text)
                let subscriberID = try InputLimits.validateSubscriberID(parsedID)
                parsed.lines.append(ParsedLine(number: line.number,
                                               command: .fact(request, subscriberID: subscriberID, source: FactSource.import)))
            } catch {
                parsed.summary.rejected.append(RejectedLine(line: line.number, reason: reason(error)))
            }
        }
        return parsed
    }

    /// Splits parsed lines among the writers, with the links the ledger
    /// stores now between the ids they name.
    func plan(_ lines: [ParsedLine]) async throws -> ImportPlan {
        guard writers > 1, lines.count > 1 else { return .single(lines) }
        var ids = Set<String>(minimumCapacity: lines.count * 2)
        for line in lines { ids.formUnion(line.command.referencedTransactionIDs) }
        let links = try await writer.pool.withConnection { try await OwnershipStore.links(of: ids, on: $0) }
        return ImportPlan.make(lines, links: links, writers: writers)
    }

    /// Writes each lane of `plan` on a connection of its own, a batch at a time.
    func write(_ plan: ImportPlan) async throws -> ImportSummary {
        try await withThrowingTaskGroup(of: ImportSummary.self) { group in
            for lane in plan.lanes.indices {
                group.addTask {
                    var summary = ImportSummary()
                    var start = 0
                    while start < plan.lanes[lane].count {
                        let end = min(plan.lanes[lane].count, start + max(1, batchSize))
                        summary.add(try await write(plan.lines(ofLane: lane, start..<end)))
                        start = end
                    }
                    return summary
                }
            }
            return try await group.reduce(into: ImportSummary()) { $0.add($1) }
        }
    }

    /// Writes lines as one `LedgerWriter` batch that skips refusals.
    func write(_ lines: [ParsedLine]) async throws -> ImportSummary {
        var summary = ImportSummary()
        guard !lines.isEmpty else { return summary }
        let result = try await writer.write(WriteBatch(lines.map(\.command), refusals: .skip))
        for (line, outcome) in zip(lines, result.outcomes) {
            switch outcome {
            case .recorded: summary.imported += 1
            case .duplicate: summary.duplicates += 1
            case .rejected(let error): summary.rejected.append(RejectedLine(line: line.number, reason: Self.reason(error)))
            }
        }
        return summary
    }

    static func reason(_ error: any Error) -> String {
        guard let error = error as? LedgerError else { return "\(error)" }
        return "\(error.code): \(error.message)"
    }
}
