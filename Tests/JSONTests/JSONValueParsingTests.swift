import Foundation
import Testing
import TestSupport
import JSON

/// The hand-written parser (`JSONValue.parse`) against `JSONDecoder`
/// (`JSONValue.decoded`), which it replaced on the request path: on
/// generated documents, valid and damaged, both accept the same ones with
/// the same values and refuse the same ones.
struct JSONValueParsingTests {
    @Test func agreesWithJSONDecoderOnGeneratedDocuments() {
        var random = SplitMix64(seed: 8259)
        var accepted = 0, refused = 0
        for round in 0..<6_000 {
            var text = Array(GeneratedJSON.document(&random).utf8)
            // Two thirds damaged: a byte cut, changed or added somewhere.
            if round % 3 != 0, !text.isEmpty {
                let at = Int.random(in: 0..<text.count, using: &random)
                switch Int.random(in: 0..<4, using: &random) {
                case 0: text.removeSubrange(at...)
                case 1: text.remove(at: at)
                case 2: text[at] = Self.noise.randomElement(using: &random)!
                default: text.insert(Self.noise.randomElement(using: &random)!, at: at)
                }
            }
            let data = Data(text)
            let parsed = JSONValue.parse(data), reference = JSONValue.decoded(data)
            switch (parsed, reference) {
            case (.success(let value), .success(let expected)):
                #expect(Self.same(value, expected), "\(String(decoding: text, as: UTF8.self))")
                accepted += 1
            case (.failure, .failure):
                refused += 1
            case (.failure, .success(let expected)):
                // JSONDecoder lets a comma before `]` or `}` pass; RFC 8259 does
                // not, and neither does the parser. Without those commas they agree.
                let strict = Self.withoutTrailingCommas(String(decoding: text, as: UTF8.self))
                let value = try? JSONValue.parse(Data(strict.utf8)).get()
                #expect(value.map { Self.same($0, expected) } == true, "\(String(decoding: text, as: UTF8.self))")
                refused += 1
            default:
                Issue.record("parse \(parsed), JSONDecoder \(reference): \(String(decoding: text, as: UTF8.self))")
            }
        }
        // Both kinds were exercised.
        #expect(accepted > 2_000)
        #expect(refused > 1_000)
    }

    @Test func numbersKeepTheirKinds() throws {
        let cases: [(String, JSONValue?)] = [
            ("0", .integer(0)), ("-0", .integer(0)), ("1.0", .integer(1)), ("1e2", .integer(100)), ("1.5", .number(1.5)),
            ("9223372036854775807", .integer(.max)), ("-9223372036854775808", .integer(.min)),
            ("9223372036854775808", .number(9_223_372_036_854_775_808)), ("1e400", nil), ("01", nil), ("1.", nil),
            ("-", nil), ("+1", nil), (".5", nil), ("1e", nil),
        ]
        for (text, expected) in cases {
            let parsed = try? JSONValue.parse(Data(text.utf8)).get()
            #expect(parsed == expected, "\(text)")
            #expect((try? JSONValue.decoded(Data(text.utf8)).get()) == expected, "JSONDecoder, \(text)")
        }
    }

    @Test func refusesWhatIsNotJSONWithoutCrashing() {
        let deep = Data(String(repeating: "[", count: 100_000).utf8)
        #expect(throws: JSONParseFailure.self) { try JSONValue.parse(deep).get() }
        let nested = String(repeating: "[", count: JSONValue.maximumDepth) + String(repeating: "]", count: JSONValue.maximumDepth)
        #expect((try? JSONValue.parse(Data(nested.utf8)).get()) != nil)
        // Trailing commas too, which JSONDecoder lets pass.
        for text in ["", " ", "{", "{\"a\":}", "[1,]", "{\"a\":1,}", "\"\\ud800\"", "\"\\udc00\"", "\"\u{01}\"", "nul", "truex", "{} {}"] {
            #expect(throws: JSONParseFailure.self, "\(text)") { try JSONValue.parse(Data(text.utf8)).get() }
        }
        #expect(throws: JSONParseFailure.self) { try JSONValue.parse(Data([0x22, 0xC3, 0x28, 0x22])).get() }  // invalid UTF-8
        #expect((try? JSONValue.parse(Data("\u{FEFF}{\"a\":\"\\ud83d\\ude00\"}".utf8)).get()) == .object(["a": .string("😀")]))
    }

    @Test func aKeyNamedTwiceKeepsItsFirstValue() throws {
        let text = #"{"a": 1, "b": {"c": true, "c": false}, "a": [2]}"#
        let expected = JSONValue.object(["a": .integer(1), "b": .object(["c": .bool(true)])])
        #expect(try JSONValue.parse(Data(text.utf8)).get() == expected)
        #expect(try JSONValue.decoded(Data(text.utf8)).get() == expected)
        // Unlike JSONDecoder, which decodes only the value it keeps, the
        // parser refuses a document whose dropped value is not JSON either.
        #expect(throws: JSONParseFailure.self) { try JSONValue.parse(Data(#"{"a": 1, "a": "\x"}"#.utf8)).get() }
    }

    /// Equal, except that past 2^53 a whole number may be `.integer` on one
    /// side and `.number` (or another rounding) on the other: the parser
    /// reads `1234567890123456789.5` on its decimal digits (not whole: a
    /// `.number`), JSONDecoder sometimes cuts it to its integer part.
    static func same(_ left: JSONValue, _ right: JSONValue) -> Bool {
        func double(_ value: JSONValue) -> Double? {
            switch value {
            case .integer(let integer): Double(integer)
            case .number(let number): number
            default: nil
            }
        }
        switch (left, right) {
        case (.array(let left), .array(let right)):
            return left.count == right.count && zip(left, right).allSatisfy { same($0, $1) }
        case (.object(let left), .object(let right)):
            return left.keys.sorted() == right.keys.sorted() && left.allSatisfy { same($0.value, right[$0.key]!) }
        default:
            if left == right { return true }
            guard let a = double(left), let b = double(right), abs(a) > 9.007e15 else { return false }
            return abs(a - b) <= abs(a) * 1e-15
        }
    }

    static func withoutTrailingCommas(_ text: String) -> String {
        text.replacing(/,(\s*)([\]}])/) { "\($0.output.1)\($0.output.2)" }
    }

    static let noise: [UInt8] = Array("{}[]:,\"\\ 0-.eE+tfnu".utf8) + [0x00, 0x01, 0x7F, 0xC3, 0xFF]
}
