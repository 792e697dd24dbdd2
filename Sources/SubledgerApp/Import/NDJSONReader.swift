import Foundation

/// Reads lines from a file handle in chunks (a file or standard input),
/// numbering them from 1. Reads block: meant for the CLI's import.
public struct NDJSONReader: Sequence, IteratorProtocol {
    private let handle: FileHandle
    private var buffer = Data()
    private var finished = false
    private var number = 0

    public init(handle: FileHandle) {
        self.handle = handle
    }

    public mutating func next() -> ImportLine? {
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let text = buffer[buffer.startIndex..<newline]
                buffer = buffer[(newline + 1)...]
                number += 1
                return ImportLine(number: number, text: Data(text))
            }
            if finished {
                guard !buffer.isEmpty else { return nil }
                defer { buffer = Data() }
                number += 1
                return ImportLine(number: number, text: Data(buffer))
            }
            let chunk = (try? handle.read(upToCount: 1 << 16)) ?? nil
            if let chunk, !chunk.isEmpty {
                buffer = Data(buffer) + chunk
            } else {
                finished = true
            }
        }
    }
}
