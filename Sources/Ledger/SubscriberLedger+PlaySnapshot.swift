import Foundation

// Google Play's facts in a ledger snapshot (`snapshotData()`): field by
// field, dates as exact bits like every other fact.
extension SnapshotWriter {
    mutating func playPurchase(_ fact: GooglePlayPurchase) {
        string(fact.kind.rawValue)
        string(fact.purchaseToken)
        optional(fact.orderID) { $0.string($1) }
        string(fact.productID)
        optional(fact.basePlanID) { $0.string($1) }
        string(fact.state.rawValue)
        date(fact.startTime)
        optional(fact.expiryTime) { $0.date($1) }
        optional(fact.autoRenew) { $0.bool($1) }
        optional(fact.linkedPurchaseToken) { $0.string($1) }
        bool(fact.acknowledged)
        date(fact.observedAt)
        string(fact.environment.rawValue)
        int(fact.quantity)
        string(fact.source)
        // Format 3: the sale.
        optional(fact.sale) { $0.sale($1) }
    }

    mutating func playVoid(_ fact: GooglePlayVoid) {
        string(fact.purchaseToken)
        optional(fact.orderID) { $0.string($1) }
        date(fact.voidedAt)
        optional(fact.reason) { $0.int($1) }
        optional(fact.voidedSource) { $0.int($1) }
        string(fact.environment.rawValue)
        string(fact.source)
    }
}

extension SnapshotReader {
    private mutating func named<T: RawRepresentable<String>>(_ type: T.Type) throws -> T {
        guard let value = T(rawValue: try string()) else { throw SnapshotError(reason: "unknown \(T.self)") }
        return value
    }

    mutating func playPurchase() throws -> GooglePlayPurchase {
        GooglePlayPurchase(
            kind: try named(GooglePlayPurchase.Kind.self), purchaseToken: try string(), orderID: try optional { try $0.string() },
            productID: try string(), basePlanID: try optional { try $0.string() }, state: try named(GooglePlayPurchase.State.self),
            startTime: try date(), expiryTime: try optional { try $0.date() }, autoRenew: try optional { try $0.bool() },
            linkedPurchaseToken: try optional { try $0.string() }, acknowledged: try bool(), observedAt: try date(),
            environment: try named(Environment.self), quantity: Int(try int()), source: try string(),
            sale: try optional { try $0.sale() })
    }

    mutating func playVoid() throws -> GooglePlayVoid {
        GooglePlayVoid(purchaseToken: try string(), orderID: try optional { try $0.string() }, voidedAt: try date(),
                       reason: try optional { Int(try $0.int()) }, voidedSource: try optional { Int(try $0.int()) },
                       environment: try named(Environment.self), source: try string())
    }
}
