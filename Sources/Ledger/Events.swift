import Foundation

/// The App Store environment a fact comes from.
public enum Environment: String, Sendable, Hashable, Codable, CaseIterable {
    case production = "Production"
    case sandbox = "Sandbox"
}

/// Where facts come from, as stored in each event's `source`.
public enum FactSource {
    /// The app's backend through the HTTP API.
    public static let api = "api"
    /// `subledger import`.
    public static let `import` = "import"
    /// App Store Server Notifications or receipt validation.
    public static let appStore = "appstore"
    /// Subledger itself (expiry sweeper, reminder dispatcher, transfers).
    public static let subledger = "subledger"
}

/// One App Store transaction as purchased, renewed, restored or transferred in.
///
/// `productType`, `group` and `duration` are the terms of sale copied from the
/// catalog when the fact was decided, so a later catalog edit does not
/// rewrite history; when absent, the catalog at fold time is used.
public struct TransactionFact: Sendable, Hashable, Codable {
    public var transactionId: String
    public var originalTransactionId: String
    public var productId: String
    public var productType: ProductType?
    public var group: String?
    public var duration: ISODuration?
    public var purchaseDate: Date
    /// Auto-renewable: the end the store gave this transaction.
    public var expiresDate: Date?
    public var quantity: Int
    public var autoRenew: Bool?
    public var deviceId: String?
    public var environment: Environment
    public var source: String

    public init(transactionId: String, originalTransactionId: String, productId: String,
                productType: ProductType? = nil, group: String? = nil, duration: ISODuration? = nil,
                purchaseDate: Date, expiresDate: Date? = nil, quantity: Int = 1, autoRenew: Bool? = nil,
                deviceId: String? = nil, environment: Environment = .production, source: String = FactSource.api) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.productType = productType
        self.group = group
        self.duration = duration
        self.purchaseDate = purchaseDate
        self.expiresDate = expiresDate
        self.quantity = quantity
        self.autoRenew = autoRenew
        self.deviceId = deviceId
        self.environment = environment
        self.source = source
    }
}

/// A refund or revocation: what the transaction gave ends at `revocationDate`.
public struct RefundFact: Sendable, Hashable, Codable {
    public var transactionId: String
    public var originalTransactionId: String
    public var productId: String
    public var revocationDate: Date
    public var reason: String?
    public var environment: Environment
    public var source: String

    public init(transactionId: String, originalTransactionId: String, productId: String, revocationDate: Date,
                reason: String? = nil, environment: Environment = .production, source: String = FactSource.api) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.revocationDate = revocationDate
        self.reason = reason
        self.environment = environment
        self.source = source
    }
}

/// A refund or revocation undone by the store (App Store `REFUND_REVERSED`):
/// from `date` on, the transaction gives again what the refund took.
public struct RefundReversal: Sendable, Hashable, Codable {
    public var transactionId: String
    public var originalTransactionId: String
    public var productId: String
    /// When the reversal took effect (the notification's signed date).
    public var date: Date
    public var reason: String?
    public var environment: Environment
    public var source: String

    public init(transactionId: String, originalTransactionId: String, productId: String, date: Date,
                reason: String? = nil, environment: Environment = .production, source: String = FactSource.appStore) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.date = date
        self.reason = reason
        self.environment = environment
        self.source = source
    }
}

/// The store moved an auto-renewable transaction's end later without a new
/// transaction (App Store `RENEWAL_EXTENDED`: same `transactionId`, later
/// `expiresDate`). Effective from `effectiveDate`, so a past instant shows
/// the end that was known then.
public struct RenewalExtension: Sendable, Hashable, Codable {
    public var transactionId: String
    public var originalTransactionId: String
    public var productId: String
    public var expiresDate: Date
    public var effectiveDate: Date
    public var environment: Environment
    public var source: String

    public init(transactionId: String, originalTransactionId: String, productId: String, expiresDate: Date,
                effectiveDate: Date, environment: Environment = .production, source: String = FactSource.appStore) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.expiresDate = expiresDate
        self.effectiveDate = effectiveDate
        self.environment = environment
        self.source = source
    }
}

