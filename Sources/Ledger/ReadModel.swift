import Foundation

/// What the read models hold for one subscriber, per store environment: a
/// pure function of the ledger and the catalog, so a projection can compute
/// it in memory for every subscriber a batch touches, and a rebuild gives
/// the same rows whatever the batch sizes.
///
/// Two kinds of rows:
/// - *current* rows (`subscriptions`, `periods`) are what is known now, with
///   the status inputs (`expiresAt`, `graceEndsAt`, `revokedAt`) from which
///   a status at any later instant follows without another event;
/// - *interval* rows (`entitlements`, `products`) are the exact history of
///   activity: something is active at T (as `state(at: T)` says) exactly when
///   one of its intervals contains T, so "who was active when" is a range
///   predicate, not a fold.
public struct SubscriberReadModel: Sendable, Equatable {
    /// One subscription as `SubscriberState.subscriptions` lists it: an
    /// auto-renewable original transaction, or a non-renewing group.
    public struct Subscription: Sendable, Equatable {
        public var environment: Environment
        public var group: String
        /// The original transaction of an auto-renewable; "" for a
        /// non-renewing group (one row per group).
        public var series: String
        public var productID: String
        public var type: ProductType
        public var originalTransactionID: String
        public var latestTransactionID: String
        /// Start of the latest stretch of continuous access; nil if it never gave any.
        public var startsAt: Date?
        /// Auto-renewable: the store's end, cut short by a reported expiry;
        /// non-renewing: the end of the last period; nil when every period was refunded.
        public var expiresAt: Date?
        public var graceEndsAt: Date?
        /// When the latest transaction's refund took effect (auto-renewable),
        /// or the last refund of a group left without periods (non-renewing).
        public var revokedAt: Date?
        public var autoRenew: Bool
        /// What the product gives (from the catalog).
        public var entitlements: [String]
        /// The store that sells it (for Google Play, `series` and
        /// `originalTransactionID` are the purchase token).
        public var store: Store = .appStore
        /// Google Play: what the subscription became when it stopped
        /// granting (`on_hold`, `paused`, `pending`), from `expiresAt` on.
        public var heldStatus: SubscriptionStatus? = nil
    }

    /// One stacked period of a non-renewing group.
    public struct Period: Sendable, Equatable {
        public var environment: Environment
        public var group: String
        public var productID: String
        public var transactionID: String
        public var originalTransactionID: String
        public var start: Date
        public var end: Date
    }

    /// A stretch during which an entitlement was active (disjoint per
    /// subscriber, environment and entitlement).
    public struct EntitlementInterval: Sendable, Equatable {
        public var environment: Environment
        public var entitlement: String
        public var start: Date
        /// nil: never ends (non-consumable, free).
        public var end: Date?
        /// The product and transaction giving it longest within the stretch.
        public var productID: String
        public var source: String
    }

    /// A stretch during which a product was active: an auto-renewable
    /// active or in grace, a non-renewing period, a non-consumable or free
    /// purchase not refunded (disjoint per subscriber, environment and product).
    public struct ProductInterval: Sendable, Equatable {
        public var environment: Environment
        public var productID: String
        public var type: ProductType
        public var group: String
        public var start: Date
        public var end: Date?
        /// The latest transaction within the stretch.
        public var source: String
    }

    public var subscriberID: String
    public var subscriptions: [Subscription] = []
    public var periods: [Period] = []
    public var entitlements: [EntitlementInterval] = []
    public var products: [ProductInterval] = []

    public init(subscriberID: String) {
        self.subscriberID = subscriberID
    }
}

