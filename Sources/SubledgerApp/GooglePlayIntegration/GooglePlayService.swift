import Foundation
import GooglePlay
import JSON
import Ledger
import Logging
import Metrics
import Postgres

/// What the service asks of Google: `GooglePlayAPIClient` in production (and
/// in the tests, against a fake Google on loopback).
public protocol GooglePlayPurchaseSource: Sendable {
    func fetchSubscription(token: String, observedAt: Date) async throws -> FetchedPlayPurchase
    func fetchProduct(productID: String, token: String, observedAt: Date) async throws -> FetchedPlayPurchase
    func acknowledgeSubscription(subscriptionID: String, token: String) async throws
    func acknowledgeProduct(productID: String, token: String) async throws
    func voidedPage(startTime: Date?, pageToken: String?, maxResults: Int) async throws -> VoidedPurchasesPage
}

/// Takes Google Play purchases into the ledger: from pushes (the purchase
/// is fetched, and what Google says is the fact), from the app linking a
/// purchase to its subscriber, and from a refresh. Every recorded purchase
/// Google has not seen acknowledged is queued for `GooglePlayAcknowledger`.
public struct GooglePlayService: Sendable {
    let source: any GooglePlayPurchaseSource
    let packageName: String
    let environments: Set<Ledger.Environment>
    let writer: LedgerWriter
    let reader: SubscriberReader
    let pool: ConnectionPool
    let logger: Logger

    public init(source: any GooglePlayPurchaseSource, packageName: String, environments: Set<Ledger.Environment>,
                writer: LedgerWriter, reader: SubscriberReader, logger: Logger) {
        self.source = source
        self.packageName = packageName
        self.environments = environments
        self.writer = writer
        self.reader = reader
        self.pool = writer.pool
        self.logger = logger
    }

    /// What a push did.
    public struct PushReceipt: Sendable, Encodable {
        public var messageId: String
        public var status: GooglePlayNotificationStatus
        public var duplicate: Bool
        public var subscriberId: String?
    }

    /// Stores and applies a verified push; a redelivery records nothing new.
    /// Throws a `ServiceError` (503) when the purchase cannot be fetched.
    public func receive(_ push: PubSubPush) async throws -> PushReceipt {
        let notification = push.notification
        if let status = try await pool.withConnection({ try await GooglePlayStore.status(ofMessage: push.messageID, on: $0) }) {
            Self.count(kind: "any", outcome: "duplicate")
            return PushReceipt(messageId: push.messageID, status: status, duplicate: true, subscriberId: nil)
        }
        let eventTime = min(notification.eventTime, Date())
        var row = GooglePlayNotificationRow(
            messageID: push.messageID, kind: Self.kind(notification), notificationType: Self.type(notification),
            eventTime: notification.eventTime, packageName: notification.packageName, environment: nil,
            purchaseToken: notification.purchaseToken, subscriberID: nil, status: .acknowledged, error: nil,
            summary: Self.summary(notification))
        guard notification.packageName == packageName else {
            row.status = .rejected
            row.error = LedgerError(kind: .badRequest, code: .invalidField,
                                    message: "The notification is for package '\(notification.packageName.prefix(100))', not this service's.",
                                    field: "packageName")
            return try await settle(row)
        }
        let request: FactRequest
        switch notification.content {
        case .subscription(let subscription):
            return try await recordFetched(row: row) {
                try await source.fetchSubscription(token: subscription.purchaseToken, observedAt: eventTime)
            }
        case .oneTimeProduct(let product):
            return try await recordFetched(row: row) {
                try await source.fetchProduct(productID: product.sku, token: product.purchaseToken, observedAt: eventTime)
            }
        case .voidedPurchase(let voided):
            // The notification does not say whether the purchase was a test:
            // the environment is the one its token is held in.
            let owners = try await OwnershipStore(pool: pool).owners(of: Set(Ledger.Environment.allCases.map {
                Store.googlePlay.ownershipKey(voided.purchaseToken, environment: $0)
            }))
            guard let environment = Ledger.Environment.allCases.first(where: {
                owners[Store.googlePlay.ownershipKey(voided.purchaseToken, environment: $0)] != nil
            }), let void = notification.voidFact(environment: environment) else {
                row.status = .unattributed
                return try await settle(row)
            }
            row.environment = environment
            request = .googlePlayVoid(void)
            row.subscriberID = owners[Store.googlePlay.ownershipKey(voided.purchaseToken, environment: environment)]
        case .test, .other:
            return try await settle(row)
        }
        return try await apply(request, row: row, acknowledging: nil)
    }

