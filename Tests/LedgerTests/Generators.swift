import TestSupport
import Foundation
@testable import Ledger

/// Random sequences of facts across a few subscribers, for property tests.
struct Scenario {
    struct Known {
        var transactionID: String
        var originalTransactionID: String
        var productID: String
        var purchaseDate: Date
        var expiresDate: Date?
    }

    var random: SplitMix64
    var world: World
    var now = date("2024-01-01T00:00:00Z")
    var known: [Known] = []
    var nextID = 1
    let subscribers = ["s0", "s1", "s2"]
    /// Checked after every accepted request (the request and who got it).
    var onAccepted: (inout Scenario, Request, String) -> Void = { _, _, _ in }

    enum Request {
        case fact(FactRequest)
        case restore(RestoreRequest)
    }

    init(seed: UInt64) {
        random = SplitMix64(seed: seed)
        world = World(policy: random.next() % 4 == 0 ? .keepOriginal : .transfer)
    }

    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }
    mutating func chance(_ percent: Int) -> Bool { int(1...100) <= percent }
    mutating func pick<T>(_ items: [T]) -> T { items[int(0...items.count - 1)] }
    mutating func seconds(days: ClosedRange<Int>) -> TimeInterval { TimeInterval(int(days.lowerBound * 86_400...days.upperBound * 86_400)) }

    mutating func newID() -> String {
        defer { nextID += 1 }
        return "\(1000 + nextID)"
    }

    /// One random request, sent; returns it when accepted.
    mutating func step() {
        now += seconds(days: 0...4)
        let subscriber = pick(subscribers)
        let request = makeRequest()
        let before = world
        do {
            switch request {
            case .fact(let fact): try world.send(fact, to: subscriber, now: now)
            case .restore(let restore): try world.restore(restore, to: subscriber, now: now)
            }
        } catch {
            precondition(world.streams == before.streams, "a refused request must append nothing")
            return
        }
        switch request {
        case .fact(.purchase(let fact)):
            known.append(Known(transactionID: fact.transactionID, originalTransactionID: fact.originalTransactionID,
                               productID: fact.productID, purchaseDate: fact.purchaseDate, expiresDate: fact.expiresDate))
        case .fact(.renewal(let fact)):
            known.append(Known(transactionID: fact.transactionID, originalTransactionID: fact.originalTransactionID,
                               productID: fact.productID, purchaseDate: fact.purchaseDate, expiresDate: fact.expiresDate))
        default:
            break
        }
        onAccepted(&self, request, subscriber)
    }

    mutating func makeRequest() -> Request {
        let roll = int(1...100)
        let purchaseDate = now - seconds(days: 0...3)
        switch roll {
        case 1...30:
            let id = newID()
            return .fact(purchase(id, pick([IDs.pass, IDs.pass, IDs.passMonth]), at: purchaseDate, device: chance(50) ? pick(["D1", "D2"]) : nil))
        case 31...45:
            let id = newID()
            return .fact(purchase(id, pick([IDs.monthly, IDs.yearly]), at: purchaseDate, expires: purchaseDate + seconds(days: 1...40),
                                  autoRenew: chance(30) ? chance(50) : nil))
        case 46...55:
            let autoRenewables = known.filter { $0.expiresDate != nil }
            guard !autoRenewables.isEmpty else { return makeRequest() }
            let renewed = pick(autoRenewables)
            return .fact(renewal(newID(), original: renewed.originalTransactionID, renewed.productID, at: purchaseDate,
                                 expires: purchaseDate + seconds(days: 1...40)))
        case 56...63:
            return .fact(purchase(newID(), pick([IDs.level2, IDs.coins, IDs.starter, IDs.coins]), at: purchaseDate))
        case 64...73:
            guard !known.isEmpty else { return makeRequest() }
            return .fact(refund(pick(known).transactionID, at: now - seconds(days: 0...20)))
        case 74...85:
            var transactions: [RestoreRequest.Transaction] = []
            for _ in 0..<int(0...2) where !known.isEmpty {
                let restored = pick(known)
                transactions.append(.init(transactionID: restored.transactionID, originalTransactionID: restored.originalTransactionID,
                                          productID: restored.productID, purchaseDate: restored.purchaseDate, expiresDate: restored.expiresDate))
            }
            if chance(20) {  // an original the ledger never saw
                transactions.append(.init(transactionID: newID(), productID: IDs.passMonth, purchaseDate: purchaseDate))
            }
            return .restore(RestoreRequest(deviceID: chance(80) ? pick(["D1", "D2", "D3"]) : nil, transactions: transactions))
        default:
            let autoRenewables = known.filter { $0.expiresDate != nil }
            guard !autoRenewables.isEmpty else { return makeRequest() }
            let original = pick(autoRenewables).originalTransactionID
            switch int(1...3) {
            case 1: return .fact(.autoRenewChange(.init(originalTransactionID: original, autoRenew: chance(50))))
            case 2: return .fact(.billingIssue(.init(originalTransactionID: original,
                                                     gracePeriodExpiresDate: chance(70) ? now + seconds(days: 1...16) : nil)))
            default: return .fact(.expiry(.init(.subscription(originalTransactionID: original, end: nil))))
            }
        }
    }

    /// Instants worth looking at: around every fact, plus random ones.
    mutating func instants(count: Int) -> [Date] {
        var result: [Date] = []
        let facts = world.streams.values.flatMap { $0 }.compactMap(\.event.effectiveDate)
        for _ in 0..<count {
            if let fact = facts.randomElement(using: &random), chance(60) {
                result.append(fact + TimeInterval(pick([-1, 0, 1, 86_400 * 30])))
            } else {
                result.append(date("2024-01-01T00:00:00Z") + seconds(days: -5...200))
            }
        }
        return result
    }
}
