import Foundation
@testable import HTTPAPI
import Ledger
@testable import SubledgerApp
import SubledgerAppTesting
import Testing

/// The history and transaction responses are written by hand
/// (`JSONBytes`); they must be the bytes the ledger's encoder wrote for
/// them before, for stored facts as they come back from the database.
@Suite("Hand-written responses")
struct ResponseEncodingTests {
    @Test func historyAndTransactionReportsAreTheEncodersBytes() async throws {
        let dependencies = try await makeDependencies()
        defer { Task { await dependencies.pool.close() } }
        let writer = LedgerWriter(dependencies)
        let start = Date(timeIntervalSince1970: 1_700_000_000.125)
        var commands = [WriteCommand.fact(.purchase(.init(transactionID: "m-0", productID: "com.example.pro.monthly",
                                                          purchaseDate: start, expiresDate: start + 3600)), subscriberID: "ann"),
                        .fact(.purchase(.init(transactionID: "p-\u{e9}/\"1\"", productID: "com.example.pass.30d",
                                              purchaseDate: start + 60)), subscriberID: "ann")]
        commands += (1...5).map { month in
            .fact(.renewal(.init(transactionID: "m-\(month)", originalTransactionID: "m-0", productID: "com.example.pro.monthly",
                                 purchaseDate: start + Double(month) * 3600, expiresDate: start + Double(month + 1) * 3600)),
                  subscriberID: "ann")
        }
        _ = try await writer.write(WriteBatch(commands))

        let reader = SubscriberReader(dependencies)
        let history = SubscribersController.HistoryBody(try await reader.timeline(of: "ann"))
        #expect(history.entries.count == 7)
        #expect(history.encodedJSON().elementsEqual(try LedgerJSON.makeEncoder().encode(history)),
                "\(String(decoding: history.encodedJSON(), as: UTF8.self))")
        let report = try #require(try await reader.transaction("m-0"))
        #expect(report.facts.count == 6)
        #expect(report.encodedJSON().elementsEqual(try LedgerJSON.makeEncoder().encode(report)),
                "\(String(decoding: report.encodedJSON(), as: UTF8.self))")
    }
}