    /// Links a purchase the app reports to `subscriberID` (role ingest):
    /// fetched from Google, recorded (the restore policy applies as for the
    /// App Store), acknowledged; answers the state.
    public func link(subscriberID: String, purchaseToken: String, productID: String,
                     kind: GooglePlayPurchase.Kind) async throws -> SubscriberState {
        try InputLimits.checkPurchaseToken(purchaseToken, field: "purchaseToken")
        let now = Date()
        let fetched = try await fetch {
            switch kind {
            case .subscription: try await source.fetchSubscription(token: purchaseToken, observedAt: now)
            case .product: try await source.fetchProduct(productID: productID, token: purchaseToken, observedAt: now)
            }
        }
        guard environments.contains(fetched.purchase.environment) else {
            throw LedgerError(kind: .rule, code: .environmentNotAccepted,
                              message: "The purchase is a \(fetched.purchase.environment.rawValue) purchase, which this service does not record.",
                              field: "purchaseToken")
        }
        _ = try await writer.write(WriteBatch([.fact(.googlePlayPurchase(fetched.purchase), subscriberID: subscriberID,
                                                     source: FactSource.googlePlay)],
                                              alongside: acknowledgement(of: fetched)))
        return try await reader.state(of: subscriberID, environment: fetched.purchase.environment)
    }

    /// Fetches one purchase again and records it for whoever holds it
    /// (`subledger googleplay refresh`); the fetched purchase and its holder.
    public func refresh(purchaseToken: String, productID: String?) async throws -> (FetchedPlayPurchase, String?) {
        try InputLimits.checkPurchaseToken(purchaseToken, field: "purchaseToken")
        let now = Date()
        let fetched = try await fetch {
            if let productID { try await source.fetchProduct(productID: productID, token: purchaseToken, observedAt: now) }
            else { try await source.fetchSubscription(token: purchaseToken, observedAt: now) }
        }
        guard let subscriberID = try await subscriber(of: fetched) else { return (fetched, nil) }
        _ = try await writer.write(WriteBatch([.fact(.googlePlayPurchase(fetched.purchase), subscriberID: subscriberID,
                                                     source: FactSource.googlePlay)],
                                              alongside: acknowledgement(of: fetched)))
        return (fetched, subscriberID)
    }

    // MARK: Steps

    private func fetch(_ body: () async throws -> FetchedPlayPurchase) async throws -> FetchedPlayPurchase {
        do {
            return try await body()
        } catch let error as LedgerError {
            throw error
        } catch is CancellationError {
            throw CancellationError()
        } catch let error as GooglePlayAPIError {
            if case .notFound = error.kind {
                // The caller's token (or product id) names nothing Google knows.
                throw LedgerError(kind: .notFound, code: .transactionNotFound,
                                  message: "Google Play knows no purchase with this token for this product and package.",
                                  field: "purchaseToken")
            }
            throw error.serviceError
        } catch {
            throw ServiceError(.upstreamUnavailable, code: .googlePlayUnavailable,
                               message: "Google Play could not be asked for the purchase: \(error)")
        }
    }

    /// The subscriber a fetched purchase belongs to: the one the app named
    /// (`obfuscatedExternalAccountId`), else whoever holds the token, else
    /// whoever holds the purchase it replaces; nil: nobody yet.
    func subscriber(of fetched: FetchedPlayPurchase) async throws -> String? {
        if let named = fetched.obfuscatedAccountID, let subscriberID = try? InputLimits.validateSubscriberID(named) {
            return subscriberID
        }
        let purchase = fetched.purchase
        let keys = [purchase.purchaseToken, purchase.linkedPurchaseToken].compactMap {
            $0.map { Store.googlePlay.ownershipKey($0, environment: purchase.environment) }
        }
        let owners = try await OwnershipStore(pool: pool).owners(of: Set(keys))
        return keys.lazy.compactMap { owners[$0] }.first
    }

    /// Fetches the push's purchase and records it. A purchase Google does not
    /// know (or an answer that breaks the ledger's limits) is stored
    /// rejected and answered 200: Pub/Sub's retries would not change it.
    private func recordFetched(row: GooglePlayNotificationRow,
                               _ body: () async throws -> FetchedPlayPurchase) async throws -> PushReceipt {
        let fetched: FetchedPlayPurchase
        do {
            fetched = try await fetch(body)
        } catch let error as LedgerError {
            var row = row
            row.status = .rejected
            row.error = error
            return try await settle(row)
        }
        return try await record(fetched, row: row)
    }

