import ArgumentParser
import CommandSupport
import EventStore
import Foundation
import JSON
import Ledger
import Logging
import Postgres
import HTTPAPI
import SubledgerApp

/// A database made ready for one command, closed (and an embedded cluster
/// this process started, stopped) when the command is done.
struct CommandDatabase {
    let configuration: SubledgerConfiguration
    let logger: Logger
    let catalog: CatalogSource
    let database: PreparedDatabase
    let pool: ConnectionPool

    /// `connections`: the most the command's pool opens (an import's writers, and one more).
    static func open(_ options: ConfigurationOptions, connections: Int = 2) async throws -> CommandDatabase {
        let configuration = try options.resolve()
        let logger = LoggingSetup.logger(configuration)
        let catalog = try CatalogSource.load(path: configuration.productsPath)
        let database = try await PreparedDatabase.prepare(configuration, logger: logger)
        let pool = ConnectionPool(configuration: PoolConfiguration(
            // At least five: a rebuild runs two workers × (cursor, writer) and the catch-up.
            conninfo: database.conninfo, maximumConnections: max(5, connections),
            // Long work (import, rebuild) runs long statements: only a forgotten transaction is cut.
            sessionTimeouts: SessionTimeouts(idleInTransactionSessionTimeout: configuration.sessionTimeouts.idleInTransactionSessionTimeout)), logger: logger)
        return CommandDatabase(configuration: configuration, logger: logger, catalog: catalog, database: database, pool: pool)
    }

    /// Runs `body`, then closes the pool and stops the cluster whatever happened.
    static func with<T>(_ options: ConfigurationOptions, connections: Int = 2,
                        _ body: (CommandDatabase) async throws -> T) async throws -> T {
        let opened = try await open(options, connections: connections)
        do {
            let value = try await body(opened)
            await opened.close()
            return value
        } catch {
            await opened.close()
            throw error
        }
    }

    func close() async {
        await pool.close()
        database.stopIfStarted()
    }

    var reader: SubscriberReader {
        SubscriberReader(store: EventStore(pool: pool, logger: logger), catalog: catalog.catalog)
    }
}

/// Turns the ledger's refusals into a plain message and exit code 1.
func reportingLedgerErrors<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as LedgerError {
        FileHandle.standardError.write(Data("error: \(error.message)\n".utf8))
        throw ExitCode(1)
    }
}

func printJSON(_ value: some Encodable) throws {
    let encoder = LedgerJSON.makeEncoder()
    encoder.outputFormatting.insert(.prettyPrinted)
    print(String(decoding: try encoder.encode(value), as: UTF8.self))
}

func parseInstant(_ text: String?) throws -> Date? {
    guard let text else { return nil }
    guard let date = RFC3339.parse(text) else {
        throw ValidationError("--at must be an RFC 3339 date-time such as 2024-01-31T12:00:00Z, got \(text)")
    }
    return date
}

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a subscriber's state (entitlements, subscriptions, periods, purchases, devices) as JSON.")

    @Argument(help: "The subscriber id.") var subscriber: String
    @Option(help: "Evaluate at this instant (RFC 3339); default now.") var at: String?
    @OptionGroup var options: ConfigurationOptions

    func run() async throws {
        let instant = try parseInstant(at)
        let state = try await CommandDatabase.with(options) { database in
            try await reportingLedgerErrors { try await database.reader.state(of: subscriber, at: instant) }
        }
        try printJSON(state)
    }
}

struct History: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print a subscriber's events in order, one readable line each.")

    @Argument(help: "The subscriber id.") var subscriber: String
    @Flag(help: "Print the events as JSON instead.") var json = false
    @OptionGroup var options: ConfigurationOptions

    func run() async throws {
        let entries = try await CommandDatabase.with(options) { database in
            try await reportingLedgerErrors { try await database.reader.timeline(of: subscriber) }
        }
        if json {
            struct Body: Encodable { var events: [TimelineEntry] }
            try printJSON(Body(events: entries))
            return
        }
        for entry in entries {
            print("\(entry.position)\t\(RFC3339.format(entry.recordedAt))\t\(entry.source ?? "-")\t\(entry.summary)")
        }
    }
}

