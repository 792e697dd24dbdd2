import TestSupport
import Foundation
import Testing
@testable import Ledger

/// The change feed's transitions over generated histories: published after
/// each event and as time passes, they alternate per entitlement, agree with
/// the state at their instant, and leave the published set equal to the
/// state's active entitlements.
struct EntitlementTransitionTests {
    @Test func transitionsAlternateAgreeWithTheStateAndEndWhereTheStateIs() {
        var checked = 0
        for seed in 0..<UInt64(PropertyTests.sequences) {
            var scenario = Scenario(seed: 30_000 + seed)
            for _ in 0..<30 { scenario.step() }
            let end = scenario.now + 400 * 86_400
            for (subscriber, events) in scenario.world.streams where !events.isEmpty {
                var published = PublishedEntitlements(active: [.production: [], .sandbox: []])
                var ledger = SubscriberLedger(subscriberID: subscriber)
                var clock = Date.distantPast
                var all: [EntitlementTransition] = []
                for event in events {
                    let at = max(clock, event.recordedAt)
                    let (byTime, _) = published.advanceByTime(ledger, from: clock, until: at, catalog: catalog)
                    for (transition, state) in byTime {
                        let active = state.activeEntitlementIDs.contains(transition.entitlement)
                        #expect(active == (transition.kind == .gained), "seed \(seed): \(transition)")
                        #expect(state == ledger.state(at: transition.at, catalog: catalog, environment: transition.environment))
                    }
                    all += byTime.map(\.0)
                    ledger.apply(event)
                    all += published.advance(ledger, to: at, catalog: catalog).transitions
                    clock = at
                }
                all += published.advanceByTime(ledger, from: clock, until: end, catalog: catalog).transitions.map(\.0)
                for environment in Environment.allCases {
                    #expect(published.active[environment] == Set(ledger.state(at: end, catalog: catalog, environment: environment).activeEntitlementIDs),
                            "seed \(seed) \(subscriber) \(environment)")
                    let ids = Set(all.filter { $0.environment == environment }.map(\.entitlement))
                    for id in ids {
                        let mine = all.filter { $0.environment == environment && $0.entitlement == id }
                        let kinds = mine.map(\.kind)
                        let alternating = kinds.enumerated().allSatisfy { $0.element == ($0.offset % 2 == 0 ? .gained : .lost) }
                        #expect(alternating, "seed \(seed) \(subscriber) \(id): \(kinds)")
                        #expect(mine.map(\.at) == mine.map(\.at).sorted(), "seed \(seed): instants in order")
                    }
                }
                checked += all.count
            }
        }
        #expect(checked > 1000, "the histories produce transitions to check (\(checked))")
    }

    @Test func storedJSONRoundTrips() throws {
        let published = PublishedEntitlements(active: [.production: ["pro", "a\"b"], .sandbox: []])
        #expect(try PublishedEntitlements(storedJSON: Data(published.storedJSON.utf8)) == published)
        #expect(try PublishedEntitlements(storedJSON: Data("{}".utf8)).environments.isEmpty)
    }
}
