import EventStore
import Foundation
import Ledger
import Logging
import Postgres
import HTTPAPI
import SubledgerApp
import SubledgerAppTesting
import Testing

@Suite("Import")
struct ImportTests {
    static let file = """
        {"subscriberId": "ann", "type": "purchase", "transactionId": "i1", "productId": "com.example.pass.30d", "purchaseDate": "2025-01-01T00:00:00Z"}
        {"subscriberId": "ann", "type": "purchase", "transactionId": "i2", "productId": "com.example.pass.30d", "purchaseDate": "2025-01-02T00:00:00Z"}
        {"subscriberId": "ann", "type": "purchase", "transactionId":
        {"subscriberId": "ben", "type": "purchase", "transactionId": "i3", "productId": "com.example.level2", "purchaseDate": "2025-01-01T00:00:00Z", "deviceId": "b1"}

        {"subscriberId": "ben", "type": "purchase", "transactionId": "i4", "productId": "com.example.unknown", "purchaseDate": "2025-01-01T00:00:00Z"}
        {"subscriberId": "cat", "type": "restore", "transactionId": "i3", "productId": "com.example.level2", "purchaseDate": "2025-01-01T00:00:00Z"}
        {"subscriberId": "ann", "type": "refund", "transactionId": "i1", "revocationDate": "2025-01-05T00:00:00Z"}
        {"type": "purchase", "transactionId": "i5", "productId": "com.example.pass.30d", "purchaseDate": "2025-01-01T00:00:00Z"}
        {"subscriberId": "ann", "type": "purchase", "transactionId": "i1", "productId": "com.example.pass.30d", "purchaseDate": "2025-01-01T00:00:00Z"}
        """

    func makeImporter(_ dependencies: AppDependencies, batchSize: Int) -> Importer {
        var importer = Importer(pool: dependencies.pool, store: dependencies.store, catalog: dependencies.catalog.catalog,
                                restorePolicy: .transfer, logger: dependencies.logger)
        importer.batchSize = batchSize
        return importer
    }

    func lines(of text: String) throws -> [ImportLine] {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("import-\(UUID().uuidString).ndjson")
        try Data(text.utf8).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        return Array(NDJSONReader(handle: handle))
    }

    func eventCount(_ pool: ConnectionPool) async throws -> Int {
        try await pool.query("SELECT count(*) FROM events").first!.decode(Int.self, at: 0)
    }

    /// Text the database refuses (a NUL in jsonb) used to fail the whole
    /// batch in flight, and every re-import after it: now that line is
    /// rejected with its number and the rest of the batch is imported.
    @Test func aLineWithTextTheDatabaseRefusesIsRejectedAndTheBatchGoesOn() async throws {
        let dependencies = try await makeDependencies()
        defer { Task { [pool = dependencies.pool] in await pool.close() } }
        let importer = makeImporter(dependencies, batchSize: 500)
        let text = #"""
            {"subscriberId": "nia", "type": "purchase", "transactionId": "n1", "productId": "com.example.level2", "purchaseDate": "2025-01-01T00:00:00Z"}
            {"subscriberId": "nia", "type": "purchase", "transactionId": "n2", "productId": "com.example.coins.100", "purchaseDate": "2025-01-01T00:00:00Z", "deviceId": "pad\u0000"}
            {"subscriberId": "oto", "type": "purchase", "transactionId": "n3", "productId": "com.example.level2", "purchaseDate": "2025-01-01T00:00:00Z"}
            """#
        let first = try await importer.importLines(try lines(of: text))
        #expect(first.rejected.map(\.line) == [2])
        #expect(first.imported == 2)
        let again = try await importer.importLines(try lines(of: text))
        #expect(again.imported == 0 && again.duplicates == 2 && again.rejected.map(\.line) == [2])
    }

    @Test(arguments: [1, 3, 500])
    func importReportsBadLinesByNumberAndReimportingChangesNothing(batchSize: Int) async throws {
        let dependencies = try await makeDependencies()
        defer { Task { [pool = dependencies.pool] in await pool.close() } }
        let importer = makeImporter(dependencies, batchSize: batchSize)
        let input = try lines(of: Self.file)
        #expect(input.count == 10)

        let first = try await importer.importLines(input)
        #expect(first.rejected.map(\.line) == [3, 6, 9])
        #expect(first.rejected[0].reason.contains("invalid_json"))
        #expect(first.rejected[1].reason.contains("unknown_product"))
        #expect(first.rejected[2].reason.contains("subscriberId"))
        #expect(first.imported == 5)  // i1, i2, i3, the restore (a transfer), the refund
        #expect(first.duplicates == 1)  // line 10 repeats line 1
        #expect(first.description == "imported 5, duplicates 1, rejected 3")
        let stored = try await eventCount(dependencies.pool)

        let second = try await importer.importLines(input)
        #expect(second.imported == 0)
        #expect(second.duplicates == 6)
        #expect(second.rejected.map(\.line) == [3, 6, 9])
        #expect(try await eventCount(dependencies.pool) == stored)

        // The imported facts read as the API's would.
        let ledger = SubscriberReader(dependencies)
        let ann = try await ledger.state(of: "ann", at: date("2025-01-10T00:00:00Z"))
        #expect(ann.nonRenewingPeriods.map(\.transactionID) == ["i2"])
        let cat = try await ledger.state(of: "cat")
        #expect(cat.activeEntitlementIDs == ["level2"])
        let ben = try await ledger.timeline(of: "ben")
        #expect(ben.map(\.type) == ["purchased", "transferred_out"])
        #expect(ben.allSatisfy { $0.source == "import" })
        #expect(try await ledger.transaction("i3")?.subscriberID == "cat")
    }

    @Test func importAfterTheAPIRecordedSomeFactsSkipsThem() async throws {
        let dependencies = try await makeDependencies()
        defer { Task { [pool = dependencies.pool] in await pool.close() } }
        let writer = LedgerWriter(dependencies)
        let ledger = SubscriberReader(dependencies)
        let request = try FactRequest.parse(json: Data(purchaseJSON("i2", at: "2025-01-02T00:00:00Z").utf8))
        _ = try await writer.record(request, subscriberID: "ann")
        let summary = try await makeImporter(dependencies, batchSize: 100).importLines(try lines(of: Self.file))
        #expect(summary.imported == 4)
        #expect(summary.duplicates == 2)
        #expect(try await ledger.timeline(of: "ann").filter { $0.type == "purchased" }.count == 2)
    }

    @Test func readerNumbersLinesAndKeepsALastLineWithoutNewline() throws {
        let read = try lines(of: "a\n\nb\r\nc")
        #expect(read.map(\.number) == [1, 2, 3, 4])
        #expect(read.map { String(decoding: $0.text, as: UTF8.self) } == ["a", "", "b\r", "c"])
    }
}