struct Explain: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Explain why each of a subscriber's entitlements is or is not active.")

    @Argument(help: "The subscriber id.") var subscriber: String
    @Option(help: "Explain at this instant (RFC 3339); default now.") var at: String?
    @Flag(help: "Print the explanation as JSON instead.") var json = false
    @OptionGroup var options: ConfigurationOptions

    func run() async throws {
        let instant = try parseInstant(at)
        let explanation = try await CommandDatabase.with(options) { database in
            try await reportingLedgerErrors { try await database.reader.explanation(of: subscriber, at: instant) }
        }
        if json {
            try printJSON(explanation)
            return
        }
        print("\(explanation.subscriberID) at \(RFC3339.format(explanation.at))")
        for entitlement in explanation.entitlements {
            print("\(entitlement.id): \(entitlement.active ? "active" : "not active")")
            for reason in entitlement.reasons { print("  - \(reason)") }
            if !entitlement.positions.isEmpty {
                print("  events: \(entitlement.positions.map(String.init).joined(separator: ", "))")
            }
        }
        if !explanation.neverGranted.isEmpty {
            print("never granted: \(explanation.neverGranted.joined(separator: ", "))")
        }
    }
}

struct Import: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Load facts from NDJSON: each line a POST /v1/subscribers/{id}/events body plus \"subscriberId\".",
        discussion: """
            Same rules and idempotency as the API: importing a file again changes nothing. \
            Lines the rules refuse are reported with their numbers on standard error; the rest are imported. \
            Exits 1 when any line was rejected. Ends with an ANALYZE of the database when anything was imported.
            """)

    @Argument(help: "The NDJSON file, or - for standard input.") var file: String
    @Option(name: .customLong("batch-size"), help: "Lines per batch (one transaction each).") var batchSize = 1000
    @Option(help: "Connections writing at once (default: one per core).")
    var writers = ProcessInfo.processInfo.activeProcessorCount
    @Option(name: .customLong("chunk-size"), help: "Lines read and split among the writers together (memory grows with it).")
    var chunkSize = 100_000
    @OptionGroup var options: ConfigurationOptions

    func validate() throws {
        guard (1...10_000).contains(batchSize) else { throw ValidationError("--batch-size must be from 1 to 10000") }
        guard (1...64).contains(writers) else { throw ValidationError("--writers must be from 1 to 64") }
        guard (1...1_000_000).contains(chunkSize) else { throw ValidationError("--chunk-size must be from 1 to 1000000") }
    }

    func run() async throws {
        let handle: FileHandle
        if file == "-" {
            handle = .standardInput
        } else {
            guard let opened = FileHandle(forReadingAtPath: file) else { throw ValidationError("cannot read \(file)") }
            handle = opened
        }
        let onTerminal = isatty(2) == 1
        let summary = try await CommandDatabase.with(options, connections: writers + 1) { database in
            let started = ContinuousClock.now
            var importer = Importer(pool: database.pool, store: EventStore(pool: database.pool, logger: database.logger),
                                    catalog: database.catalog.catalog, restorePolicy: database.configuration.restorePolicy,
                                    logger: database.logger)
            importer.batchSize = batchSize
            importer.writers = writers
            importer.chunkSize = chunkSize
            importer.analyzesWhenDone = true
            if !database.configuration.appStoreRootCertificates.isEmpty {
                let dependencies = AppDependencies(configuration: database.configuration, pool: database.pool,
                                                   catalog: database.catalog, logger: database.logger)
                importer.claimObserver = AppStoreIntegration(dependencies).claimObserver
            }
            var reported = 0
            defer { if onTerminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) } }
            let lines = NDJSONReader(handle: handle, maximumLineLength: database.configuration.maximumBodySize)
            return try await importer.importLines(lines) { progress in
                if onTerminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
                for rejected in progress.rejected[reported...] {
                    FileHandle.standardError.write(Data("\(rejected)\n".utf8))
                }
                reported = progress.rejected.count
                if onTerminal {
                    let rate = Double(progress.imported + progress.duplicates) / (ContinuousClock.now - started).timeInterval
                    FileHandle.standardError.write(Data("\(progress.lines) lines: \(progress), \(Int(rate)) facts/s".utf8))
                }
            }
        }
        print(summary)
        if !summary.rejected.isEmpty { throw ExitCode(1) }
    }
}
