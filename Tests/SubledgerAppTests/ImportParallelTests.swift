import EventStore
import Foundation
import JSON
import Ledger
import Postgres
import SubledgerApp
import SubledgerAppTesting
import Testing

/// The parallel import against the API's path: for generated files full of
/// cross-subscriber facts (restores that transfer, renewals and refunds of
/// someone else's transactions), duplicates and bad lines, importing with
/// several writers, small batches and small chunks stores the ledger that
/// recording each line through the API in file order stores.
@Suite("Parallel import")
struct ImportParallelTests {
    /// What one line did: "recorded", "duplicate", or the refusal's code.
    typealias Outcomes = [Int: String]

    @Test(arguments: [UInt64(1), 2, 3])
    func parallelImportStoresWhatTheAPIStoresLineByLine(seed: UInt64) async throws {
        var generator = ImportFileGenerator(seed: seed)
        let file = generator.make(lines: 400)
        let lines = Self.lines(file)

        let reference = try await makeDependencies()
        defer { Task { [pool = reference.pool] in await pool.close() } }
        let expected = try await Self.recordThroughAPI(lines, reference)

        let imported = try await makeDependencies()
        defer { Task { [pool = imported.pool] in await pool.close() } }
        let importer = Self.importer(imported, writers: 4, batchSize: 7, chunkSize: 60)
        let summary: ImportSummary = try await importer.importLines(lines)

        #expect(summary.imported == expected.values.filter { $0 == "recorded" }.count)
        #expect(summary.duplicates == expected.values.filter { $0 == "duplicate" }.count)
        #expect(summary.rejected.map(\.line) == expected.filter { !["recorded", "duplicate"].contains($0.value) }.keys.sorted())
        for rejected in summary.rejected {
            #expect(rejected.reason.hasPrefix(expected[rejected.line]! + ":"), "line \(rejected.line): \(rejected.reason)")
        }
        #expect(try await Self.ledger(of: imported) == Self.ledger(of: reference))

        // Again, both ways. A line refused the first time can be accepted
        // now (a renewal refused while another subscriber owned the original,
        // which a later restore moved): the rules see the ledger as it is.
        let replayed = try await Self.recordThroughAPI(lines, reference)
        let again = try await importer.importLines(lines)
        #expect(again.imported == replayed.values.filter { $0 == "recorded" }.count)
        #expect(again.duplicates == replayed.values.filter { $0 == "duplicate" }.count)
        #expect(again.rejected.map(\.line) == replayed.filter { !["recorded", "duplicate"].contains($0.value) }.keys.sorted())
        #expect(try await Self.ledger(of: imported) == Self.ledger(of: reference))
    }

    /// Without facts about other subscribers' transactions, importing a file
    /// again appends nothing and answers every line as the first time.
    @Test(arguments: [UInt64(4), 5])
    func reimportingAppendsNothing(seed: UInt64) async throws {
        var generator = ImportFileGenerator(seed: seed)
        generator.crossesSubscribers = false
        let lines = Self.lines(generator.make(lines: 400))
        let dependencies = try await makeDependencies()
        defer { Task { [pool = dependencies.pool] in await pool.close() } }
        let importer = Self.importer(dependencies, writers: 4, batchSize: 7, chunkSize: 60)
        let first = try await importer.importLines(lines)
        #expect(first.imported > 100)
        let events = try await Self.eventCount(dependencies.pool)
        let again = try await importer.importLines(lines)
        #expect(again.imported == 0)
        #expect(again.duplicates == first.imported + first.duplicates)
        #expect(again.rejected == first.rejected)
        #expect(try await Self.eventCount(dependencies.pool) == events)
    }

