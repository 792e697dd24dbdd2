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

/// Loads facts in batches (`subledger import`) through the ledger's one
/// write path, under the API's rules and idempotency keys, so importing a
/// file twice changes nothing.
///
/// Each batch is one `LedgerWriter` batch that skips refusals: a line sees
/// the lines before it, a line the rules (or the database) refuse is
/// reported by number, and the rest is written.
public struct Importer: Sendable {
    public var writer: LedgerWriter
    public var batchSize = 500

    public init(writer: LedgerWriter) {
        self.writer = writer
    }

    public init(pool: ConnectionPool, store: EventStore, catalog: Catalog, restorePolicy: RestorePolicy, logger: Logger) {
        self.init(writer: LedgerWriter(pool: pool, store: store, catalog: catalog, restorePolicy: restorePolicy, logger: logger))
    }

    /// Told of the original transactions a batch claimed, after it commits.
    public var claimObserver: (@Sendable (_ originalTransactionIDs: [String], _ subscriberID: String) async -> Void)? {
        get { writer.claimObserver }
        set { writer.claimObserver = newValue }
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

    /// Imports one batch.
    public func importBatch(_ lines: [ImportLine]) async throws -> ImportSummary {
        var summary = ImportSummary()
        var commands = [WriteCommand]()
        var numbers = [Int]()
        for line in lines {
            guard line.text.contains(where: { !($0 == 0x20 || $0 == 0x09 || $0 == 0x0D) }) else { continue }
            summary.lines += 1
            do {
                let (parsedID, request) = try FactRequest.parseImportLine(line.text)
                let subscriberID = try InputLimits.validateSubscriberID(parsedID)
                commands.append(.fact(request, subscriberID: subscriberID, source: FactSource.import))
                numbers.append(line.number)
            } catch {
                summary.rejected.append(RejectedLine(line: line.number, reason: Self.reason(error)))
            }
        }
        guard !commands.isEmpty else { return summary }
        let result = try await writer.write(WriteBatch(commands, refusals: .skip))
        for (number, outcome) in zip(numbers, result.outcomes) {
            switch outcome {
            case .recorded: summary.imported += 1
            case .duplicate: summary.duplicates += 1
            case .rejected(let error): summary.rejected.append(RejectedLine(line: number, reason: Self.reason(error)))
            }
        }
        summary.rejected.sort { $0.line < $1.line }
        return summary
    }

    static func reason(_ error: any Error) -> String {
        guard let error = error as? LedgerError else { return "\(error)" }
        return "\(error.code): \(error.message)"
    }
}

