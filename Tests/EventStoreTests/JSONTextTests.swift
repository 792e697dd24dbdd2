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

/// Metadata read back from the `metadata` column as it was written, through
/// PostgreSQL's own `jsonb` output: the common shapes read without
/// `JSONDecoder` (`{}`, a lone source), the others through it.
struct StoredMetadataTests {
    @Test func metadataReadsBackAsWritten() async throws {
        let (store, _) = try await makeStore(poolSize: 2)
        let sources: [String?] = [nil, "", "api", "import", "appstore", "a\"b", "back\\slash", "tab\there", "line\nbreak",
                                  "\u{1F}", "é", "日本", "🎉", "/slash", "{\"source\": \"x\"}", " "]
        var written = sources.map { EventMetadata(source: $0) }
        written.append(EventMetadata(source: "api", causationID: "c-1"))
        written.append(EventMetadata(source: nil, causationID: nil, correlationID: "r-\"1\""))
        written.append(EventMetadata(source: "x", causationID: "c", correlationID: "r"))
        _ = try await store.append(to: "metadata-1", events: written.map {
            NewEvent(type: "happened", data: Data(#"{"value": 1}"#.utf8), metadata: $0)
        })
        let read = try await store.readStream("metadata-1").map(\.metadata)
        #expect(read == written)
    }
}