    /// Each subscriber's events are in the order of its lines, and their
    /// positions rise with the stream version, however the writers interleave.
    @Test func aSubscribersFactsKeepTheirOrder() async throws {
        var text = ""
        for month in 0..<12 {
            for subscriber in 0..<40 {
                let day = String(format: "2025-%02d-%02dT00:00:00Z", month + 1, 1 + subscriber % 28)
                text += #"{"subscriberId": "o\#(subscriber)", "type": "purchase", "transactionId": "o\#(subscriber)-\#(month)", "#
                    + #""productId": "com.example.coins.100", "purchaseDate": "\#(day)"}"# + "\n"
            }
        }
        let dependencies = try await makeDependencies()
        defer { Task { [pool = dependencies.pool] in await pool.close() } }
        let summary = try await Self.importer(dependencies, writers: 3, batchSize: 16, chunkSize: 100).importLines(Self.lines(text))
        #expect(summary.imported == 480)
        let rows = try await dependencies.pool.query("""
            SELECT s.stream_id, e.type, e.schema_version, e.data::text FROM events e JOIN streams s ON s.number = e.stream_number
            ORDER BY s.stream_id, e.stream_version
            """)
        var byStream = [String: [String]]()
        for row in rows {
            let event = try LedgerEvent.decodeFast(type: try row.decode(String.self, at: 1), schemaVersion: try row.decode(Int.self, at: 2),
                                                   data: Data(try row.decode(String.self, at: 3).utf8))
            guard case .purchased(let fact) = event else {
                Issue.record("a purchase was stored as \(event.type)")
                continue
            }
            byStream[try row.decode(String.self, at: 0), default: []].append(fact.transactionID)
        }
        for subscriber in 0..<40 {
            #expect(byStream[SubscriberStreams.streamID(for: "o\(subscriber)")] == (0..<12).map { "o\(subscriber)-\($0)" })
        }
        let misordered = try await dependencies.pool.query("""
            SELECT count(*) FROM (SELECT position < lag(position) OVER (PARTITION BY stream_number ORDER BY stream_version) AS back
                                  FROM events) e WHERE back
            """)
        #expect(try misordered.first!.decode(Int.self, at: 0) == 0)
    }

    /// `subledger import` analyzes the tables it filled, so the planner
    /// knows their size at once (`PlannerStatistics`); the importer alone
    /// (the bench's import measurement) does not.
    @Test func theCommandsImportAnalyzesTheTablesItFilled() async throws {
        var generator = ImportFileGenerator(seed: 7)
        let lines = Self.lines(generator.make(lines: 2_000))
        func analyzed(_ dependencies: AppDependencies) async throws -> [String: Double] {
            let rows = try await dependencies.pool.query("""
                SELECT s.relname, c.reltuples::float8 FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
                WHERE s.relname IN ('events', 'streams', 'subscriber_keys') AND s.last_analyze IS NOT NULL
                """)
            return try Dictionary(uniqueKeysWithValues: rows.map { (try $0.decode(String.self, at: 0), try $0.decode(Double.self, at: 1)) })
        }

        let plain = try await makeDependencies()
        defer { Task { [pool = plain.pool] in await pool.close() } }
        _ = try await Self.importer(plain, writers: 2, batchSize: 100, chunkSize: 500).importLines(lines)
        #expect(try await analyzed(plain).isEmpty, "the importer alone leaves the statistics to autovacuum")

        let command = try await makeDependencies()
        defer { Task { [pool = command.pool] in await pool.close() } }
        var importer = Self.importer(command, writers: 2, batchSize: 100, chunkSize: 500)
        importer.analyzesWhenDone = true
        let summary = try await importer.importLines(lines)
        let statistics = try await analyzed(command)
        #expect(summary.imported > 0)
        #expect(statistics.keys.sorted() == ["events", "streams", "subscriber_keys"])
        for table in ["events", "streams", "subscriber_keys"] {
            let rows = try await command.pool.query("SELECT count(*) FROM \(unsafeRaw: table)").first!.decode(Int.self, at: 0)
            #expect(rows > 0 && statistics[table] == Double(rows), "the planner counts every row of \(table): \(statistics)")
        }
    }

    // MARK: Helpers

    static func importer(_ dependencies: AppDependencies, writers: Int, batchSize: Int, chunkSize: Int) -> Importer {
        var importer = Importer(pool: dependencies.pool, store: dependencies.store, catalog: dependencies.catalog.catalog,
                                restorePolicy: .transfer, logger: dependencies.logger)
        importer.writers = writers
        importer.batchSize = batchSize
        importer.chunkSize = chunkSize
        // A chunk read and parsed in several slices.
        importer.parseSliceSize = 25
        return importer
    }

