import Foundation

/// Status of a subscription at an instant.
public enum SubscriptionStatus: String, Sendable, Hashable, Codable, CaseIterable {
    case active, grace, expired, revoked
    /// Google Play only: billing failed after any grace period; access is
    /// suspended until payment is fixed.
    case onHold = "on_hold"
    /// Google Play only: the subscriber paused it.
    case paused
    /// Google Play only: bought with a pending payment, not paid yet.
    case pending
}

/// Status of a reminder, as the reminder projection tracks it: `failed`
/// when delivery gave up after its last attempt.
public enum ReminderStatus: String, Sendable, Hashable, Codable, CaseIterable {
    case pending, sent, cancelled, skipped, failed
}

/// What a subscriber has at an instant: the contract's `<state>` JSON when
/// encoded with `LedgerJSON.makeEncoder()` (RFC 3339 dates; absent ends
/// written as `null`), and decoded back by `LedgerJSON.makeDecoder()` (a
/// cached state). Every array is in a deterministic order.
public struct SubscriberState: Sendable, Equatable, Codable {
    public struct Entitlement: Sendable, Equatable, Codable {
        public var id: String
        public var active: Bool
        public var productID: String
        /// nil: never ends (non-consumable, free).
        @ExplicitNull public var expiresAt: Date?
        /// The transaction that gives it.
        public var source: String
        /// The store that sold what gives it; nil for a support grant.
        @ExplicitNull public var store: Store? = .appStore

        enum CodingKeys: String, CodingKey { case id, active, productID = "productId", expiresAt, source, store }
    }

    public struct Subscription: Sendable, Equatable, Codable {
        public var group: String
        public var productID: String
        public var type: ProductType
        public var status: SubscriptionStatus
        @ExplicitNull public var expiresAt: Date?
        public var autoRenew: Bool
        public var originalTransactionID: String
        /// The store that sells it (for Google Play, `originalTransactionId`
        /// is the purchase token).
        public var store: Store = .appStore

        enum CodingKeys: String, CodingKey {
            case group, productID = "productId", type, status, expiresAt, autoRenew, originalTransactionID = "originalTransactionId"
            case store
        }
    }

    public struct NonRenewingPeriod: Sendable, Equatable, Codable {
        public var group: String
        public var productID: String
        public var transactionID: String
        public var start: Date
        public var end: Date

        enum CodingKeys: String, CodingKey { case group, productID = "productId", transactionID = "transactionId", start, end }
    }

    /// A consumable, non-consumable or free purchase.
    public struct Purchase: Sendable, Equatable, Codable {
        public var transactionID: String
        public var originalTransactionID: String
        public var productID: String
        public var type: ProductType
        public var purchaseDate: Date
        public var quantity: Int
        @ExplicitNull public var revokedAt: Date?
        public var store: Store = .appStore

        enum CodingKeys: String, CodingKey {
            case transactionID = "transactionId", originalTransactionID = "originalTransactionId", productID = "productId"
            case type, purchaseDate, quantity, revokedAt, store
        }
    }

    public struct Device: Sendable, Equatable, Codable {
        public var id: String
        public var firstSeenAt: Date
    }

    /// A reminder as the state shows it (filled in by the reminder projection).
    public struct Reminder: Sendable, Equatable, Codable {
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

    /// What the App Store said about a transaction the state shows, for
    /// support: family sharing, the offer it was bought with, an upgrade,
    /// and a refund's reason and share. Listed only for transactions the
    /// store said any of this about.
    public struct StoreTransaction: Sendable, Equatable, Codable {
        public var transactionID: String
        public var originalTransactionID: String
        public var productID: String
        /// `PURCHASED` or `FAMILY_SHARED`.
        public var ownershipType: String?
        /// 1 introductory, 2 promotional, 3 offer code, 4 win-back.
        public var offerType: Int?
        public var isUpgraded: Bool?
        public var webOrderLineItemID: String?
        public var revokedAt: Date?
        /// 0 another reason, 1 an issue with the app.
        public var revocationReason: Int?
        /// `REFUND_FULL`, `REFUND_PRORATED` or `FAMILY_REVOKE`.
        public var revocationType: String?
        /// A prorated refund's share in Apple's milliunits (50000 is 50%).
        public var revocationPercentage: Int?
        /// What it cost (a decimal string) and in which ISO 4217 currency.
        public var price: String?
        public var currency: String?
        /// `free_trial`, `pay_as_you_go` or `pay_up_front`.
        public var offerDiscount: String?
        public var storefront: String?

        enum CodingKeys: String, CodingKey {
            case transactionID = "transactionId", originalTransactionID = "originalTransactionId", productID = "productId"
            case ownershipType, offerType, isUpgraded, webOrderLineItemID = "webOrderLineItemId", revokedAt
            case revocationReason, revocationType, revocationPercentage, price, currency, offerDiscount, storefront
        }
    }

    public var subscriberID: String
    public var at: Date
    /// The store environment this state is of (Production unless asked).
    public var environment: Environment
    public var entitlements: [Entitlement]
    public var subscriptions: [Subscription]
    public var nonRenewingPeriods: [NonRenewingPeriod]
    public var purchases: [Purchase]
    public var devices: [Device]
    /// Empty from the fold; the Server fills it from the reminder projection.
    public var reminders: [Reminder] = []
    public var storeTransactions: [StoreTransaction] = []

