import TestSupport
import Foundation
import Testing
import JSON
@testable import Ledger

/// The read model is the fold, tabulated: at every instant its intervals say
/// what `state(at:environment:)` says is active, and its current rows give
/// the subscriptions the state lists once every fact has taken effect.
struct ReadModelTests {
    static let sequences = 300

    @Test func intervalsAgreeWithTheFoldAtEveryInstant() {
        for seed in 0..<UInt64(Self.sequences) {
            var scenario = Scenario(seed: 50_000 + seed)
            for _ in 0..<30 {
                scenario.step()
                Self.addRareFacts(&scenario)
            }
            for (subscriber, events) in scenario.world.streams {
                let ledger = SubscriberLedger(subscriberID: subscriber, events: events)
                let model = ledger.readModel(catalog: catalog)
                Self.expectDisjoint(model, seed: seed)
                // Around every boundary of the model and every fact, and at random.
                var instants = scenario.instants(count: 30)
                for interval in model.entitlements {
                    instants += [interval.start, interval.start - 0.001] + (interval.end.map { [$0, $0 - 0.001] } ?? [])
                }
                for interval in model.products { instants += [interval.start] + (interval.end.map { [$0 - 0.001] } ?? []) }
                for environment in Environment.allCases {
                    for at in instants {
                        let state = ledger.state(at: at, catalog: catalog, environment: environment)
                        #expect(Self.activeEntitlements(model, environment, at) == Set(state.activeEntitlementIDs),
                                "seed \(seed) \(subscriber) \(environment) at \(RFC3339.format(at))")
                        #expect(Self.activeProducts(model, environment, at) == Self.activeProducts(state),
                                "seed \(seed) \(subscriber) \(environment) at \(RFC3339.format(at))")
                    }
                }
            }
        }
    }

    @Test func currentRowsListTheStateSubscriptionsOnceEveryFactTookEffect() {
        for seed in 0..<UInt64(Self.sequences) {
            var scenario = Scenario(seed: 60_000 + seed)
            for _ in 0..<30 {
                scenario.step()
                Self.addRareFacts(&scenario)
            }
            for (subscriber, events) in scenario.world.streams {
                let ledger = SubscriberLedger(subscriberID: subscriber, events: events)
                let model = ledger.readModel(catalog: catalog)
                let latestFact = events.compactMap(\.event.effectiveDate).max() ?? scenario.now
                for environment in Environment.allCases {
                    for at in [latestFact, latestFact + 86_400, latestFact + 40 * 86_400, latestFact + 400 * 86_400] {
                        let state = ledger.state(at: at, catalog: catalog, environment: environment)
                        #expect(model.stateSubscriptions(at: at, environment: environment) == state.subscriptions,
                                "seed \(seed) \(subscriber) \(environment) at \(RFC3339.format(at))")
                        let periods = model.periods.filter { $0.environment == environment }
                            .map { SubscriberState.NonRenewingPeriod(group: $0.group, productID: $0.productID,
                                                                      transactionID: $0.transactionID, start: $0.start, end: $0.end) }
                        #expect(periods == state.nonRenewingPeriods, "seed \(seed) \(subscriber) \(environment)")
                    }
                }
            }
        }
    }

    /// A subscriber with thousands of renewals is swept in linear time, and
    /// continuous coverage is one interval.
    @Test func aLongChainOfRenewalsIsOneInterval() {
        var world = World()
        let start = date("2020-01-01T00:00:00Z")
        try! world.send(purchase("r0", IDs.monthly, at: start, expires: start + 86_400), to: "long", now: start)
        for index in 1..<3000 {
            let at = start + Double(index) * 86_400
            try! world.send(renewal("r\(index)", original: "r0", IDs.monthly, at: at, expires: at + 86_400), to: "long", now: at)
        }
        let ledger = SubscriberLedger(subscriberID: "long", events: world.history("long"))
        let clock = ContinuousClock()
        var model = SubscriberReadModel(subscriberID: "long")
        let elapsed = clock.measure { model = ledger.readModel(catalog: catalog) }
        #expect(elapsed < .seconds(5))
        #expect(model.entitlements.count == 1)
        #expect(model.entitlements.first?.start == start)
        #expect(model.entitlements.first?.end == start + 3000 * 86_400)
        #expect(model.entitlements.first?.source == "r2999")
        #expect(model.subscriptions.first?.startsAt == start)
    }

    // MARK: Helpers

    /// Facts the scenario does not send: sandbox purchases, refund reversals
    /// and renewal extensions.
    static func addRareFacts(_ scenario: inout Scenario) {
        let subscriber = scenario.pick(scenario.subscribers)
        switch scenario.int(1...100) {
        case 1...8:
            let id = scenario.newID()
            let at = scenario.now - scenario.seconds(days: 0...2)
            let product = scenario.pick([IDs.pass, IDs.monthly, IDs.level2])
            let request = FactRequest.purchase(FactRequest.Purchase(
                transactionID: id, originalTransactionID: id, productID: product, purchaseDate: at,
                expiresDate: product == IDs.monthly ? at + scenario.seconds(days: 1...30) : nil, environment: .sandbox))
            _ = try? scenario.world.send(request, to: subscriber, now: scenario.now)
        case 9...12:
            guard let known = scenario.known.randomElement(using: &scenario.random) else { return }
            let owner = scenario.world.streams.first { $0.value.contains { $0.event.transactionID == known.transactionID } }?.key
            scenario.world.append([.refundReversed(RefundReversal(
                transactionID: known.transactionID, originalTransactionID: known.originalTransactionID, productID: known.productID,
                date: scenario.now - scenario.seconds(days: 0...10)))], to: owner ?? subscriber, now: scenario.now)
        case 13...16:
            guard let known = scenario.known.filter({ $0.expiresDate != nil }).randomElement(using: &scenario.random) else { return }
            let owner = scenario.world.streams.first { $0.value.contains { $0.event.transactionID == known.transactionID } }?.key
            scenario.world.append([.renewalExtended(RenewalExtension(
                transactionID: known.transactionID, originalTransactionID: known.originalTransactionID, productID: known.productID,
                expiresDate: known.expiresDate! + scenario.seconds(days: -2...20), effectiveDate: scenario.now))],
                to: owner ?? subscriber, now: scenario.now)
        default:
            break
        }
    }

    static func contains(_ start: Date, _ end: Date?, _ at: Date) -> Bool {
        start <= at && at < (end ?? .distantFuture)
    }

    static func activeEntitlements(_ model: SubscriberReadModel, _ environment: Environment, _ at: Date) -> Set<String> {
        Set(model.entitlements.filter { $0.environment == environment && contains($0.start, $0.end, at) }.map(\.entitlement))
    }

    static func activeProducts(_ model: SubscriberReadModel, _ environment: Environment, _ at: Date) -> Set<String> {
        Set(model.products.filter { $0.environment == environment && contains($0.start, $0.end, at) }.map(\.productID))
    }

    static func activeProducts(_ state: SubscriberState) -> Set<String> {
        Set(state.subscriptions.filter { $0.status == .active || $0.status == .grace }.map(\.productID)
            + state.purchases.filter { $0.type != .consumable && $0.revokedAt == nil }.map(\.productID))
    }

    static func expectDisjoint(_ model: SubscriberReadModel, seed: UInt64) {
        for (key, intervals) in Dictionary(grouping: model.entitlements, by: { "\($0.environment)/\($0.entitlement)" }) {
            for (left, right) in zip(intervals, intervals.dropFirst()) {
                #expect(left.end.map { $0 < right.start } ?? false, "seed \(seed): \(key) intervals overlap or touch")
            }
        }
        for (key, intervals) in Dictionary(grouping: model.products, by: { "\($0.environment)/\($0.productID)" }) {
            for (left, right) in zip(intervals, intervals.dropFirst()) {
                #expect(left.end.map { $0 < right.start } ?? false, "seed \(seed): \(key) intervals overlap or touch")
            }
        }
    }
}
