import TestSupport
import Foundation
import Testing
import JSON
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
                // The by-original index is left out of equality: check it apart.
                #expect(Self.index(of: resumed) == Self.index(of: whole), "seed \(seed) split \(split)")
                #expect(Self.index(of: whole) == Self.index(of: SubscriberLedger.OriginalIndex(whole.transactions)), "seed \(seed)")
            }
        }
    }

    /// Each original's transactions, as the index lists them.
    static func index(of ledger: SubscriberLedger) -> [String: [String]] {
        index(of: ledger.byOriginal)
    }

    static func index(of index: SubscriberLedger.OriginalIndex) -> [String: [String]] {
        index.records.mapValues { $0.map { "\($0.position) \($0.fact.transactionID)" } }
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

/// A state stays what it is until `nextChange(after:)`.
struct ValidityTests {
    @Test func theStateHoldsUntilTheNextChange() {
        for seed in 0..<UInt64(300) {
            var scenario = Scenario(seed: 80_000 + seed)
            for _ in 0..<30 {
                scenario.step()
                ReadModelTests.addRareFacts(&scenario)
            }
            for (subscriber, events) in scenario.world.streams {
                let ledger = SubscriberLedger(subscriberID: subscriber, events: events)
                for start in scenario.instants(count: 12) {
                    var before = ledger.state(at: start, catalog: catalog)
                    guard let next = ledger.nextChange(after: start, catalog: catalog) else {
                        for later in [start + 86_400, start + 3_650 * 86_400] {
                            before.at = later
                            #expect(ledger.state(at: later, catalog: catalog) == before, "seed \(seed) \(subscriber): nothing was due to change")
                        }
                        continue
                    }
                    #expect(next > start)
                    for later in [start + (next.timeIntervalSince(start)) / 2, next - 0.001] where later > start {
                        before.at = later
                        #expect(ledger.state(at: later, catalog: catalog) == before,
                                "seed \(seed) \(subscriber) from \(RFC3339.format(start)) to \(RFC3339.format(later)), next \(RFC3339.format(next))")
                    }
                }
            }
        }
    }
}
