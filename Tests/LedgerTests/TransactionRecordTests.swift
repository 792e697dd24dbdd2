import Foundation
import JSON
import Testing
import TestSupport
@testable import Ledger

/// The transaction facts' stored record (schema version 2,
/// `TransactionFact.storedRecord`): every generated fact reads back as the
/// fact its JSON object reads back as, through both decoders and as
/// PostgreSQL's `jsonb` prints the string; records that are not what this
/// build writes are errors, never another fact and never a crash.
struct TransactionRecordTests {
    /// Generated facts, and the same with the defaults the record leaves out
    /// (an original id equal to the transaction's, quantity 1, Production).
    static func facts() -> [TransactionFact] {
        var generator = EventGenerator(seed: 2_002)
        var facts: [TransactionFact] = []
        for index in 0..<3_000 {
            var fact = generator.transaction()
            if index % 3 == 0 { fact.originalTransactionID = fact.transactionID }
            if index % 4 == 0 { fact.quantity = 1 }
            if index % 5 == 0 { fact.environment = .production }
            facts.append(fact)
        }
        return facts
    }

    @Test func everyFactReadsBackFromItsRecordAsFromItsJSONObject() throws {
        var random = SplitMix64(seed: 5)
        for fact in Self.facts() {
            for event in [LedgerEvent.purchased(fact), .renewed(fact), .restored(fact)] {
                let stored = try event.stored()
                #expect(stored.schemaVersion == 2)
                let fromObject = try LedgerEvent.decode(type: event.type, schemaVersion: 1, data: try event.encodedData())
                #expect(fromObject == event)
                // As written, and as jsonb prints a string (its own escapes, or every character escaped).
                for data in [stored.data, JSONBText.format(stored.data, random: &random),
                             JSONBText.format(stored.data, escapingEverything: true, random: &random)] {
                    #expect(try LedgerEvent.decodeFast(type: event.type, schemaVersion: 2, data: data) == event,
                            "\(String(decoding: data, as: UTF8.self))")
                    #expect(try LedgerEvent.decode(type: event.type, schemaVersion: 2, data: data) == event)
                }
            }
        }
    }

    /// The record is the smaller form: a renewal as the bench writes it is
    /// a third of its JSON object.
    @Test func aRenewalsRecordIsAThirdOfItsObject() throws {
        let fact = TransactionFact(transactionID: "t123456-7", originalTransactionID: "t123456-0", productID: "com.example.pro.monthly",
                                   productType: .autoRenewable, group: "pro", duration: ISODuration(months: 1),
                                   purchaseDate: Date(timeIntervalSince1970: 1_767_225_600),
                                   expiresDate: Date(timeIntervalSince1970: 1_769_904_000), source: FactSource.import)
        let record = fact.storedRecord(), object = fact.storedJSON()
        #expect(String(decoding: record, as: UTF8.self)
                == #""i9:t123456-7o9:t123456-0p23:com.example.pro.monthlyk1:ag3:prod3:P1Mb13:1767225600000x13:1769904000000s6:import""#)
        #expect(record.count * 5 < object.count * 2, "\(record.count) bytes against \(object.count)")
    }

    /// Other types stay JSON objects at version 1; a transaction fact at
    /// version 1 is still read from its object (rows written before).
    @Test func otherTypesAndOlderRowsKeepTheirForm() throws {
        var generator = EventGenerator(seed: 9)
        for type in LedgerEventType.allCases {
            let event = generator.event(type)
            let stored = try event.stored()
            switch type {
            case .purchased, .renewed, .restored:
                #expect(stored.schemaVersion == 2)
                #expect(try LedgerEvent.decodeFast(type: type.rawValue, schemaVersion: 1, data: try event.encodedData()) == event)
            default:
                #expect(stored.schemaVersion == 1)
                #expect(stored.data == (try event.encodedData()))
            }
        }
    }

    /// Versions past what a type has are kept as `.unknown`: a build that
    /// reads records reads a refund at version 2 as a newer shape.
    @Test func newerVersionsStayUnknown() throws {
        let data = Data(#""i1:t""#.utf8)
        #expect(try LedgerEvent.decodeFast(type: "refunded", schemaVersion: 2, data: data)
                == .unknown(type: "refunded", schemaVersion: 2, data: data))
        #expect(try LedgerEvent.decodeFast(type: "purchased", schemaVersion: 3, data: data)
                == .unknown(type: "purchased", schemaVersion: 3, data: data))
    }

    /// What is not a record this build writes is an error from both
    /// decoders: a JSON object at version 2, missing or repeated fields,
    /// unknown codes, lengths that overrun or have a leading zero, values
    /// out of range, trailing bytes.
    @Test func whatIsNotARecordIsAnError() throws {
        let base = "i1:tp1:pb13:1767225600000s3:api"
        #expect(try LedgerEvent.decodeFast(type: "purchased", schemaVersion: 2, data: Data(("\"" + base + "\"").utf8))
                == .purchased(TransactionFact(transactionID: "t", originalTransactionID: "t", productID: "p",
                                              purchaseDate: Date(timeIntervalSince1970: 1_767_225_600))))
        let invalid = [
            #"{"transactionId":"t"}"#, "\"\"", "\"" + base, "\"" + base + "\"x", "\"" + base + "\" 1",
            "\"p1:pb13:1767225600000s3:api\"", // no transaction id
            "\"i1:tp1:ps3:api\"", // no purchase date
            "\"i1:tp1:pb13:1767225600000\"", // no source
            "\"" + base + "i1:t\"", // a field twice
            "\"" + base + "z1:x\"", // an unknown code
            "\"" + base + "Q1:x\"", // a code outside the letters
            "\"i01:tp1:pb13:1767225600000s3:api\"", // a leading zero
            "\"i9:tp1:pb13:1767225600000s3:api\"", // a length past the end
            "\"i:tp1:pb13:1767225600000s3:api\"", // no length
            "\"i1tp1:pb13:1767225600000s3:api\"", // no colon
            "\"" + base + "q2:01\"", "\"" + base + "q2:-0\"", "\"" + base + "q1:x\"", "\"" + base + "q20:99999999999999999999\"",
            "\"" + base + "a1:2\"", "\"" + base + "ka1:z\"", "\"" + base + "e7:Staging\"", "\"" + base + "r2:-1\"",
            "\"" + base + "d2:PX\"", "\"" + base + "n3:odd\"",
            "\"i1:tp1:pb15:-62135596800001s3:api\"", // before year 1
            "\"i1:tp1:pb15:253402300800000s3:api\"", // year 10000
            "\"i1:\\u00fftp1:pb13:1767225600000s3:api\"" // a length counting a two-byte character as one
        ]
        for text in invalid {
            for decoder in [LedgerEvent.decode, LedgerEvent.decodeFast] as [(String, Int, Data) throws -> LedgerEvent] {
                #expect(throws: LedgerEventDecodingError.self, "\(text)") { try decoder("purchased", 2, Data(text.utf8)) }
            }
        }
        // Invalid UTF-8 inside a value.
        var bytes = Array("\"i1:".utf8) + [0xFF] + Array("p1:pb13:1767225600000s3:api\"".utf8)
        #expect(throws: LedgerEventDecodingError.self) { try LedgerEvent.decodeFast(type: "purchased", schemaVersion: 2, data: Data(bytes)) }
        bytes = Array("\"i2:".utf8) + [0xC3, 0xA9] + Array("p1:pb13:1767225600000s3:api\"".utf8)
        #expect(try LedgerEvent.decodeFast(type: "purchased", schemaVersion: 2, data: Data(bytes))
                == .purchased(TransactionFact(transactionID: "é", originalTransactionID: "é", productID: "p",
                                              purchaseDate: Date(timeIntervalSince1970: 1_767_225_600))))
    }

    /// Records mutated byte by byte: each reads as some fact or is an error,
    /// the same from both decoders, and never crashes.
    @Test func mutatedRecordsReadTheSameFromBothDecoders() throws {
        var random = SplitMix64(seed: 77)
        for fact in Self.facts().prefix(300) {
            let record = Array(fact.storedRecord())
            for _ in 0..<20 {
                var mutated = record
                let index = Int.random(in: 0..<mutated.count, using: &random)
                switch Int.random(in: 0..<3, using: &random) {
                case 0: mutated[index] = UInt8.random(in: 0x20...0x7E, using: &random)
                case 1: mutated.remove(at: index)
                default: mutated.insert(UInt8.random(in: 0x30...0x3A, using: &random), at: index)
                }
                let data = Data(mutated)
                let fast = Result { try LedgerEvent.decodeFast(type: "renewed", schemaVersion: 2, data: data) }
                let reference = Result { try LedgerEvent.decode(type: "renewed", schemaVersion: 2, data: data) }
                switch (fast, reference) {
                case (.success(let one), .success(let other)): #expect(one == other)
                case (.failure, .failure): break
                default: Issue.record("the decoders disagree on \(String(decoding: data, as: UTF8.self))")
                }
            }
        }
    }
}
