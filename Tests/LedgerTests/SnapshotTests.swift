import TestSupport
import Foundation
import Testing
@testable import Ledger

/// A snapshot and the events after it make the ledger the whole stream makes.
struct SnapshotTests {
    @Test func aSnapshotAndItsTailEqualTheWholeFold() throws {
        for seed in 0..<UInt64(200) {
            var scenario = Scenario(seed: 70_000 + seed)
            for _ in 0..<30 {
                scenario.step()
                ReadModelTests.addRareFacts(&scenario)
            }
            for (subscriber, events) in scenario.world.streams {
                let whole = SubscriberLedger(subscriberID: subscriber, events: events)
                #expect(try SubscriberLedger(snapshot: whole.snapshotData()) == whole, "seed \(seed)")
                let split = scenario.int(0...events.count)
                var resumed = try SubscriberLedger(snapshot: SubscriberLedger(subscriberID: subscriber, events: Array(events[..<split])).snapshotData())
                for event in events[split...] { resumed.apply(event) }
                #expect(resumed == whole, "seed \(seed) split \(split)")
                #expect(resumed.snapshotData() == whole.snapshotData(), "equal ledgers, equal bytes")
            }
        }
    }

    @Test func damagedSnapshotsAreRefused() {
        let ledger = SubscriberLedger(subscriberID: "s")
        var data = ledger.snapshotData()
        data.append(0)
        #expect(throws: SnapshotError.self) { try SubscriberLedger(snapshot: data) }
        #expect(throws: SnapshotError.self) { try SubscriberLedger(snapshot: Data([1, 2, 3])) }
        #expect(throws: SnapshotError.self) { try SubscriberLedger(snapshot: Data(repeating: 0xFF, count: 64)) }
    }
}
