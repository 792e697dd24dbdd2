import Foundation

/// Reads lines from a file handle in chunks (a file or standard input),
/// numbering them from 1. Reads block: meant for the CLI's import.
///
/// Lines are cut out of a byte buffer that is refilled in place (the unread
/// tail moved to its front), newlines found by the C library: the reader
/// touches each byte of the file about twice, whatever its size.
public struct NDJSONReader: Sequence, IteratorProtocol {
    private let handle: FileHandle
    private var buffer: [UInt8] = []
    /// Where the unread bytes of `buffer` start.
    private var start = 0
    private var finished = false
    private var number = 0

    public init(handle: FileHandle) {
        self.handle = handle
    }

    public mutating func next() -> ImportLine? {
        while true {
            if let newline = newlineIndex() {
                let text = Data(buffer[start..<newline])
                start = newline + 1
                number += 1
                return ImportLine(number: number, text: text)
            }
            if finished {
                guard start < buffer.count else { return nil }
                defer { (buffer, start) = ([], 0) }
                number += 1
                return ImportLine(number: number, text: Data(buffer[start...]))
            }
            let chunk = (try? handle.read(upToCount: 1 << 16)) ?? nil
            if let chunk, !chunk.isEmpty {
                buffer.removeFirst(start)
                start = 0
                buffer.append(contentsOf: chunk)
            } else {
                finished = true
            }
        }
    }

    /// The index of the first newline of the unread bytes.
    private func newlineIndex() -> Int? {
        let unread = buffer.count - start
        guard unread > 0 else { return nil }
        return buffer.withUnsafeBytes { bytes in
            guard let found = memchr(bytes.baseAddress! + start, 0x0A, unread) else { return nil }
            return bytes.baseAddress!.distance(to: UnsafeRawPointer(found))
        }
    }
}
