import Foundation

/// Status of a subscription at an instant.
public enum SubscriptionStatus: String, Sendable, Hashable, Codable {
    case active, grace, expired, revoked
}

/// Status of a reminder, as the reminder projection tracks it: `failed`
/// when delivery gave up after its last attempt.
public enum ReminderStatus: String, Sendable, Hashable, Codable, CaseIterable {
    case pending, sent, cancelled, skipped, failed
}

/// What a subscriber has at an instant: the contract's `<state>` JSON.
/// Encodes with RFC 3339 UTC dates whatever the encoder's date strategy;
/// every array is in a deterministic order.
public struct SubscriberState: Sendable, Equatable, Encodable {
    public struct Entitlement: Sendable, Equatable, Encodable {
        public var id: String
        public var active: Bool
        public var productId: String
        /// nil: never ends (non-consumable, free).
        public var expiresAt: Date?
        /// The transaction that gives it.
        public var source: String
    }

    public struct Subscription: Sendable, Equatable, Encodable {
        public var group: String
        public var productId: String
        public var type: ProductType
        public var status: SubscriptionStatus
        public var expiresAt: Date?
        public var autoRenew: Bool
        public var originalTransactionId: String
    }

    public struct NonRenewingPeriod: Sendable, Equatable, Encodable {
        public var group: String
        public var productId: String
        public var transactionId: String
        public var start: Date
        public var end: Date
    }

    /// A consumable, non-consumable or free purchase.
    public struct Purchase: Sendable, Equatable, Encodable {
        public var transactionId: String
        public var originalTransactionId: String
        public var productId: String
        public var type: ProductType
        public var purchaseDate: Date
        public var quantity: Int
        public var revokedAt: Date?
    }

    public struct Device: Sendable, Equatable, Encodable {
        public var id: String
        public var firstSeenAt: Date
    }

    /// A reminder as the state shows it (filled in by the reminder projection).
    public struct Reminder: Sendable, Equatable, Encodable {
        public var id: String
        public var dueAt: Date
        public var lead: ISODuration
        public var status: ReminderStatus

        public init(id: String, dueAt: Date, lead: ISODuration, status: ReminderStatus) {
            self.id = id
            self.dueAt = dueAt
            self.lead = lead
            self.status = status
        }
    }

    public var subscriberId: String
    public var at: Date
    public var entitlements: [Entitlement]
    public var subscriptions: [Subscription]
    public var nonRenewingPeriods: [NonRenewingPeriod]
    public var purchases: [Purchase]
    public var devices: [Device]
    /// Empty from the fold; the Server fills it from the reminder projection.
    public var reminders: [Reminder] = []

    /// Folds a history (applied in position order) and evaluates it at `at`.
    public static func fold(_ events: [RecordedLedgerEvent], subscriberID: String, catalog: Catalog, at: Date) -> SubscriberState {
        SubscriberLedger(subscriberID: subscriberID, events: events).state(at: at, catalog: catalog)
    }

    init(subscriberID: String, evaluation: Evaluation, ledger: SubscriberLedger) {
        subscriberId = subscriberID
        at = evaluation.at
        entitlements = evaluation.entitlementGrants.map { id, grant, _ in
            Entitlement(id: id, active: grant.active, productId: grant.productID, expiresAt: grant.end, source: grant.source)
        }
        subscriptions = evaluation.autoRenewables.map { subscription in
            Subscription(group: subscription.group, productId: subscription.latest.fact.productId, type: .autoRenewable,
                         status: subscription.status, expiresAt: subscription.end, autoRenew: subscription.autoRenew,
                         originalTransactionId: subscription.latest.fact.originalTransactionId)
        }
        for group in evaluation.nonRenewingGroups {
            if let period = group.covering ?? group.periods.last {
                subscriptions.append(Subscription(group: group.group, productId: period.productID, type: .nonRenewing,
                                                  status: group.covering == nil ? .expired : .active,
                                                  expiresAt: group.periods.last!.end, autoRenew: false,
                                                  originalTransactionId: period.originalTransactionID))
            } else if let refunded = group.refunded.last {
                subscriptions.append(Subscription(group: group.group, productId: refunded.fact.productId, type: .nonRenewing,
                                                  status: .revoked, expiresAt: nil, autoRenew: false,
                                                  originalTransactionId: refunded.fact.originalTransactionId))
            }
        }
        subscriptions.sort { ($0.group, $0.originalTransactionId) < ($1.group, $1.originalTransactionId) }
        nonRenewingPeriods = evaluation.nonRenewingGroups.flatMap(\.periods).map { period in
            NonRenewingPeriod(group: period.group, productId: period.productID, transactionId: period.transactionID,
                              start: period.start, end: period.end)
        }
        purchases = evaluation.transactions
            .filter { $0.type == .consumable || $0.type == .nonConsumable || $0.type == .free }
            .map { transaction in
                Purchase(transactionId: transaction.fact.transactionId, originalTransactionId: transaction.fact.originalTransactionId,
                         productId: transaction.fact.productId, type: transaction.type, purchaseDate: transaction.fact.purchaseDate,
                         quantity: transaction.fact.quantity, revokedAt: transaction.revokedAt)
            }
        devices = ledger.devices.values.filter { $0.date <= evaluation.at }
            .map { Device(id: $0.value, firstSeenAt: $0.date) }
            .sorted { $0.id < $1.id }
    }

