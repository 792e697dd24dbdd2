import Foundation

/// Reads lines from a file handle in chunks (a file or standard input),
/// numbering them from 1. Reads block: meant for the CLI's import.
///
/// Lines are cut out of a byte buffer that is refilled in place (the unread
/// tail moved to its front), newlines found by the C library: the reader
/// touches each byte of the file about twice, whatever its size.
///
/// A line longer than `maximumLineLength` is not kept: its bytes are dropped
/// as they are read, and it comes out empty with `skippedLength` set, so its
/// number is reported and memory stays bounded by the limit and one read.
public struct NDJSONReader: Sequence, IteratorProtocol {
    private let handle: FileHandle
    private let maximumLineLength: Int
    private var buffer: [UInt8] = []
    /// Where the unread bytes of `buffer` start.
    private var start = 0
    private var finished = false
    private var number = 0
    /// Bytes of an overlong line dropped so far; nil when reading a line normally.
    private var skipped: Int?

    /// `maximumLineLength`: the longest line kept, in bytes (the request body
    /// limit, so a fact refused by the API is refused by the import too).
    public init(handle: FileHandle, maximumLineLength: Int = 1 << 20) {
        self.handle = handle
        self.maximumLineLength = maximumLineLength
    }

    public mutating func next() -> ImportLine? {
        while true {
            if let newline = newlineIndex() {
                let length = newline - start
                let text = skipped == nil && length <= maximumLineLength ? Data(buffer[start..<newline]) : Data()
                start = newline + 1
                return line(text, length: length)
            }
            if finished {
                guard start < buffer.count || skipped != nil else { return nil }
                let length = buffer.count - start
                let text = skipped == nil && length <= maximumLineLength ? Data(buffer[start...]) : Data()
                (buffer, start) = ([], 0)
                return line(text, length: length)
            }
            if buffer.count - start > maximumLineLength {
                // No newline within the limit: drop what is held and keep counting.
                skipped = (skipped ?? 0) + buffer.count - start
                (buffer, start) = ([], 0)
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

    /// The next numbered line; `length` is its bytes still held.
    private mutating func line(_ text: Data, length: Int) -> ImportLine {
        number += 1
        defer { skipped = nil }
        let total = (skipped ?? 0) + length
        return total > maximumLineLength ? ImportLine(number: number, text: Data(), skippedLength: total)
            : ImportLine(number: number, text: text)
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
