import Foundation
import JSON
import Testing
import TestSupport

/// The one JSON string escaper (`JSONStringLiteral`) writes what
/// `JSONEncoder` writes with `.withoutEscapingSlashes`, in all three of its
/// forms, for strings with every kind of character that needs care.
struct JSONStringLiteralTests {
    static let alphabet: [String] = [
        "a", "Z", "0", " ", "\"", "\\", "/", "\u{0}", "\u{1}", "\u{8}", "\u{9}", "\n", "\u{b}", "\u{c}", "\r", "\u{1f}", "\u{7f}",
        "é", "ß", "€", "🙂", "👩🏽‍💻", "\u{2028}", "\u{fffd}", "ps-", ":", "{", "}",
    ]

    static func encoded(_ value: String) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    @Test func everyFormWritesWhatTheEncoderWrites() throws {
        var random = SplitMix64(seed: 3)
        for round in 0..<3_000 {
            let length = Int(random.next() % 12)
            let value = (0..<length).map { _ in Self.alphabet[Int(random.next() % UInt64(Self.alphabet.count))] }.joined()
            let expected = try Self.encoded(value)
            #expect(JSONStringLiteral.quoted(value) == expected, "round \(round): \(value.debugDescription)")
            var bytes: [UInt8] = [UInt8(ascii: "[")]
            JSONStringLiteral.append(value, to: &bytes)
            #expect(bytes.dropFirst().elementsEqual(expected.utf8), "round \(round)")
            var text = "["
            JSONStringLiteral.append(value, to: &text)
            #expect(text.dropFirst() == expected[...], "round \(round)")
            // What is written reads back as the same string.
            #expect(try JSONDecoder().decode(String.self, from: Data(expected.utf8)) == value)
        }
    }

    @Test func onlyQuotesBackslashesAndControlCharactersNeedAnEscape() {
        #expect(!JSONStringLiteral.needsEscape("com.example.pro.monthly/é🙂"))
        for needing in ["\"", "\\", "\u{0}", "\n", "\u{1f}"] { #expect(JSONStringLiteral.needsEscape("a" + needing)) }
        #expect(!JSONStringLiteral.needsEscape("\u{7f}"))
    }
}