    static func lines(_ text: String) -> [ImportLine] {
        text.split(separator: "\n", omittingEmptySubsequences: false).enumerated().map {
            ImportLine(number: $0.offset + 1, text: Data($0.element.utf8))
        }
    }

    /// Each line as `POST /v1/subscribers/{id}/events` would record it, one after the other.
    static func recordThroughAPI(_ lines: [ImportLine], _ dependencies: AppDependencies) async throws -> Outcomes {
        let writer = LedgerWriter(dependencies)
        var outcomes = Outcomes()
        for line in lines where line.text.contains(where: { $0 > 0x20 }) {
            do {
                let (subscriberID, request) = try FactRequest.parseImportLine(line.text)
                let result = try await writer.record(request, subscriberID: subscriberID, source: FactSource.import)
                outcomes[line.number] = result.isDuplicate ? "duplicate" : "recorded"
            } catch let error as LedgerError {
                outcomes[line.number] = error.code.rawValue
            }
        }
        return outcomes
    }

    struct Ledger: Equatable {
        var states: [String: SubscriberState]
        var histories: [String: [String]]
        var owners: [String]
        var transactions: [String]
    }

    /// Everything the ledger answers, minus positions and times of recording.
    static func ledger(of dependencies: AppDependencies) async throws -> Ledger {
        let reader = SubscriberReader(dependencies)
        let subscribers = try await dependencies.pool.query("SELECT subscriber_id FROM subscriber_keys ORDER BY 1")
            .map { try $0.decode(String.self, at: 0) }
        var ledger = Ledger(states: [:], histories: [:], owners: [], transactions: [])
        for subscriber in subscribers {
            ledger.states[subscriber] = try await reader.state(of: subscriber, at: date("2025-06-01T00:00:00Z"))
            ledger.histories[subscriber] = try await reader.timeline(of: subscriber).map { entry in
                var data = entry.data
                // A transfer records the receiver's last position and the time it was decided.
                if case .object(var fields) = data {
                    fields["afterPosition"] = nil
                    fields["date"] = nil
                    data = .object(fields)
                }
                let encoder = JSONEncoder()
                encoder.outputFormatting = .sortedKeys
                return "\(entry.type) \(entry.source ?? "-") " + String(decoding: try encoder.encode(data), as: UTF8.self)
            }
        }
        ledger.owners = try await dependencies.pool.query(
            "SELECT original_transaction_id || ' ' || subscriber_id FROM transaction_owners ORDER BY 1").map { try $0.decode(String.self, at: 0) }
        ledger.transactions = try await dependencies.pool.query("""
            SELECT DISTINCT key || ' ' || coalesce(subledger_original_key(type, data), key) || ' ' || subledger_stream_subscriber(stream_number)
            FROM (SELECT subledger_transaction_key(type, data) AS key, type, data, stream_number FROM events) e
            WHERE key IS NOT NULL ORDER BY 1
            """).map { try $0.decode(String.self, at: 0) }
        // Every event carries the keys its data holds (sql/0044).
        let unhashed = try await dependencies.pool.query("""
            SELECT count(*) FROM events
            WHERE lookup_key <> coalesce(subledger_transaction_key(type, data), '')
               OR lookup_group <> coalesce(subledger_original_key(type, data), '')
            """).first!.decode(Int64.self, at: 0)
        #expect(unhashed == 0)
        return ledger
    }

    static func eventCount(_ pool: ConnectionPool) async throws -> Int {
        try await pool.query("SELECT count(*) FROM events").first!.decode(Int.self, at: 0)
    }
}

/// NDJSON import files of purchases, renewals, refunds and restores among a
/// few dozen subscribers, with repeated and bad lines, from a seed.
struct ImportFileGenerator {
    var random: SplitMix
    var bought: [(subscriber: String, transaction: String, product: String, original: String)] = []
    var lines: [String] = []
    var hour = 0
    /// Whether renewals and refunds may name another subscriber's
    /// transactions, and restores (which may record a transaction a line
    /// before it was refused for) occur at all.
    var crossesSubscribers = true

    init(seed: UInt64) { random = SplitMix(seed: seed) }

    static let products = ["com.example.pass.30d", "com.example.pro.monthly", "com.example.coins.100", "com.example.level2"]

