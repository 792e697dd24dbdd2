import Foundation

/// The stored name of every event type this build knows: snake_case past
/// tense. The one table of names: encoding (`LedgerEvent.type`) and decoding
/// (`LedgerEvent.decode(type:schemaVersion:data:)`) both go through it.
public enum LedgerEventType: String, Sendable, Hashable, CaseIterable {
    case purchased
    case renewed
    case restored
    case refunded
    case refundReversed = "refund_reversed"
    case renewalExtended = "renewal_extended"
    case expired
    case autoRenewChanged = "auto_renew_changed"
    case billingIssue = "billing_issue"
    case transferredOut = "transferred_out"
    case transferredIn = "transferred_in"
    case deviceSeen = "device_seen"
    case reminderSent = "reminder_sent"
    case reminderFailed = "reminder_failed"
    case granted
    case grantRevoked = "grant_revoked"
    case erased
    case googlePlayPurchase = "google_play_purchase"
    case googlePlayVoided = "google_play_voided"
}

/// A fact in a subscriber's stream (its stored forms: `stored()`).
/// Types this build does not know decode as `.unknown` and are ignored by
/// the fold.
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
    /// An entitlement given by hand (support, `POST …/grants`).
    case granted(SupportGrant)
    case grantRevoked(GrantRevocation)
    /// The last event of an erased subscriber's stream
    /// (`DELETE /v1/subscribers/{id}`): its key was destroyed with it.
    case erased(SubscriberErasure)
    /// What Google Play said about a purchase token when it was fetched.
    case googlePlayPurchase(GooglePlayPurchase)
    /// Google Play voided a purchase (refund, chargeback, revocation).
    case googlePlayVoided(GooglePlayVoid)
    case unknown(type: String, schemaVersion: Int, data: Data)

    /// The schema version of every known type's JSON object (`encodedData`,
    /// what the API shows). The log stores the transaction facts as records,
    /// at version 2 (`stored()`).
    public static let currentSchemaVersion = 1

    /// The event's type; nil for `.unknown`.
    public var knownType: LedgerEventType? {
        switch self {
        case .purchased: .purchased
        case .renewed: .renewed
        case .restored: .restored
        case .refunded: .refunded
        case .refundReversed: .refundReversed
        case .renewalExtended: .renewalExtended
        case .expired: .expired
        case .autoRenewChanged: .autoRenewChanged
        case .billingIssue: .billingIssue
        case .transferredOut: .transferredOut
        case .transferredIn: .transferredIn
        case .deviceSeen: .deviceSeen
        case .reminderSent: .reminderSent
        case .reminderFailed: .reminderFailed
        case .granted: .granted
        case .grantRevoked: .grantRevoked
        case .erased: .erased
        case .googlePlayPurchase: .googlePlayPurchase
        case .googlePlayVoided: .googlePlayVoided
        case .unknown: nil
        }
    }

    /// The stored type name, e.g. `purchased`.
    public var type: String {
        if case .unknown(let type, _, _) = self { return type }
        return knownType?.rawValue ?? ""
    }

    public var schemaVersion: Int {
        if case .unknown(_, let version, _) = self { return version }
        return Self.currentSchemaVersion
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
