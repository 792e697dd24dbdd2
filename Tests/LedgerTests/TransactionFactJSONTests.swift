import Foundation
import Testing
@testable import Ledger

/// The hand-written encoding of transaction facts (`storedJSON`, what every
/// purchase and renewal is appended as) against `JSONEncoder` with the
/// ledger's settings: the same bytes, for generated facts with every
/// optional present or absent and awkward strings, and for strings holding
/// each control character and the characters encoders treat specially.
struct TransactionFactJSONTests {
    static let encoder = LedgerJSON.makeEncoder()

    @Test func generatedFactsEncodeAsTheEncoderWritesThem() throws {
        var generator = EventGenerator(seed: 23)
        for _ in 0..<3_000 {
            let fact = generator.transaction()
            let written = fact.storedJSON()
            let reference = try Self.encoder.encode(fact)
            #expect(written == reference, "\(String(decoding: written, as: UTF8.self)) != \(String(decoding: reference, as: UTF8.self))")
        }
    }

    @Test func everyControlCharacterAndSpecialCharacterEncodesAsTheEncoderWritesIt() throws {
        var strings = (0..<0x20).map { String(UnicodeScalar(UInt8($0))) + "x" }
        strings += ["\"", "\\", "/", "</script>", "\u{7F}", "\u{80}", "\u{2028}", "\u{2029}", "\u{FEFF}", "🎉", "e\u{301}", ""]
        for text in strings {
            let fact = TransactionFact(transactionID: text, originalTransactionID: "o" + text, productID: text + "p",
                                       group: text, purchaseDate: Date(timeIntervalSince1970: 0), deviceID: text, source: text)
            let written = fact.storedJSON()
            #expect(written == (try Self.encoder.encode(fact)), "\(Array(text.unicodeScalars.map(\.value)))")
            // And it reads back as the same fact.
            #expect(try LedgerEvent.decode(type: "purchased", schemaVersion: 1, data: written) == .purchased(fact))
        }
    }
}
