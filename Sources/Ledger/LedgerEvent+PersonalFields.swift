import Foundation

// Which fields of a stored event name a person. Erasure by crypto-shredding
// seals exactly these with the subscriber's key before they are stored, so
// destroying the key leaves them unreadable while every field the rules and
// the read models count (products, dates, transactions, environments) stays
// readable in the append-only log (docs/decisions/0004-erasure-by-crypto-shredding.md).

extension LedgerEvent {
    /// The event with each personal field passed through `transform`: the
    /// device id of a purchase, renewal, restore or `device_seen`; both
    /// subscriber ids of a transfer (and the device id of the transaction it
    /// carries); the id of a reminder delivery, which embeds the subscriber
    /// id. Every other field, and an event of an unknown type, is unchanged.
    public func mappingPersonalFields(_ transform: (String) throws -> String) rethrows -> LedgerEvent {
        switch self {
        case .purchased(let fact): return .purchased(try fact.mappingPersonalFields(transform))
        case .renewed(let fact): return .renewed(try fact.mappingPersonalFields(transform))
        case .restored(let fact): return .restored(try fact.mappingPersonalFields(transform))
        case .transferredOut(let transfer): return .transferredOut(try transfer.mappingPersonalFields(transform))
        case .transferredIn(let transfer): return .transferredIn(try transfer.mappingPersonalFields(transform))
        case .deviceSeen(var device):
            device.deviceID = try transform(device.deviceID)
            return .deviceSeen(device)
        case .reminderSent(var delivery):
            delivery.reminderID = try transform(delivery.reminderID)
            return .reminderSent(delivery)
        case .reminderFailed(var delivery):
            delivery.reminderID = try transform(delivery.reminderID)
            return .reminderFailed(delivery)
        // A purchase token names a purchase, as a transaction id does, not a person.
        case .refunded, .refundReversed, .renewalExtended, .expired, .autoRenewChanged, .billingIssue, .granted, .grantRevoked, .erased,
             .googlePlayPurchase, .googlePlayVoided, .unknown:
            return self
        }
    }

    /// Whether any field `mappingPersonalFields` passes on is present (a
    /// switch, not a mapping: the write and read paths ask it of every event).
    public var hasPersonalFields: Bool {
        switch self {
        case .purchased(let fact), .renewed(let fact), .restored(let fact): fact.deviceID != nil
        case .transferredOut, .transferredIn, .deviceSeen, .reminderSent, .reminderFailed: true
        case .refunded, .refundReversed, .renewalExtended, .expired, .autoRenewChanged, .billingIssue, .granted, .grantRevoked, .erased,
             .googlePlayPurchase, .googlePlayVoided, .unknown:
            false
        }
    }
}

extension LedgerEvent {
    /// The device ids the event names (a purchase's, renewal's or
    /// restore's, `device_seen`'s, a transfer's transaction's).
    public var deviceIDs: [String] {
        switch self {
        case .purchased(let fact), .renewed(let fact), .restored(let fact): fact.deviceID.map { [$0] } ?? []
        case .transferredOut(let transfer), .transferredIn(let transfer): transfer.transaction?.deviceID.map { [$0] } ?? []
        case .deviceSeen(let device): [device.deviceID]
        default: []
        }
    }
}

extension TransactionFact {
    func mappingPersonalFields(_ transform: (String) throws -> String) rethrows -> TransactionFact {
        var fact = self
        fact.deviceID = try deviceID.map(transform)
        return fact
    }
}

extension TransferFact {
    func mappingPersonalFields(_ transform: (String) throws -> String) rethrows -> TransferFact {
        var transfer = self
        transfer.fromSubscriberID = try transform(fromSubscriberID)
        transfer.toSubscriberID = try transform(toSubscriberID)
        transfer.transaction = try transaction?.mappingPersonalFields(transform)
        return transfer
    }
}
