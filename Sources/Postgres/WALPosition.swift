/// A position in PostgreSQL's write-ahead log (`pg_lsn`), as `X/Y` in hex.
public struct WALPosition: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var value: UInt64

    public init(_ value: UInt64) { self.value = value }

    /// Parses the server's `X/Y` text (each part 1–8 hex digits); nil otherwise.
    public init?(_ text: some StringProtocol) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, (1...8).contains(parts[0].count), (1...8).contains(parts[1].count),
              let high = UInt64(parts[0], radix: 16), let low = UInt64(parts[1], radix: 16) else { return nil }
        value = high << 32 | low
    }

    public var description: String {
        String(value >> 32, radix: 16, uppercase: true) + "/" + String(value & 0xFFFF_FFFF, radix: 16, uppercase: true)
    }

    public static func < (lhs: WALPosition, rhs: WALPosition) -> Bool { lhs.value < rhs.value }

    /// A position no standby reaches (`FFFFFFFF/FFFFFFFF`): the token of a
    /// write whose position could not be read (just after a failover). A
    /// read that sends it back goes to the primary at once, which has every
    /// committed write.
    public static let primaryOnly = WALPosition(UInt64.max)
}

/// What a read must see: set (for the task) from a client's consistency
/// token, it makes a standby pool check that its server has replayed the WAL
/// up to `minimumPosition` before answering, and hand the read to the
/// primary when it has not within `ConnectionPool.standbyWait`.
public enum ReadConsistency {
    @TaskLocal public static var minimumPosition: WALPosition?
}