    /// The entitlement ids active at `at`.
    public var activeEntitlementIDs: [String] {
        entitlements.filter(\.active).map(\.id)
    }
}

extension SubscriberLedger {
    /// The subscriber's state at `at`: facts effective after `at` are not shown.
    public func state(at: Date, catalog: Catalog) -> SubscriberState {
        SubscriberState(subscriberID: subscriberID, evaluation: Evaluation(ledger: self, catalog: catalog, at: at), ledger: self)
    }
}

// Dates are written by hand so the shape is the contract's whatever
// JSONEncoder the caller uses; absent values are written as null.
extension SubscriberState {
    enum CodingKeys: String, CodingKey {
        case subscriberId, at, entitlements, subscriptions, nonRenewingPeriods, purchases, devices, reminders
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(subscriberId, forKey: .subscriberId)
        try container.encode(RFC3339.format(at), forKey: .at)
        try container.encode(entitlements, forKey: .entitlements)
        try container.encode(subscriptions, forKey: .subscriptions)
        try container.encode(nonRenewingPeriods, forKey: .nonRenewingPeriods)
        try container.encode(purchases, forKey: .purchases)
        try container.encode(devices, forKey: .devices)
        try container.encode(reminders, forKey: .reminders)
    }
}

extension SubscriberState.Entitlement {
    enum CodingKeys: String, CodingKey { case id, active, productId, expiresAt, source }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(active, forKey: .active)
        try container.encode(productId, forKey: .productId)
        try container.encode(expiresAt.map(RFC3339.format), forKey: .expiresAt)
        try container.encode(source, forKey: .source)
    }
}

extension SubscriberState.Subscription {
    enum CodingKeys: String, CodingKey { case group, productId, type, status, expiresAt, autoRenew, originalTransactionId }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(group, forKey: .group)
        try container.encode(productId, forKey: .productId)
        try container.encode(type, forKey: .type)
        try container.encode(status, forKey: .status)
        try container.encode(expiresAt.map(RFC3339.format), forKey: .expiresAt)
        try container.encode(autoRenew, forKey: .autoRenew)
        try container.encode(originalTransactionId, forKey: .originalTransactionId)
    }
}

extension SubscriberState.NonRenewingPeriod {
    enum CodingKeys: String, CodingKey { case group, productId, transactionId, start, end }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(group, forKey: .group)
        try container.encode(productId, forKey: .productId)
        try container.encode(transactionId, forKey: .transactionId)
        try container.encode(RFC3339.format(start), forKey: .start)
        try container.encode(RFC3339.format(end), forKey: .end)
    }
}

extension SubscriberState.Purchase {
    enum CodingKeys: String, CodingKey { case transactionId, originalTransactionId, productId, type, purchaseDate, quantity, revokedAt }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(transactionId, forKey: .transactionId)
        try container.encode(originalTransactionId, forKey: .originalTransactionId)
        try container.encode(productId, forKey: .productId)
        try container.encode(type, forKey: .type)
        try container.encode(RFC3339.format(purchaseDate), forKey: .purchaseDate)
        try container.encode(quantity, forKey: .quantity)
        try container.encode(revokedAt.map(RFC3339.format), forKey: .revokedAt)
    }
}

extension SubscriberState.Device {
    enum CodingKeys: String, CodingKey { case id, firstSeenAt }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(RFC3339.format(firstSeenAt), forKey: .firstSeenAt)
    }
}

extension SubscriberState.Reminder {
    enum CodingKeys: String, CodingKey { case id, dueAt, lead, status }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(RFC3339.format(dueAt), forKey: .dueAt)
        try container.encode(lead, forKey: .lead)
        try container.encode(status, forKey: .status)
    }
}