    enum CodingKeys: String, CodingKey {
        case subscriberID = "subscriberId", at, environment, entitlements, subscriptions, nonRenewingPeriods, purchases, devices, reminders
        case storeTransactions
    }

    /// Folds a history (applied in position order) and evaluates it at `at`.
    public static func fold(_ events: [RecordedLedgerEvent], subscriberID: String, catalog: Catalog, at: Date,
                            environment: Environment = .production) -> SubscriberState {
        SubscriberLedger(subscriberID: subscriberID, events: events).state(at: at, catalog: catalog, environment: environment)
    }

    init(subscriberID: String, evaluation: Evaluation, ledger: SubscriberLedger) {
        self.subscriberID = subscriberID
        at = evaluation.at
        environment = evaluation.environment
        entitlements = evaluation.entitlementGrants.map { id, grant, _ in
            Entitlement(id: id, active: grant.active, productID: grant.productID, expiresAt: grant.end, source: grant.source,
                        store: grant.store)
        }
        subscriptions = evaluation.autoRenewables.map { subscription in
            Subscription(group: subscription.group, productID: subscription.latest.fact.productID, type: .autoRenewable,
                         status: subscription.status, expiresAt: subscription.end, autoRenew: subscription.autoRenew,
                         originalTransactionID: subscription.latest.fact.originalTransactionID, store: subscription.latest.fact.store)
        }
        for group in evaluation.nonRenewingGroups {
            if let period = group.covering ?? group.periods.last {
                subscriptions.append(Subscription(group: group.group, productID: period.productID, type: .nonRenewing,
                                                  status: group.covering == nil ? .expired : .active,
                                                  expiresAt: group.periods.last?.end ?? period.end, autoRenew: false,
                                                  originalTransactionID: period.originalTransactionID))
            } else if let refunded = group.refunded.last {
                subscriptions.append(Subscription(group: group.group, productID: refunded.fact.productID, type: .nonRenewing,
                                                  status: .revoked, expiresAt: nil, autoRenew: false,
                                                  originalTransactionID: refunded.fact.originalTransactionID))
            }
        }
        subscriptions.sort { ($0.group, $0.originalTransactionID) < ($1.group, $1.originalTransactionID) }
        nonRenewingPeriods = evaluation.nonRenewingGroups.flatMap(\.periods).map { period in
            NonRenewingPeriod(group: period.group, productID: period.productID, transactionID: period.transactionID,
                              start: period.start, end: period.end)
        }
        purchases = evaluation.transactions
            .filter { $0.type == .consumable || $0.type == .nonConsumable || $0.type == .free }
            .map { transaction in
                Purchase(transactionID: transaction.fact.transactionID, originalTransactionID: transaction.fact.originalTransactionID,
                         productID: transaction.fact.productID, type: transaction.type, purchaseDate: transaction.fact.purchaseDate,
                         quantity: transaction.fact.quantity, revokedAt: transaction.revokedAt, store: transaction.fact.store)
            }
        storeTransactions = evaluation.transactions.compactMap { transaction in
            let refund = transaction.refund?.value.details ?? AppleRevocationDetails()
            guard !transaction.fact.details.isEmpty || !refund.isEmpty else { return nil }
            let details = transaction.fact.details
            return StoreTransaction(
                transactionID: transaction.fact.transactionID, originalTransactionID: transaction.fact.originalTransactionID,
                productID: transaction.fact.productID, ownershipType: details.ownershipType, offerType: details.offerType,
                isUpgraded: details.isUpgraded, webOrderLineItemID: details.webOrderLineItemID, revokedAt: transaction.revokedAt,
                revocationReason: refund.revocationReason, revocationType: refund.revocationType,
                revocationPercentage: refund.revocationPercentage, price: details.sale.price?.description,
                currency: details.sale.currency, offerDiscount: details.sale.offerDiscount?.rawValue, storefront: details.sale.storefront)
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
    /// Only the facts of `environment` count (the Production view unless asked).
    public func state(at: Date, catalog: Catalog, environment: Environment = .production) -> SubscriberState {
        SubscriberState(subscriberID: subscriberID, evaluation: Evaluation(ledger: self, catalog: catalog, at: at, environment: environment),
                        ledger: self)
    }
}

// States cached before there was a second store say nothing of it: the App Store.
extension SubscriberState.Subscription {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        group = try container.decode(String.self, forKey: .group)
        productID = try container.decode(String.self, forKey: .productID)
        type = try container.decode(ProductType.self, forKey: .type)
        status = try container.decode(SubscriptionStatus.self, forKey: .status)
        _expiresAt = try container.decode(ExplicitNull<Date>.self, forKey: .expiresAt)
        autoRenew = try container.decode(Bool.self, forKey: .autoRenew)
        originalTransactionID = try container.decode(String.self, forKey: .originalTransactionID)
        store = try container.decodeIfPresent(Store.self, forKey: .store) ?? .appStore
    }
}

extension SubscriberState.Purchase {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        transactionID = try container.decode(String.self, forKey: .transactionID)
        originalTransactionID = try container.decode(String.self, forKey: .originalTransactionID)
        productID = try container.decode(String.self, forKey: .productID)
        type = try container.decode(ProductType.self, forKey: .type)
        purchaseDate = try container.decode(Date.self, forKey: .purchaseDate)
        quantity = try container.decode(Int.self, forKey: .quantity)
        _revokedAt = try container.decode(ExplicitNull<Date>.self, forKey: .revokedAt)
        store = try container.decodeIfPresent(Store.self, forKey: .store) ?? .appStore
    }
}