extension SubscriberLedger {
    /// The read-model rows of this subscriber (see `SubscriberReadModel`).
    public func readModel(catalog: Catalog) -> SubscriberReadModel {
        var model = SubscriberReadModel(subscriberID: subscriberID)
        var environments: [Environment] = []  // one or two: a scan costs less than a set
        for record in transactions.values where !environments.contains(record.fact.environment) {
            environments.append(record.fact.environment)
        }
        for states in playPurchases.values {
            for state in states where !environments.contains(state.value.environment) { environments.append(state.value.environment) }
        }
        if !supportGrants.isEmpty, !environments.contains(.production) { environments.append(.production) }
        for environment in Environment.allCases where environments.contains(environment) {
            let timeline = ActivityTimeline(ledger: self, catalog: catalog, environment: environment)
            model.entitlements += timeline.entitlementIntervals()
            model.products += timeline.productIntervals()
            // Everything known, whatever its date: the status at any instant
            // follows from these rows (see `SubscriberReadModel.Subscription`).
            let known = Evaluation(ledger: self, catalog: catalog, at: .distantFuture, environment: environment, includingGrants: false)
            for subscription in known.autoRenewables {
                let latest = subscription.latest
                var row = SubscriberReadModel.Subscription(
                    environment: environment, group: subscription.group, series: latest.fact.originalTransactionID,
                    productID: latest.fact.productID, type: .autoRenewable,
                    originalTransactionID: latest.fact.originalTransactionID, latestTransactionID: latest.fact.transactionID,
                    startsAt: timeline.lastRunStart[ActivityTimeline.autoRenewableUnit(latest.fact.originalTransactionID)],
                    expiresAt: subscription.end, graceEndsAt: subscription.graceEnd, revokedAt: latest.revokedAt,
                    autoRenew: subscription.autoRenew, entitlements: catalog.product(id: latest.fact.productID)?.entitlements ?? [],
                    store: latest.fact.store)
                if latest.fact.store == .googlePlay { Self.playStatusInputs(of: subscription, into: &row) }
                model.subscriptions.append(row)
            }
            for group in known.nonRenewingGroups {
                model.periods += group.periods.map { period in
                    SubscriberReadModel.Period(environment: environment, group: group.group, productID: period.productID,
                                               transactionID: period.transactionID,
                                               originalTransactionID: period.originalTransactionID,
                                               start: period.start, end: period.end)
                }
                let startsAt = timeline.lastRunStart[ActivityTimeline.nonRenewingUnit(group.group)]
                if let last = group.periods.last {
                    model.subscriptions.append(SubscriberReadModel.Subscription(
                        environment: environment, group: group.group, series: "", productID: last.productID, type: .nonRenewing,
                        originalTransactionID: last.originalTransactionID, latestTransactionID: last.transactionID,
                        startsAt: startsAt, expiresAt: last.end, graceEndsAt: nil, revokedAt: nil, autoRenew: false,
                        entitlements: catalog.product(id: last.productID)?.entitlements ?? []))
                } else if let refunded = group.refunded.last {
                    model.subscriptions.append(SubscriberReadModel.Subscription(
                        environment: environment, group: group.group, series: "", productID: refunded.fact.productID,
                        type: .nonRenewing, originalTransactionID: refunded.fact.originalTransactionID,
                        latestTransactionID: refunded.fact.transactionID, startsAt: startsAt, expiresAt: nil, graceEndsAt: nil,
                        revokedAt: refunded.revokedAt, autoRenew: false,
                        entitlements: catalog.product(id: refunded.fact.productID)?.entitlements ?? []))
                }
            }
        }
        return model
    }
}

extension SubscriberLedger {
    /// A Google Play row's status inputs: judged at the end of time, a
    /// subscription on hold, paused or pending says so (`heldStatus`, from
    /// its end on), and one whose latest fetched state is in its grace
    /// period is in grace until its end (Google counts the grace period
    /// inside `expiryTime`).
    fileprivate static func playStatusInputs(of subscription: Evaluation.AutoRenewable, into row: inout SubscriberReadModel.Subscription) {
        switch subscription.status {
        case .onHold, .paused, .pending: row.heldStatus = subscription.status
        default: break
        }
        if subscription.status == .expired, subscription.playState == .inGracePeriod {
            row.graceEndsAt = subscription.end
        }
    }
}

extension SubscriberReadModel.Subscription {
    /// The status at `at` from the status inputs alone, for an instant no
    /// fact is dated after (the SQL function `subscription_status` is the same).
    public func status(at: Date) -> SubscriptionStatus {
        if let revokedAt, revokedAt <= at { return .revoked }
        if let heldStatus, (expiresAt ?? .distantPast) <= at { return heldStatus }
        if store == .googlePlay, let startsAt, let graceEndsAt, startsAt <= at, at < graceEndsAt { return .grace }
        if let startsAt, let expiresAt, startsAt <= at, at < expiresAt { return .active }
        if let graceEndsAt, at < graceEndsAt, (expiresAt ?? .distantPast) <= at { return .grace }
        return .expired
    }
}