    private func record(_ fetched: FetchedPlayPurchase, row: GooglePlayNotificationRow) async throws -> PushReceipt {
        var row = row
        row.environment = fetched.purchase.environment
        guard environments.contains(fetched.purchase.environment) else {
            row.status = .rejected
            row.error = LedgerError(kind: .rule, code: .environmentNotAccepted,
                                    message: "A \(fetched.purchase.environment.rawValue) purchase, which this service does not record.",
                                    field: "environment")
            return try await settle(row)
        }
        guard let subscriberID = try await subscriber(of: fetched) else {
            row.status = .unattributed
            return try await settle(row)
        }
        row.subscriberID = subscriberID
        return try await apply(.googlePlayPurchase(fetched.purchase), row: row, acknowledging: fetched)
    }

    /// The queue entry for a purchase Google has not seen acknowledged.
    private func acknowledgement(of fetched: FetchedPlayPurchase?) -> WriteBatch.Alongside? {
        guard let fetched, fetched.acknowledgementPending else { return nil }
        return { connection in try await GooglePlayStore.requireAcknowledgement(fetched.purchase, on: connection) }
    }

    /// Records `request` for the row's subscriber with the row in the same
    /// transaction; a refusal is stored as rejected (200: Pub/Sub's retries
    /// would not change it).
    private func apply(_ request: FactRequest, row: GooglePlayNotificationRow,
                       acknowledging fetched: FetchedPlayPurchase?) async throws -> PushReceipt {
        var row = row
        guard let subscriberID = row.subscriberID else { return try await settle(row) }
        row.status = .applied
        let settled = row
        let acknowledgement = acknowledgement(of: fetched)
        do {
            _ = try await writer.write(WriteBatch([.fact(request, subscriberID: subscriberID, source: FactSource.googlePlay)],
                                                  alongside: { connection in
                try await GooglePlayStore.insert(settled, on: connection)
                try await acknowledgement?(connection)
            }))
        } catch let error as LedgerError {
            row.status = .rejected
            row.error = error
            if error.code == .erased { row.subscriberID = SubscriberPseudonyms.pseudonym(for: subscriberID) }
            return try await settle(row)
        }
        log(row)
        return PushReceipt(messageId: row.messageID, status: row.status, duplicate: false, subscriberId: subscriberID)
    }

    /// Stores a row that records no fact.
    private func settle(_ row: GooglePlayNotificationRow) async throws -> PushReceipt {
        let inserted = try await pool.withConnection { try await GooglePlayStore.insert(row, on: $0) }
        log(row)
        return PushReceipt(messageId: row.messageID, status: row.status, duplicate: !inserted,
                           subscriberId: row.status == .rejected ? nil : row.subscriberID)
    }

    private func log(_ row: GooglePlayNotificationRow) {
        Self.count(kind: row.kind, outcome: row.status.rawValue)
        logger.info("google play notification", metadata: [
            "googleplay.message_id": "\(row.messageID)", "googleplay.notification.kind": "\(row.kind)",
            "googleplay.notification.type": "\(row.notificationType.map(String.init) ?? "")",
            "googleplay.notification.status": "\(row.status.rawValue)", "subscriber.ref": "\(LogReference.subscriber(row.subscriberID ?? ""))",
            "error": "\(row.error?.code.rawValue ?? "")",
        ])
    }

    // MARK: Names

    static func kind(_ notification: DeveloperNotification) -> String {
        switch notification.content {
        case .subscription: "subscription"
        case .oneTimeProduct: "one_time_product"
        case .voidedPurchase: "voided_purchase"
        case .test: "test"
        case .other: "other"
        }
    }

    static func type(_ notification: DeveloperNotification) -> Int? {
        switch notification.content {
        case .subscription(let subscription): subscription.notificationType.rawValue
        case .oneTimeProduct(let product): product.notificationType.rawValue
        default: nil
        }
    }

    static func summary(_ notification: DeveloperNotification) -> String {
        switch notification.content {
        case .subscription(let subscription): "subscription \(subscription.notificationType.googleName)"
        case .oneTimeProduct(let product): "one-time product \(product.notificationType.googleName) \(product.sku)"
        case .voidedPurchase(let voided): "voided purchase \(voided.orderID)"
        case .test: "test notification"
        case .other(let name): "\(name) (not recorded by this version)"
        }
    }

    /// `subledger_googleplay_notifications_total{kind, outcome}`.
    public static func count(kind: String, outcome: String) {
        Counter(label: "subledger_googleplay_notifications_total", dimensions: [("kind", kind), ("outcome", outcome)]).increment()
    }
}
