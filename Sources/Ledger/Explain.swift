import Foundation

/// Why each entitlement a subscriber has or had is or is not active at an
/// instant, in words and with the facts behind it. Encode with
/// `LedgerJSON.makeEncoder()` (RFC 3339 dates).
public struct Explanation: Sendable, Equatable, Encodable {
    public struct Entitlement: Sendable, Equatable, Encodable {
        public var id: String
        public var active: Bool
        /// One sentence per way the entitlement was given, the deciding one first.
        public var reasons: [String]
        /// Stream positions of the events behind it, ascending.
        public var positions: [Int64]
        /// Transactions behind it, sorted.
        public var transactionIDs: [String]

        enum CodingKeys: String, CodingKey { case id, active, reasons, positions, transactionIDs = "transactionIds" }
    }

    public var subscriberID: String
    public var at: Date
    /// The store environment explained (Production unless asked).
    public var environment: Environment = .production
    public var entitlements: [Entitlement]
    /// Catalog entitlements the subscriber never had.
    public var neverGranted: [String]

    enum CodingKeys: String, CodingKey { case subscriberID = "subscriberId", at, environment, entitlements, neverGranted }
}

extension SubscriberLedger {
    /// Why each entitlement is or is not active at `at`, in one store environment.
    public func explanation(catalog: Catalog, at: Date, environment: Environment = .production) -> Explanation {
        let evaluation = Evaluation(ledger: self, catalog: catalog, at: at, environment: environment)
        let entitlements = evaluation.entitlementGrants.map { id, chosen, all in
            let others = all.filter { $0.source != chosen.source || $0.productID != chosen.productID }
            let verdict = chosen.active ? "Active: " : "Not active: "
            return Explanation.Entitlement(
                id: id, active: chosen.active,
                reasons: [verdict + chosen.reason] + others.map { "Also: " + $0.reason },
                positions: Array(Set(all.flatMap(\.positions))).sorted(),
                transactionIDs: Array(Set(all.filter { !$0.productID.isEmpty }.map(\.source))).sorted())
        }
        let granted = Set(entitlements.map(\.id))
        return Explanation(subscriberID: subscriberID, at: at, environment: environment, entitlements: entitlements,
                           neverGranted: catalog.entitlementIDs.filter { !granted.contains($0) })
    }
}

extension [RecordedLedgerEvent] {
    /// The events about a transaction: those naming it as `transactionId`
    /// or as `originalTransactionId` (the whole chain, refunds, expiries,
    /// transfers), in stream order.
    public func facts(ofTransaction id: String) -> [RecordedLedgerEvent] {
        filter { $0.event.transactionID == id || $0.event.originalTransactionID == id }
    }
}
