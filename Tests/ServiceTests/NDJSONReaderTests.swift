import Foundation
import SubledgerApp
import Testing

/// The import's line reader against a plain split of the file, on generated
/// files whose lines cross its 64 KiB reads: short and empty lines, lines
/// longer than a read, a last line with or without its newline.
struct NDJSONReaderTests {
    @Test func linesAreReadAsASplitOfTheFileReadsThem() throws {
        var random = SystemRandomNumberGenerator()
        for round in 0..<40 {
            var lines = [[UInt8]]()
            for _ in 0..<Int.random(in: 0...300, using: &random) {
                let length = switch Int.random(in: 0..<10, using: &random) {
                case 0: 0
                case 1: Int.random(in: 60_000...140_000, using: &random)
                default: Int.random(in: 1...400, using: &random)
                }
                lines.append((0..<length).map { _ in UInt8.random(in: 0x20...0x7E, using: &random) })
            }
            var file = Data(lines.joined(separator: [0x0A]))
            if !lines.isEmpty, round % 2 == 0 { file.append(0x0A) }
            let url = FileManager.default.temporaryDirectory.appendingPathComponent("ndjson-\(UUID().uuidString)")
            try file.write(to: url)
            defer { try? FileManager.default.removeItem(at: url) }
            let handle = try FileHandle(forReadingFrom: url)
            defer { try? handle.close() }

            let read = Array(NDJSONReader(handle: handle))
            // Without a newline at the end, an empty last line is no line at all.
            var expected = lines
            if round % 2 != 0, expected.last?.isEmpty == true { expected.removeLast() }
            #expect(read.map { Array($0.text) } == expected, "round \(round)")
            #expect(read.map(\.number) == expected.indices.map { $0 + 1 })
        }
    }
}