/// Coverage ended: reported by the store for an auto-renewable
/// (`originalTransactionId` set), or appended by Subledger when a non-renewing
/// group's coverage end passed (`originalTransactionId` nil).
public struct ExpiryFact: Sendable, Hashable, Codable {
    public var originalTransactionId: String?
    public var group: String
    public var productId: String?
    public var expiresDate: Date
    public var reason: String?
    public var environment: Environment
    public var source: String

    public init(originalTransactionId: String?, group: String, productId: String?, expiresDate: Date,
                reason: String? = nil, environment: Environment = .production, source: String = FactSource.api) {
        self.originalTransactionId = originalTransactionId
        self.group = group
        self.productId = productId
        self.expiresDate = expiresDate
        self.reason = reason
        self.environment = environment
        self.source = source
    }
}

/// The subscriber turned auto-renew on or off.
public struct AutoRenewChange: Sendable, Hashable, Codable {
    public var originalTransactionId: String
    public var productId: String?
    public var autoRenew: Bool
    public var effectiveDate: Date
    public var environment: Environment
    public var source: String

    public init(originalTransactionId: String, productId: String?, autoRenew: Bool, effectiveDate: Date,
                environment: Environment = .production, source: String = FactSource.appStore) {
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.autoRenew = autoRenew
        self.effectiveDate = effectiveDate
        self.environment = environment
        self.source = source
    }
}

/// A renewal failed to bill. With `gracePeriodExpiresDate` the subscriber keeps
/// access until then (grace); without it, billing retry without access.
public struct BillingIssue: Sendable, Hashable, Codable {
    public var originalTransactionId: String
    public var productId: String?
    public var effectiveDate: Date
    public var gracePeriodExpiresDate: Date?
    public var environment: Environment
    public var source: String

    public init(originalTransactionId: String, productId: String?, effectiveDate: Date, gracePeriodExpiresDate: Date?,
                environment: Environment = .production, source: String = FactSource.appStore) {
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.effectiveDate = effectiveDate
        self.gracePeriodExpiresDate = gracePeriodExpiresDate
        self.environment = environment
        self.source = source
    }
}

/// One side of moving an original transaction between subscribers (restore
/// under the `transfer` policy). Both sides carry the same identity, so the
/// pair is idempotent: `afterPosition` is the receiving subscriber's last
/// stream position when the transfer was decided (0 for an empty stream).
public struct TransferFact: Sendable, Hashable, Codable {
    public var originalTransactionId: String
    public var fromSubscriberId: String
    public var toSubscriberId: String
    public var afterPosition: Int64
    public var date: Date
    /// Receiving side: the transaction that was presented for the original.
    public var transaction: TransactionFact?
    public var source: String

    public init(originalTransactionId: String, fromSubscriberId: String, toSubscriberId: String, afterPosition: Int64,
                date: Date, transaction: TransactionFact? = nil, source: String = FactSource.api) {
        self.originalTransactionId = originalTransactionId
        self.fromSubscriberId = fromSubscriberId
        self.toSubscriberId = toSubscriberId
        self.afterPosition = afterPosition
        self.date = date
        self.transaction = transaction
        self.source = source
    }
}

/// A device the subscriber restored on (purchases name theirs in the fact).
public struct DeviceSeen: Sendable, Hashable, Codable {
    public var deviceId: String
    public var date: Date
    public var source: String

    public init(deviceId: String, date: Date, source: String = FactSource.api) {
        self.deviceId = deviceId
        self.date = date
        self.source = source
    }
}

/// A reminder webhook delivery attempt (appended by the dispatcher).
public struct ReminderDelivery: Sendable, Hashable, Codable {
    public var reminderId: String
    public var type: ReminderType
    public var group: String
    public var productId: String
    public var expiresAt: Date
    public var lead: ISODuration
    public var dueAt: Date
    /// When it was sent or failed.
    public var date: Date
    public var attempt: Int
    /// Failures: what went wrong (status code, timeout...).
    public var error: String?
    public var source: String

