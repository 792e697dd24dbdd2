import Foundation
import Testing
import JSON
@testable import Ledger

struct JSONValueTests {
    @Test func integersStayIntegersBothWays() throws {
        let text = #"{"array":[true,null,"x",1.5],"big":9223372036854775807,"position":1}"#
        let value = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        #expect(value["position"] == .integer(1))
        #expect(value["big"] == .integer(Int64.max))
        #expect(value["array"] == .array([.bool(true), .null, .string("x"), .number(1.5)]))
        #expect(value["missing"] == nil)
        #expect(value["array"]?["position"] == nil)
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        #expect(String(decoding: try encoder.encode(value), as: UTF8.self) == text)
    }

    @Test func storedEventDataReadsAsJSONValue() throws {
        let event = LedgerEvent.transferredIn(TransferFact(originalTransactionID: "t1", fromSubscriberID: "a", toSubscriberID: "b",
                                                           afterPosition: 7, date: date("2024-01-01T00:00:00Z")))
        let data = try JSONDecoder().decode(JSONValue.self, from: event.encodedData())
        #expect(data["afterPosition"] == .integer(7))
        #expect(data["originalTransactionId"] == .string("t1"))
    }
}
