import TestSupport
import Foundation
import Testing
@testable import Ledger

/// Generated histories: hundreds of seeded random sequences per property.
struct PropertyTests {
    static let sequences = 400

    @Test func foldingAllAtOnceEqualsFoldingIncrementally() {
        for seed in 0..<UInt64(Self.sequences) {
            var scenario = Scenario(seed: seed)
            for _ in 0..<30 { scenario.step() }
            let instants = scenario.instants(count: 4)
            for (subscriber, events) in scenario.world.streams {
                let split = scenario.int(0...events.count)
                var incremental = SubscriberLedger(subscriberID: subscriber, events: Array(events[..<split]))
                for (index, event) in events[split...].enumerated() {
                    if index % 3 == 0 { _ = incremental.state(at: instants[0], catalog: catalog) }
                    incremental.apply(event)
                }
                // The whole history may come in any order: the fold goes by position.
                let shuffled = events.shuffled(using: &scenario.random)
                for at in instants {
                    let whole = SubscriberState.fold(shuffled, subscriberID: subscriber, catalog: catalog, at: at)
                    #expect(incremental.state(at: at, catalog: catalog) == whole, "seed \(seed) \(subscriber)")
                }
            }
        }
    }

    @Test func replayingADuplicateFactChangesNothing() {
        for seed in 0..<UInt64(Self.sequences) {
            var scenario = Scenario(seed: 10_000 + seed)
            scenario.onAccepted = { scenario, request, subscriber in
                let streams = scenario.world.streams
                let later = scenario.now + scenario.seconds(days: 0...0)
                let decision: Decision?
                switch request {
                case .fact(let fact): decision = try? scenario.world.send(fact, to: subscriber, now: later)
                case .restore(let restore): decision = try? scenario.world.restore(restore, to: subscriber, now: later)
                }
                #expect(decision?.isDuplicate == true, "seed \(seed): \(request) was not a duplicate the second time")
                #expect(scenario.world.streams == streams, "seed \(seed)")
            }
            for _ in 0..<25 { scenario.step() }
            // The fold, too, ignores an event applied twice.
            for (subscriber, events) in scenario.world.streams where !events.isEmpty {
                let replayed = scenario.pick(events)
                var ledger = SubscriberLedger(subscriberID: subscriber, events: events)
                let at = scenario.instants(count: 1)[0]
                let before = ledger.state(at: at, catalog: catalog)
                ledger.apply(RecordedLedgerEvent(position: Int64(events.count + 1), recordedAt: at, event: replayed.event))
                if replayed.event.idempotencyKey != nil {
                    #expect(ledger.state(at: at, catalog: catalog) == before, "seed \(seed)")
                }
            }
        }
    }

    @Test func nonRenewingPeriodsNeverOverlapAndAreOrdered() {
        for seed in 0..<UInt64(Self.sequences) {
            var scenario = Scenario(seed: 20_000 + seed)
            for _ in 0..<30 { scenario.step() }
            let purchases = Dictionary(scenario.known.map { ($0.transactionID, $0) }, uniquingKeysWith: { first, _ in first })
            for subscriber in scenario.subscribers {
                for at in scenario.instants(count: 5) {
                    let state = scenario.world.state(subscriber, at: at)
                    var previous: SubscriberState.NonRenewingPeriod?
                    for period in state.nonRenewingPeriods {
                        let duration = catalog.product(id: period.productID)!.duration!
                        #expect(period.end == duration.added(to: period.start), "seed \(seed)")
                        if let bought = purchases[period.transactionID] {
                            #expect(period.start >= bought.purchaseDate, "seed \(seed): period before its purchase")
                        }
                        if let previous, previous.group == period.group {
                            #expect(period.start >= previous.end, "seed \(seed): overlapping periods")
                        }
                        previous = period
                    }
                }
            }
        }
    }

    @Test func theStateAtAnInstantBeforeAPurchaseDoesNotShowIt() {
        for seed in 0..<UInt64(Self.sequences) {
            var scenario = Scenario(seed: 30_000 + seed)
            for _ in 0..<30 { scenario.step() }
            for subscriber in scenario.subscribers {
                // When each transaction could first be this subscriber's: its purchase, or its transfer in.
                var visibleFrom: [String: Date] = [:]
                for event in scenario.world.history(subscriber) {
                    switch event.event {
                    case .purchased(let fact), .renewed(let fact), .restored(let fact):
                        visibleFrom[fact.transactionID] = min(visibleFrom[fact.transactionID] ?? .distantFuture, fact.purchaseDate)
                    case .transferredIn(let transfer):
                        let fact = transfer.transaction!
                        visibleFrom[fact.transactionID] = min(visibleFrom[fact.transactionID] ?? .distantFuture, max(fact.purchaseDate, transfer.date))
                    default: break
                    }
                }
                for at in scenario.instants(count: 5) {
                    let state = scenario.world.state(subscriber, at: at)
                    let shown = state.purchases.map(\.transactionID) + state.nonRenewingPeriods.map(\.transactionID)
                        + state.entitlements.map(\.source)
                    for transactionID in shown {
                        #expect(visibleFrom[transactionID].map { $0 <= at } ?? false, "seed \(seed): \(transactionID) shown at \(at)")
                    }
                    #expect(state.devices.allSatisfy { $0.firstSeenAt <= at })
                }
            }
        }
    }

    @Test func everyEventRoundTripsThroughItsStoredForm() throws {
        var all: [LedgerEvent] = []
        for seed in 0..<UInt64(Self.sequences / 2) {
            var scenario = Scenario(seed: 40_000 + seed)
            for _ in 0..<30 { scenario.step() }
            all += scenario.world.streams.values.flatMap { $0 }.map(\.event)
        }
        var random = SplitMix64(seed: 99)
        for index in 0..<200 {
            let due = Date(timeIntervalSince1970: Double(Int.random(in: 1_600_000_000...1_900_000_000, using: &random)) + 0.125)
            let delivery = ReminderDelivery(reminderID: "rem:\(index)", type: index % 2 == 0 ? .expiryPrompt : .renewalReminder,
                                            group: "pass", productID: IDs.pass, expiresAt: due + 86_400, lead: ISODuration(days: index % 8),
                                            dueAt: due, date: due + 5, attempt: index % 3 + 1, error: index % 2 == 0 ? nil : "HTTP 503")
            all.append(index % 2 == 0 ? .reminderSent(delivery) : .reminderFailed(delivery))
        }
        all.append(.unknown(type: "gift_received", schemaVersion: 1, data: Data(#"{"a":1}"#.utf8)))
        all.append(.unknown(type: "purchased", schemaVersion: 3, data: Data(#"{"new":"shape"}"#.utf8)))
        let types = Set(all.map(\.type))
        #expect(types.isSuperset(of: ["purchased", "renewed", "restored", "refunded", "expired", "auto_renew_changed", "billing_issue",
                                      "transferred_in", "transferred_out", "device_seen", "reminder_sent", "reminder_failed"]))
        for event in all {
            let data = try event.encodedData()
            #expect(try LedgerEvent.decode(type: event.type, schemaVersion: event.schemaVersion, data: data) == event)
        }
    }
}
