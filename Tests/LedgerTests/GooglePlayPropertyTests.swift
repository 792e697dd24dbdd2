import Foundation
import JSON
import TestSupport
import Testing
@testable import Ledger

/// Random sequences of Play states, fetched with missed, repeated and
/// reordered pushes, converge on what the fetched states say, at every
/// instant: the order and repeats of recording change nothing, from the last
/// fetch on the state is what that fetch says, and the read model's
/// intervals, a snapshot and the fold agree.
/// https://developer.android.com/google/play/billing/lifecycle/subscriptions
struct GooglePlayPropertyTests {
    static let histories = 300

    /// A subscription's life as Google would report it at a series of instants.
    static func fetchedStates(_ random: inout SplitMix64) -> [GooglePlayPurchase] {
        func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }
        let start = date("2025-01-31T23:00:00Z") + TimeInterval(int(0...86_400 * 60))
        var now = start
        var expiry = start + 30 * 86_400
        var order = 0
        var states: [GooglePlayPurchase] = []
        func observe(_ state: GooglePlayPurchase.State, autoRenew: Bool = true) {
            states.append(GooglePlayPurchase(
                kind: .subscription, purchaseToken: "tok", orderID: "GPA.1234-5678-9012-34567" + (order == 0 ? "" : "..\(order)"),
                productID: "pro_sub", basePlanID: "monthly", state: state, startTime: start, expiryTime: expiry,
                autoRenew: autoRenew, acknowledged: true, observedAt: now))
        }
        observe(.active)
        for _ in 0..<int(1...12) {
            switch int(0...7) {
            case 0, 1:  // a renewal at the end of the period
                now = max(now, expiry) + TimeInterval(int(0...600))
                order += 1
                expiry = expiry + 30 * 86_400
                observe(.active)
            case 2:  // billing fails: grace, then maybe hold
                now = max(now, expiry)
                expiry = expiry + 3 * 86_400
                observe(.inGracePeriod)
                if int(0...1) == 0 {
                    now = max(now, expiry)
                    observe(.onHold)
                    now = now + TimeInterval(int(3_600...86_400 * 20))
                    order += 1
                    expiry = now + 30 * 86_400
                    observe(.active)
                }
            case 3:  // paused at the end of the period, resumed later
                now = max(now, expiry)
                observe(.paused)
                now = now + TimeInterval(int(86_400...86_400 * 60))
                order += 1
                expiry = now + 30 * 86_400
                observe(.active)
            case 4:  // canceled, and maybe resubscribed before the end
                let canceled = now + TimeInterval(int(60...86_400 * 10))
                guard canceled < expiry else { continue }
                now = canceled
                observe(.canceled, autoRenew: false)
                if int(0...1) == 0 {
                    now = now + 60
                    observe(.active)
                }
            case 5:  // a state that says nothing new (an acknowledgement, say)
                now = now + TimeInterval(int(60...3_600))
                observe(states.last!.state, autoRenew: states.last!.autoRenew ?? true)
            default:  // time passes within the period
                let later = now + TimeInterval(int(60...86_400 * 5))
                guard later < expiry, states.last!.state.grants else { continue }
                now = later
                observe(states.last!.state, autoRenew: states.last!.autoRenew ?? true)
            }
        }
        // How the life ends so far: expired, still on hold or paused (the
        // listing must say so, not "expired"), or going on.
        switch int(0...5) {
        case 0, 1:
            now = max(now, expiry) + TimeInterval(int(0...86_400))
            observe(.expired, autoRenew: false)
        case 2:
            now = max(now, expiry)
            observe(.onHold)
        case 3:
            now = max(now, expiry)
            observe(.paused)
        default:
            break
        }
        return states
    }

    /// What the last fetched state says about an instant at or after it.
    static func lastSays(_ last: GooglePlayPurchase, at: Date) -> (active: Bool, status: SubscriptionStatus) {
        if let held = last.state.heldStatus { return (false, held) }
        let end = last.expiryTime!
        guard at < end else { return (false, .expired) }
        return (true, last.state == .inGracePeriod ? .grace : .active)
    }

    @Test func pushesConvergeOnTheFetchedStatesAtEveryInstant() throws {
        let catalog = GooglePlayLedgerTests.playCatalog
        let decider = Decider(catalog: catalog)
        for seed in 0..<UInt64(Self.histories) {
            var random = SplitMix64(seed: seed)
            func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }
            let truth = Self.fetchedStates(&random)
            // Missed pushes: some fetches never happen (the last always does).
            var fetched = truth.enumerated().filter { $0.offset == truth.count - 1 || int(0...3) > 0 }.map(\.element)
            let distinct = fetched
            // Repeated and reordered: some fetches recorded twice, all shuffled.
            fetched += fetched.filter { _ in int(0...4) == 0 }
            fetched.shuffle(using: &random)

            func ledger(_ states: [GooglePlayPurchase]) throws -> (SubscriberLedger, [RecordedLedgerEvent]) {
                var ledger = SubscriberLedger(subscriberID: "ann")
                var events: [RecordedLedgerEvent] = []
                var owners: [String: String] = [:]
                for state in states {
                    let decision = try decider.decide(.googlePlayPurchase(state), ledger: ledger, owner: { owners[$0] },
                                                      now: state.observedAt + 1)
                    for claim in decision.claims { owners[claim] = "ann" }
                    for event in decision.events {
                        let recorded = RecordedLedgerEvent(position: ledger.lastPosition + 1, recordedAt: state.observedAt, event: event)
                        ledger.apply(recorded)
                        events.append(recorded)
                    }
                }
                return (ledger, events)
            }
            let (shuffled, _) = try ledger(fetched)
            let (inOrder, _) = try ledger(distinct)

            var instants = truth.flatMap { [$0.observedAt, $0.observedAt - 1, $0.expiryTime!, $0.expiryTime! - 1, $0.startTime] }
            instants += (0..<20).map { _ in truth[0].startTime + TimeInterval(int(0...86_400 * 400)) }
            let last = distinct.max { $0.observedAt < $1.observedAt }!
            let model = shuffled.readModel(catalog: catalog)
            let restored = try SubscriberLedger(snapshot: shuffled.snapshotData())
            for at in instants {
                let state = shuffled.state(at: at, catalog: catalog)
                #expect(state == inOrder.state(at: at, catalog: catalog), "seed \(seed) at \(RFC3339.format(at)): recording order changed the state")
                #expect(state == restored.state(at: at, catalog: catalog), "seed \(seed): the snapshot disagrees")
                let active = state.activeEntitlementIDs.contains("pro")
                if at >= last.observedAt {
                    let says = Self.lastSays(last, at: at)
                    #expect(active == says.active && state.subscriptions.first?.status == says.status,
                            "seed \(seed) at \(RFC3339.format(at)): the last fetch (\(last.summary)) says \(says)")
                    // The listing's row (store, held and grace statuses) says
                    // what the state says at every instant no fact is dated after.
                    #expect(model.stateSubscriptions(at: at, environment: .production) == state.subscriptions,
                            "seed \(seed) at \(RFC3339.format(at)): the read model's row disagrees with the state")
                    #expect(model.subscriptions.allSatisfy { $0.store == .googlePlay })
                }
                let inInterval = model.entitlements.contains { $0.entitlement == "pro" && $0.start <= at && at < ($0.end ?? .distantFuture) }
                #expect(inInterval == active, "seed \(seed) at \(RFC3339.format(at)): the read model's intervals say \(inInterval)")
            }
        }
    }
}
