import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Time-ordered (version 7) event ids: the Unix time in milliseconds, then
/// 74 bits from the system's random source, drawn a block at a time.
///
/// The ids of events without an idempotency key (an event with one takes
/// the key's digest, sql/0044). `event_id` is unique again since sql/0044
/// (no index held it from sql/0037 to 0044), and they are ordered by time
/// for that index: a new id lands at the right edge of the `events`
/// table's unique index on `event_id`, on pages already in memory, instead
/// of on a random leaf of it (version 4), which after each checkpoint also
/// costs a full-page image in the WAL. On a table of 3 million rows,
/// inserting 100 rows a transaction (pgbench, two clients) ran at 1,618
/// and 1,867 transactions/s with such ids against 1,302 and 1,222 with
/// random ones; `subledger import` of 200,000 facts into a database of
/// 1.0 to 2.2 million events, three alternating pairs, ran at 14,967 to
/// 15,411 events/s against 14,293 to 14,639. The random bits keep them
/// unique (74 bits in each millisecond); an event's time is no secret
/// (`recorded_at` says it).
///
/// Foundation's `UUID()` on Linux opens, reads and closes `/dev/urandom`
/// for every id: three system calls per event appended, 7% of an import's
/// samples. Here one call to the kernel's generator fills 256 ids' bits.
public enum EventIDs {
    private static let blockSize = 256 * 16
    private static let pool = Mutex(Pool())

    private struct Pool {
        var bytes = [UInt8](repeating: 0, count: EventIDs.blockSize)
        var next = EventIDs.blockSize
    }

    /// A new id, of the current time.
    public static func next() -> UUID {
        next(milliseconds: currentMilliseconds())
    }

    /// A new id of the instant `milliseconds` after the Unix epoch.
    static func next(milliseconds: UInt64) -> UUID {
        pool.withLock { pool in
            if pool.next == pool.bytes.count {
                fill(&pool.bytes)
                pool.next = 0
            }
            defer { pool.next += 16 }
            return uuid(pool.bytes, at: pool.next, milliseconds: milliseconds)
        }
    }

    private static func currentMilliseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return UInt64(now.tv_sec) * 1000 + UInt64(now.tv_nsec) / 1_000_000
    }

    /// Fills `bytes` from the kernel's generator (glibc's `arc4random_buf`
    /// reads it with `getrandom`).
    private static func fill(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { arc4random_buf($0.baseAddress!, $0.count) }
    }

    /// The version 7 UUID (RFC 9562, section 5.7) of `milliseconds`, its
    /// other bits from the 16 random bytes at `start`: 48 bits of time, big
    /// endian, the version, 12 random bits, the variant, 62 random bits.
    static func uuid(_ bytes: [UInt8], at start: Int, milliseconds: UInt64) -> UUID {
        var value = bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: start, as: uuid_t.self) }
        value.0 = UInt8(truncatingIfNeeded: milliseconds >> 40)
        value.1 = UInt8(truncatingIfNeeded: milliseconds >> 32)
        value.2 = UInt8(truncatingIfNeeded: milliseconds >> 24)
        value.3 = UInt8(truncatingIfNeeded: milliseconds >> 16)
        value.4 = UInt8(truncatingIfNeeded: milliseconds >> 8)
        value.5 = UInt8(truncatingIfNeeded: milliseconds)
        value.6 = value.6 & 0x0F | 0x70
        value.8 = value.8 & 0x3F | 0x80
        return UUID(uuid: value)
    }
}
