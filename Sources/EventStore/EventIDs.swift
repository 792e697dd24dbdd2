import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Random (version 4) event ids, drawn from the system's random source a
/// block at a time.
///
/// Foundation's `UUID()` on Linux opens, reads and closes `/dev/urandom`
/// for every id: three system calls per event appended, 7% of an import's
/// samples. Here one call to the kernel's generator fills 256 ids; they are
/// as random (122 bits each) and only need to be unique.
public enum EventIDs {
    private static let blockSize = 256 * 16
    private static let pool = Mutex(Pool())

    private struct Pool {
        var bytes = [UInt8](repeating: 0, count: EventIDs.blockSize)
        var next = EventIDs.blockSize
    }

    /// A new random id.
    public static func next() -> UUID {
        pool.withLock { pool in
            if pool.next == pool.bytes.count {
                fill(&pool.bytes)
                pool.next = 0
            }
            defer { pool.next += 16 }
            return uuid(pool.bytes, at: pool.next)
        }
    }

    /// Fills `bytes` from the kernel's generator (glibc's `arc4random_buf`
    /// reads it with `getrandom`).
    private static func fill(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { arc4random_buf($0.baseAddress!, $0.count) }
    }

    /// The version 4 UUID (RFC 9562, section 5.4) made of the 16 bytes at `start`.
    static func uuid(_ bytes: [UInt8], at start: Int) -> UUID {
        var value = bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: start, as: uuid_t.self) }
        value.6 = value.6 & 0x0F | 0x40
        value.8 = value.8 & 0x3F | 0x80
        return UUID(uuid: value)
    }
}
