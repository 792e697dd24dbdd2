import Foundation
import SubledgerApp
import SubledgerAppTesting
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

/// A line longer than the limit is reported by number without being held.
struct OverlongImportLineTests {
    /// The process's peak resident memory, in bytes.
    static func peakMemory() -> Int {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") } ?? ""
        return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
    }

    @Test func aLineOverTheLimitIsSkippedWithItsNumberAndMemoryStaysBounded() throws {
        let pipe = Pipe()
        let hugeLength = 64 << 20
        // Written as it is read, the way `subledger import -` reads standard input.
        let writer = Thread {
            let handle = pipe.fileHandleForWriting
            handle.write(Data(#"{"subscriberId": "a"}"#.utf8 + [0x0A]))
            let chunk = Data(repeating: UInt8(ascii: "x"), count: 1 << 20)
            for _ in 0..<(hugeLength >> 20) { handle.write(chunk) }
            handle.write(Data([0x0A] + #"{"subscriberId": "c"}"#.utf8 + [0x0A]))
            try? handle.close()
        }
        let before = Self.peakMemory()
        writer.start()
        let lines = Array(NDJSONReader(handle: pipe.fileHandleForReading, maximumLineLength: 1 << 20))
        let grown = Self.peakMemory() - before
        #expect(lines.map(\.number) == [1, 2, 3])
        #expect(lines[1].skippedLength == hugeLength && lines[1].text.isEmpty)
        #expect(lines[0].skippedLength == nil && lines[2].skippedLength == nil)
        #expect(String(decoding: lines[2].text, as: UTF8.self) == #"{"subscriberId": "c"}"#)
        #expect(grown < 32 << 20, "peak memory grew by \(grown >> 20) MiB reading a \(hugeLength >> 20) MiB line")
    }

    @Test func aLineExactlyAtTheLimitIsKept() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("ndjson-\(UUID().uuidString)")
        try Data(repeating: UInt8(ascii: "y"), count: 1000).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        let kept = Array(NDJSONReader(handle: try FileHandle(forReadingFrom: url), maximumLineLength: 1000))
        #expect(kept.count == 1 && kept[0].text.count == 1000 && kept[0].skippedLength == nil)
        let skipped = Array(NDJSONReader(handle: try FileHandle(forReadingFrom: url), maximumLineLength: 999))
        #expect(skipped.count == 1 && skipped[0].text.isEmpty && skipped[0].skippedLength == 1000)
    }
}