    public init(reminderId: String, type: ReminderType, group: String, productId: String, expiresAt: Date,
                lead: ISODuration, dueAt: Date, date: Date, attempt: Int = 1, error: String? = nil,
                source: String = FactSource.subledger) {
        self.reminderId = reminderId
        self.type = type
        self.group = group
        self.productId = productId
        self.expiresAt = expiresAt
        self.lead = lead
        self.dueAt = dueAt
        self.date = date
        self.attempt = attempt
        self.error = error
        self.source = source
    }
}

/// A fact in a subscriber's stream. Type names are snake_case past tense; all
/// are at schema version 1. Types this build does not know decode as
/// `.unknown` and are ignored by the fold.
public enum LedgerEvent: Sendable, Hashable {
    case purchased(TransactionFact)
    case renewed(TransactionFact)
    /// Recorded from a restore: a transaction the ledger did not have.
    case restored(TransactionFact)
    case refunded(RefundFact)
    case refundReversed(RefundReversal)
    case renewalExtended(RenewalExtension)
    case expired(ExpiryFact)
    case autoRenewChanged(AutoRenewChange)
    case billingIssue(BillingIssue)
    case transferredOut(TransferFact)
    case transferredIn(TransferFact)
    case deviceSeen(DeviceSeen)
    case reminderSent(ReminderDelivery)
    case reminderFailed(ReminderDelivery)
    case unknown(type: String, schemaVersion: Int, data: Data)

    /// The current schema version of every known type.
    public static let currentSchemaVersion = 1

    /// The stored type name, e.g. `purchased`.
    public var type: String {
        switch self {
        case .purchased: "purchased"
        case .renewed: "renewed"
        case .restored: "restored"
        case .refunded: "refunded"
        case .refundReversed: "refund_reversed"
        case .renewalExtended: "renewal_extended"
        case .expired: "expired"
        case .autoRenewChanged: "auto_renew_changed"
        case .billingIssue: "billing_issue"
        case .transferredOut: "transferred_out"
        case .transferredIn: "transferred_in"
        case .deviceSeen: "device_seen"
        case .reminderSent: "reminder_sent"
        case .reminderFailed: "reminder_failed"
        case .unknown(let type, _, _): type
        }
    }

    public var schemaVersion: Int {
        if case .unknown(_, let version, _) = self { return version }
        return Self.currentSchemaVersion
    }

    /// The key that makes the fact idempotent within a subscriber's stream
    /// (PRODUCT.md): the transaction id for purchases, renewals and restores;
    /// `refund:` + transaction id; `expiry:` + original transaction id (+ `@`
    /// end when known) or `expiry:` + group + `@` + end; transfers and other
    /// facts get keys derived from what identifies them.
    public var idempotencyKey: String? {
        switch self {
        case .purchased(let fact), .renewed(let fact), .restored(let fact):
            return fact.transactionId
        case .refunded(let refund):
            return "refund:" + refund.transactionId
        case .refundReversed(let reversal):
            return "refund-reversed:" + reversal.transactionId
        case .renewalExtended(let renewalExtension):
            // The same transaction can be extended more than once, each time to a new end.
            return "renewal-extended:\(renewalExtension.transactionId)@\(RFC3339.format(renewalExtension.expiresDate))"
        case .expired(let expiry):
            return Self.expiryKey(originalTransactionID: expiry.originalTransactionId, group: expiry.group,
                                  end: expiry.expiresDate)
        case .autoRenewChanged(let change):
            return "auto-renew:\(change.originalTransactionId):\(change.autoRenew ? "on" : "off"):\(RFC3339.format(change.effectiveDate))"
        case .billingIssue(let issue):
            return "billing-issue:\(issue.originalTransactionId):\(RFC3339.format(issue.effectiveDate))"
        case .transferredOut(let transfer):
            return "transfer-out:\(transfer.originalTransactionId):\(transfer.fromSubscriberId)>\(transfer.toSubscriberId)@\(transfer.afterPosition)"
        case .transferredIn(let transfer):
            return "transfer-in:\(transfer.originalTransactionId):\(transfer.fromSubscriberId)>\(transfer.toSubscriberId)@\(transfer.afterPosition)"
        case .deviceSeen(let device):
            return "device:" + device.deviceId
        case .reminderSent(let delivery):
            return "reminder-sent:" + delivery.reminderId
        case .reminderFailed(let delivery):
            return "reminder-failed:\(delivery.reminderId):\(delivery.attempt)"
        case .unknown:
            return nil
        }
    }

