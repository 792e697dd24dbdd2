import Foundation
import Testing
import TestSupport
import JSON
@testable import Ledger

/// `JSONBytes.json` writes any `JSONValue` byte for byte as the ledger's
/// encoder does (`LedgerJSON.makeEncoder()`: sorted keys, unescaped
/// slashes), so a response written by hand is the one clients got before.
struct JSONValueWritingTests {
    @Test func writesWhatTheEncoderWritesOnGeneratedValues() throws {
        var random = SplitMix64(seed: 6901)
        var compared = 0
        for _ in 0..<3_000 {
            let text = GeneratedJSON.document(&random)
            guard case .success(let value) = JSONValue.parse(Data(text.utf8)) else { continue }
            var writer = JSONBytes()
            writer.object { $0.json("value", value) }
            let expected = try LedgerJSON.makeEncoder().encode(["value": value])
            #expect(writer.bytes.elementsEqual(expected),
                    "\(text) → \(String(decoding: writer.bytes, as: UTF8.self)), encoder: \(String(decoding: expected, as: UTF8.self))")
            compared += 1
        }
        #expect(compared > 2_500)
    }

    /// Keys in the order of their UTF-8 bytes, as the encoder sorts them:
    /// upper case before `_` before lower case, a decomposed `é` (an `e`
    /// and a combining accent) before `f`, a precomposed one after.
    @Test func ordersKeysByTheirBytes() throws {
        let value = JSONValue.object(["f": .integer(1), "e\u{301}": .integer(2), "\u{e9}x": .integer(3), "B": .null,
                                      "_": .bool(true), "a10": .number(0.5), "a9": .string("a/b\n")])
        var writer = JSONBytes()
        writer.object { $0.json("v", value) }
        #expect(String(decoding: writer.bytes, as: UTF8.self)
            == #"{"v":{"B":null,"_":true,"a10":0.5,"a9":"a/b\n","e\#u{301}":2,"f":1,"\#u{e9}x":3}}"#)
        #expect(writer.bytes.elementsEqual(try LedgerJSON.makeEncoder().encode(["v": value])))
    }
}
