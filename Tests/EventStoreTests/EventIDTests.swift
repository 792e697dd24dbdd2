@testable import EventStore
import Foundation
import Testing

/// Event ids drawn from the block-filled pool: version 7 UUIDs (RFC 9562:
/// 48 bits of Unix milliseconds, version nibble 7, variant bits 10), all
/// different across many blocks and concurrent callers, ordered by their
/// time, and with random bits that are not a repeating block.
struct EventIDTests {
    static func milliseconds(_ id: UUID) -> UInt64 {
        withUnsafeBytes(of: id.uuid) { raw in raw[0..<6].reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
    }

    @Test func idsAreDistinctVersion7UUIDsOfTheirTimeAcrossBlocksAndThreads() async {
        let before = UInt64(Date().timeIntervalSince1970 * 1000)
        let ids = await withTaskGroup(of: [UUID].self) { group in
            for _ in 0..<4 {
                group.addTask { (0..<5_000).map { _ in EventIDs.next() } }
            }
            return await group.reduce(into: [UUID]()) { $0 += $1 }
        }
        let after = UInt64(Date().timeIntervalSince1970 * 1000) + 1
        #expect(ids.count == 20_000)
        #expect(Set(ids).count == ids.count)
        for id in ids {
            let bytes = id.uuid
            #expect(bytes.6 >> 4 == 7, "\(id)")
            #expect(bytes.8 >> 6 == 0b10, "\(id)")
            #expect((before...after).contains(Self.milliseconds(id)), "\(id)")
        }
        // Random bits: each of the 74 is set in about half of the ids.
        var ones = [Int](repeating: 0, count: 128)
        for id in ids {
            withUnsafeBytes(of: id.uuid) { raw in
                for bit in 0..<128 where raw[bit / 8] >> (7 - bit % 8) & 1 == 1 { ones[bit] += 1 }
            }
        }
        let random = Array(52..<64) + Array(66..<128)
        #expect(random.count == 74)
        for bit in random {
            #expect((8_000...12_000).contains(ones[bit]), "bit \(bit) set in \(ones[bit]) of 20,000 ids")
        }
    }

    /// Ids of later milliseconds sort after earlier ones, as PostgreSQL
    /// compares `uuid` (byte by byte): what keeps inserts at the index's edge.
    @Test func idsOfLaterMillisecondsSortAfterEarlierOnes() {
        let instants: [UInt64] = [0, 1, 255, 256, 1_700_000_000_000, 1_700_000_000_001, 0xFFFF_FFFF_FFFF]
        let ids = instants.map { EventIDs.next(milliseconds: $0) }
        let bytes = ids.map { id in withUnsafeBytes(of: id.uuid) { Array($0) } }
        #expect(zip(bytes, bytes.dropFirst()).allSatisfy { $0.lexicographicallyPrecedes($1) })
        #expect(ids.map(Self.milliseconds) == instants)
    }
}
