import Foundation

/// A stored event whose data does not decode as its known type says.
public struct LedgerEventDecodingError: Error, Sendable, CustomStringConvertible {
    public let type: String
    public let schemaVersion: Int
    public let detail: String

    public var description: String { "cannot decode \(type) v\(schemaVersion) event: \(detail)" }
}

extension LedgerEvent {
    /// The event's data as a JSON object (the payload; type and version are
    /// stored beside it).
    public func encodedData() throws -> Data {
        // Only the types without a hand-written encoding build an encoder.
        func encoded(_ payload: some Encodable) throws -> Data { try LedgerJSON.makeEncoder().encode(payload) }
        switch self {
        case .purchased(let fact), .renewed(let fact), .restored(let fact): return fact.storedJSON()
        case .refunded(let refund): return try encoded(refund)
        case .refundReversed(let reversal): return try encoded(reversal)
        case .renewalExtended(let renewalExtension): return try encoded(renewalExtension)
        case .expired(let expiry): return try encoded(expiry)
        case .autoRenewChanged(let change): return try encoded(change)
        case .billingIssue(let issue): return try encoded(issue)
        case .transferredOut(let transfer), .transferredIn(let transfer): return try encoded(transfer)
        case .deviceSeen(let device): return try encoded(device)
        case .reminderSent(let delivery), .reminderFailed(let delivery): return try encoded(delivery)
        case .granted(let grant): return try encoded(grant)
        case .grantRevoked(let revocation): return try encoded(revocation)
        case .erased(let erasure): return try encoded(erasure)
        case .googlePlayPurchase(let purchase): return try encoded(purchase)
        case .googlePlayVoided(let void): return try encoded(void)
        case .unknown(_, _, let data): return data
        }
    }

    /// The event as the log stores it: its schema version and data. The
    /// transaction facts (most of a log) are records (`storedRecord`, schema
    /// version 2); every other type is stored as `encodedData()`, at version 1.
    public func stored() throws -> (schemaVersion: Int, data: Data) {
        switch self {
        case .purchased(let fact), .renewed(let fact), .restored(let fact):
            return (LedgerEventType.recordSchemaVersion, fact.storedRecord())
        default:
            return (schemaVersion, try encodedData())
        }
    }

    /// Decodes a stored event. Unknown types, and versions newer than this
    /// build knows, become `.unknown` (kept, shown, ignored by the fold);
    /// a known type whose data does not decode throws.
    public static func decode(type: String, schemaVersion: Int, data: Data) throws -> LedgerEvent {
        guard let known = LedgerEventType(rawValue: type), schemaVersion <= known.newestSchemaVersion else {
            return .unknown(type: type, schemaVersion: schemaVersion, data: data)
        }
        if schemaVersion >= LedgerEventType.recordSchemaVersion {
            return try data.withUnsafeBytes { try known.event(recordPayload: $0, schemaVersion: schemaVersion) }
        }
        let decoder = LedgerJSON.makeDecoder()
        func payload<T: Decodable>(_: T.Type) throws -> T {
            do {
                return try decoder.decode(T.self, from: data)
            } catch {
                throw LedgerEventDecodingError(type: type, schemaVersion: schemaVersion, detail: "\(error)")
            }
        }
        switch known {
        case .purchased: return .purchased(try payload(TransactionFact.self))
        case .renewed: return .renewed(try payload(TransactionFact.self))
        case .restored: return .restored(try payload(TransactionFact.self))
        case .refunded: return .refunded(try payload(RefundFact.self))
        case .refundReversed: return .refundReversed(try payload(RefundReversal.self))
        case .renewalExtended: return .renewalExtended(try payload(RenewalExtension.self))
        case .expired: return .expired(try payload(ExpiryFact.self))
        case .autoRenewChanged: return .autoRenewChanged(try payload(AutoRenewChange.self))
        case .billingIssue: return .billingIssue(try payload(BillingIssue.self))
        case .transferredOut: return .transferredOut(try payload(TransferFact.self))
        case .transferredIn: return .transferredIn(try payload(TransferFact.self))
        case .deviceSeen: return .deviceSeen(try payload(DeviceSeen.self))
        case .reminderSent: return .reminderSent(try payload(ReminderDelivery.self))
        case .reminderFailed: return .reminderFailed(try payload(ReminderDelivery.self))
        case .granted: return .granted(try payload(SupportGrant.self))
        case .grantRevoked: return .grantRevoked(try payload(GrantRevocation.self))
        case .erased: return .erased(try payload(SubscriberErasure.self))
        case .googlePlayPurchase: return .googlePlayPurchase(try payload(GooglePlayPurchase.self))
        case .googlePlayVoided: return .googlePlayVoided(try payload(GooglePlayVoid.self))
        }
    }
}

extension LedgerEventType {
    /// The schema version of the transaction facts stored as records.
    public static let recordSchemaVersion = 2

    /// The newest schema version of the type this build reads; a newer one
    /// decodes as `.unknown`.
    public var newestSchemaVersion: Int {
        switch self {
        case .purchased, .renewed, .restored: Self.recordSchemaVersion
        default: LedgerEvent.currentSchemaVersion
        }
    }

    /// The event of a payload in record form (only the transaction facts
    /// have one); a payload that is not such a record is an error.
    func event(recordPayload payload: UnsafeRawBufferPointer, schemaVersion: Int) throws -> LedgerEvent {
        guard let fact = StoredPayloadParser.transactionRecord(payload: payload) else {
            throw LedgerEventDecodingError(type: rawValue, schemaVersion: schemaVersion, detail: "not a transaction record")
        }
        switch self {
        case .purchased: return .purchased(fact)
        case .renewed: return .renewed(fact)
        case .restored: return .restored(fact)
        default: throw LedgerEventDecodingError(type: rawValue, schemaVersion: schemaVersion, detail: "the type has no record form")
        }
    }
}
