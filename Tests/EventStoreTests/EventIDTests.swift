import EventStore
import Foundation
import Testing

/// Event ids drawn from the block-filled pool: version 4 UUIDs (RFC 9562:
/// version nibble 4, variant bits 10), all different across many blocks and
/// concurrent callers, and not a repeating block.
struct EventIDTests {
    @Test func idsAreDistinctVersion4UUIDsAcrossBlocksAndThreads() async {
        let ids = await withTaskGroup(of: [UUID].self) { group in
            for _ in 0..<4 {
                group.addTask { (0..<5_000).map { _ in EventIDs.next() } }
            }
            return await group.reduce(into: [UUID]()) { $0 += $1 }
        }
        #expect(ids.count == 20_000)
        #expect(Set(ids).count == ids.count)
        for id in ids {
            let bytes = id.uuid
            #expect(bytes.6 >> 4 == 4, "\(id)")
            #expect(bytes.8 >> 6 == 0b10, "\(id)")
        }
        // Random bits: each of the other 122 is set in about half of the ids.
        var ones = [Int](repeating: 0, count: 128)
        for id in ids {
            withUnsafeBytes(of: id.uuid) { raw in
                for bit in 0..<128 where raw[bit / 8] >> (7 - bit % 8) & 1 == 1 { ones[bit] += 1 }
            }
        }
        let fixed: Set<Int> = [48, 49, 50, 51, 64, 65]
        for bit in 0..<128 where !fixed.contains(bit) {
            #expect((8_000...12_000).contains(ones[bit]), "bit \(bit) set in \(ones[bit]) of 20,000 ids")
        }
    }
}
