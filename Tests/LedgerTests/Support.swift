import Foundation
import Testing
import JSON
@testable import Ledger


/// `date("2024-01-31T00:00:00Z")`.
func date(_ text: String) -> Date {
    guard let date = RFC3339.parse(text) else { fatalError("bad test date \(text)") }
    return date
}

let exampleCatalogJSON = """
{ "version": 3,
  "products": [
    {"id": "com.example.pro.monthly", "type": "auto-renewable", "group": "pro", "entitlements": ["pro"], "reminders": ["P3D"]},
    {"id": "com.example.pro.yearly", "type": "auto-renewable", "group": "pro", "entitlements": ["pro"]},
    {"id": "com.example.pass.30d", "type": "non-renewing", "duration": "P30D", "group": "pass", "entitlements": ["pro"], "reminders": ["P7D", "P1D", "P0D"]},
    {"id": "com.example.pass.1m", "type": "non-renewing", "duration": "P1M", "group": "pass", "entitlements": ["pro"], "reminders": ["P0D"]},
    {"id": "com.example.coins.100", "type": "consumable"},
    {"id": "com.example.level2", "type": "non-consumable", "entitlements": ["level2"]},
    {"id": "com.example.starter", "type": "free", "entitlements": ["starter"]}
  ] }
"""

let catalog: Catalog = try! Catalog.decode(from: Data(exampleCatalogJSON.utf8))

enum IDs {
    static let monthly = "com.example.pro.monthly"
    static let yearly = "com.example.pro.yearly"
    static let pass = "com.example.pass.30d"
    static let passMonth = "com.example.pass.1m"
    static let coins = "com.example.coins.100"
    static let level2 = "com.example.level2"
    static let starter = "com.example.starter"
}

func purchase(_ transactionID: String, _ productID: String, at purchaseDate: Date, expires: Date? = nil,
              original: String? = nil, device: String? = nil, autoRenew: Bool? = nil) -> FactRequest {
    .purchase(FactRequest.Purchase(transactionID: transactionID, originalTransactionID: original ?? transactionID,
                                   productID: productID, purchaseDate: purchaseDate, expiresDate: expires, autoRenew: autoRenew,
                                   deviceID: device))
}

func renewal(_ transactionID: String, original: String, _ productID: String, at purchaseDate: Date, expires: Date) -> FactRequest {
    .renewal(FactRequest.Renewal(transactionID: transactionID, originalTransactionID: original, productID: productID,
                                 purchaseDate: purchaseDate, expiresDate: expires))
}

func refund(_ transactionID: String, at revocationDate: Date) -> FactRequest {
    .refund(FactRequest.Refund(transactionID: transactionID, revocationDate: revocationDate))
}

/// Several subscribers' streams and the ownership lookup, the way the Server
/// keeps them: decisions are committed atomically across streams.
struct World {
    var decider: Decider
    var streams: [String: [RecordedLedgerEvent]] = [:]
    var owners: [String: String] = [:]

    init(policy: RestorePolicy = .transfer, catalog: Catalog = catalog) {
        decider = Decider(catalog: catalog, restorePolicy: policy)
    }

    func history(_ subscriber: String) -> [RecordedLedgerEvent] { streams[subscriber] ?? [] }

    @discardableResult
    mutating func send(_ request: FactRequest, to subscriber: String, now: Date) throws(LedgerError) -> Decision {
        let owners = self.owners
        let decision = try decider.decide(request, subscriberID: subscriber, history: history(subscriber),
                                          owner: { owners[$0] }, now: now)
        commit(decision, subscriber: subscriber, now: now)
        return decision
    }

    @discardableResult
    mutating func restore(_ request: RestoreRequest, to subscriber: String, now: Date) throws(LedgerError) -> Decision {
        let owners = self.owners
        let decision = try decider.decide(request, subscriberID: subscriber, history: history(subscriber),
                                          owner: { owners[$0] }, now: now)
        commit(decision, subscriber: subscriber, now: now)
        return decision
    }

    mutating func append(_ events: [LedgerEvent], to subscriber: String, now: Date) {
        for event in events {
            let position = (streams[subscriber]?.last?.position ?? 0) + 1
            streams[subscriber, default: []].append(RecordedLedgerEvent(position: position, recordedAt: now, event: event))
        }
    }

    mutating func commit(_ decision: Decision, subscriber: String, now: Date) {
        append(decision.events, to: subscriber, now: now)
        for transfer in decision.transfers { append(transfer.events, to: transfer.fromSubscriberID, now: now) }
        for original in decision.claims { owners[original] = subscriber }
    }

    func state(_ subscriber: String, at: Date) -> SubscriberState {
        SubscriberState.fold(history(subscriber), subscriberID: subscriber, catalog: decider.catalog, at: at)
    }
}

extension SubscriberReadModel {
    /// The subscriptions of one environment as `SubscriberState` lists them
    /// (what the property tests hold the read model to)
    /// at `at` (an instant no fact is dated after): a non-renewing group
    /// shows the period covering `at`, else its last.
    func stateSubscriptions(at: Date, environment: Environment) -> [SubscriberState.Subscription] {
        subscriptions.filter { $0.environment == environment }.map { row in
            var productID = row.productID
            var originalTransactionID = row.originalTransactionID
            if row.type == .nonRenewing,
               let covering = periods.first(where: { $0.environment == environment && $0.group == row.group && $0.start <= at && at < $0.end }) {
                productID = covering.productID
                originalTransactionID = covering.originalTransactionID
            }
            return SubscriberState.Subscription(group: row.group, productID: productID, type: row.type, status: row.status(at: at),
                                                expiresAt: row.expiresAt, autoRenew: row.autoRenew,
                                                originalTransactionID: originalTransactionID, store: row.store)
        }
        .sorted { ($0.group, $0.originalTransactionID) < ($1.group, $1.originalTransactionID) }
    }
}