    mutating func make(lines count: Int) -> String {
        for index in 0..<count { lines.append(line(index)) }
        return lines.joined(separator: "\n")
    }

    mutating func line(_ index: Int) -> String {
        hour += 1
        let at = Date(timeIntervalSince1970: 1_735_689_600 + Double(hour) * 3600)
        let when = RFC3339.format(at)
        let expires = RFC3339.format(at.addingTimeInterval(30 * 86_400))
        let subscriber = "u\(random.next(below: 30))"
        let roll = random.next(below: 100)
        switch roll {
        case 0..<35:
            let product = Self.products[Int(random.next(below: 4))]
            let transaction = "t\(index)"
            bought.append((subscriber, transaction, product, transaction))
            let expiry = product.hasSuffix("monthly") ? #", "expiresDate": "\#(expires)""# : ""
            return #"{"subscriberId": "\#(subscriber)", "type": "purchase", "transactionId": "\#(transaction)", "productId": "\#(product)", "purchaseDate": "\#(when)"\#(expiry)}"#
        case 35..<50 where crossesSubscribers ? !bought.isEmpty : bought.contains { $0.product.hasSuffix("monthly") }:
            var earlier = pick()
            // Without crossings, only what renews is renewed (a refused renewal could be a restore's duplicate later).
            while !crossesSubscribers && !earlier.product.hasSuffix("monthly") { earlier = pick() }
            // Mostly its owner; sometimes someone else renews it.
            let renewing = crossesSubscribers && random.next(below: 4) == 0 ? subscriber : earlier.subscriber
            let transaction = "t\(index)"
            bought.append((renewing, transaction, earlier.product, earlier.original))
            return #"{"subscriberId": "\#(renewing)", "type": "renewal", "transactionId": "\#(transaction)", "originalTransactionId": "\#(earlier.original)", "productId": "\#(earlier.product)", "purchaseDate": "\#(when)", "expiresDate": "\#(expires)"}"#
        case 50..<62 where crossesSubscribers && !bought.isEmpty:
            let earlier = pick()
            let restoring = !crossesSubscribers || random.next(below: 3) == 0 ? earlier.subscriber : subscriber
            return #"{"subscriberId": "\#(restoring)", "type": "restore", "transactionId": "\#(earlier.transaction)", "originalTransactionId": "\#(earlier.original)", "productId": "\#(earlier.product)", "purchaseDate": "\#(when)", "expiresDate": "\#(expires)"}"#
        case 62..<70 where !bought.isEmpty:
            let earlier = pick()
            let refunding = crossesSubscribers && random.next(below: 4) == 0 ? subscriber : earlier.subscriber
            return #"{"subscriberId": "\#(refunding)", "type": "refund", "transactionId": "\#(earlier.transaction)", "revocationDate": "\#(when)"}"#
        case 70..<82 where !lines.isEmpty:
            return lines[Int(random.next(below: UInt64(lines.count)))]
        case 82..<85:
            return #"{"subscriberId": "\#(subscriber)", "type": "purchase", "transactionId": "x\#(index)", "productId": "com.example.nothing", "purchaseDate": "\#(when)"}"#
        case 85..<87:
            return #"{"subscriberId": "\#(subscriber)", "type": "purchase", "transactionId":"#
        case 87..<89:
            return ""
        default:
            let transaction = "t\(index)"
            bought.append((subscriber, transaction, "com.example.level2", transaction))
            return #"{"subscriberId": "\#(subscriber)", "type": "purchase", "transactionId": "\#(transaction)", "productId": "com.example.level2", "purchaseDate": "\#(when)"}"#
        }
    }

    mutating func pick() -> (subscriber: String, transaction: String, product: String, original: String) {
        // Recent purchases more often, so chunks hold related lines.
        let recent = min(bought.count, 40)
        return random.next(below: 2) == 0 ? bought[bought.count - 1 - Int(random.next(below: UInt64(recent)))]
            : bought[Int(random.next(below: UInt64(bought.count)))]
    }
}

/// A small seeded generator (SplitMix64), the same sequence on every platform.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func next(below bound: UInt64) -> UInt64 { next() % bound }
}
