import EventStore
import Foundation
import Testing

/// The string literals the event store writes into batch documents read
/// back, through a JSON parser, as the strings they were made of: every
/// control character, quotes, backslashes, the store keys' U+001F
/// separator, and characters of every UTF-8 length.
struct JSONTextTests {
    @Test func literalsReadBackAsTheirStrings() throws {
        var random = SystemRandomNumberGenerator()
        let pieces = (0..<0x20).map { String(UnicodeScalar(UInt8($0))) }
            + ["\"", "\\", "/", "a", "subscriber-1", "\u{1F}", "é", "日本", "🎉", "\u{2028}", "\u{7F}", " "]
        var strings = pieces
        for _ in 0..<2_000 {
            strings.append((0..<Int.random(in: 0...12, using: &random)).map { _ in pieces.randomElement(using: &random)! }.joined())
        }
        for string in strings {
            let literal = JSONText.string(string)
            let read = try JSONDecoder().decode([String].self, from: Data("[\(literal)]".utf8))
            #expect(read == [string], "\(literal)")
        }
    }
}