    static func expiryKey(originalTransactionID: String?, group: String, end: Date?) -> String {
        let end = end.map { "@" + RFC3339.format($0) } ?? ""
        if let originalTransactionID { return "expiry:" + originalTransactionID + end }
        return "expiry:" + group + end
    }

    /// Transaction ids this event records as known to the subscriber (so a
    /// restore or purchase of them again is a duplicate).
    var recordedTransactionIDs: [String] {
        switch self {
        case .purchased(let fact), .renewed(let fact), .restored(let fact): [fact.transactionId]
        case .transferredIn(let transfer): transfer.transaction.map { [$0.transactionId] } ?? []
        default: []
        }
    }

    /// When the fact took effect: purchase date, revocation date, change date...
    /// A state at an instant before it does not show it.
    public var effectiveDate: Date? {
        switch self {
        case .purchased(let fact), .renewed(let fact), .restored(let fact): fact.purchaseDate
        case .refunded(let refund): refund.revocationDate
        case .refundReversed(let reversal): reversal.date
        case .renewalExtended(let renewalExtension): renewalExtension.effectiveDate
        case .expired(let expiry): expiry.expiresDate
        case .autoRenewChanged(let change): change.effectiveDate
        case .billingIssue(let issue): issue.effectiveDate
        case .transferredOut(let transfer), .transferredIn(let transfer): transfer.date
        case .deviceSeen(let device): device.date
        case .reminderSent(let delivery), .reminderFailed(let delivery): delivery.date
        case .unknown: nil
        }
    }

    /// Where the fact came from (`api`, `import`, `appstore`, `subledger`).
    public var source: String? {
        switch self {
        case .purchased(let fact), .renewed(let fact), .restored(let fact): fact.source
        case .refunded(let refund): refund.source
        case .refundReversed(let reversal): reversal.source
        case .renewalExtended(let renewalExtension): renewalExtension.source
        case .expired(let expiry): expiry.source
        case .autoRenewChanged(let change): change.source
        case .billingIssue(let issue): issue.source
        case .transferredOut(let transfer), .transferredIn(let transfer): transfer.source
        case .deviceSeen(let device): device.source
        case .reminderSent(let delivery), .reminderFailed(let delivery): delivery.source
        case .unknown: nil
        }
    }

    /// The transaction the event is about, if any.
    public var transactionID: String? {
        switch self {
        case .purchased(let fact), .renewed(let fact), .restored(let fact): fact.transactionId
        case .refunded(let refund): refund.transactionId
        case .refundReversed(let reversal): reversal.transactionId
        case .renewalExtended(let renewalExtension): renewalExtension.transactionId
        case .transferredIn(let transfer): transfer.transaction?.transactionId
        default: nil
        }
    }

    /// The original transaction the event is about, if any.
    public var originalTransactionID: String? {
        switch self {
        case .purchased(let fact), .renewed(let fact), .restored(let fact): fact.originalTransactionId
        case .refunded(let refund): refund.originalTransactionId
        case .refundReversed(let reversal): reversal.originalTransactionId
        case .renewalExtended(let renewalExtension): renewalExtension.originalTransactionId
        case .expired(let expiry): expiry.originalTransactionId
        case .autoRenewChanged(let change): change.originalTransactionId
        case .billingIssue(let issue): issue.originalTransactionId
        case .transferredOut(let transfer), .transferredIn(let transfer): transfer.originalTransactionId
        default: nil
        }
    }
}

/// An event as stored: its position in the subscriber's stream and when it
/// was appended.
public struct RecordedLedgerEvent: Sendable, Hashable {
    public var position: Int64
    public var recordedAt: Date
    public var event: LedgerEvent

    public init(position: Int64, recordedAt: Date, event: LedgerEvent) {
        self.position = position
        self.recordedAt = recordedAt
        self.event = event
    }
}
