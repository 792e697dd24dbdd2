import Foundation

/// A compact binary form of a ledger, stored as a snapshot beside the
/// stream: decoding it and applying the events after it gives the ledger that
/// folding the whole stream gives, at a fraction of the cost of reading and
/// decoding every event (a ledger of 10,000 renewals is about a megabyte and
/// decodes in milliseconds; JSON would be three times the size and ten times
/// slower to read).
///
/// Little-endian integers, dates as the bits of their `timeIntervalSince1970`
/// (exact), strings as a length and UTF-8. `snapshotFormat` names the layout:
/// a snapshot of another format is ignored (and replaced), never misread.
extension SubscriberLedger {
    /// The layout this build writes and reads.
    public static let snapshotFormat = 3

    public func snapshotData() -> Data {
        var out = SnapshotWriter()
        out.string(subscriberID)
        out.int(lastPosition)
        out.dictionary(keyPositions) { $0.int($1) }
        out.dictionary(transactions) { out, record in
            out.transaction(record.fact)
            out.int(record.position)
            out.date(record.visibleFrom)
        }
        out.dictionary(refunds) { $0.array($1) { $0.dated($1) { $0.refund($1) } } }
        out.dictionary(refundReversals) { $0.array($1) { $0.dated($1) { $0.reversal($1) } } }
        out.dictionary(extensions) { $0.array($1) { $0.dated($1) { $0.date($1) } } }
        out.dictionary(ownership) { $0.array($1) { $0.dated($1) { $0.bool($1) } } }
        out.dictionary(autoRenewChanges) { $0.array($1) { $0.dated($1) { $0.bool($1) } } }
        out.dictionary(billingIssues) { $0.array($1) { $0.dated($1) { $0.billingIssue($1) } } }
        out.dictionary(storeExpiries) { $0.array($1) { $0.dated($1) { $0.expiry($1) } } }
        out.dictionary(devices) { $0.dated($1) { $0.string($1) } }
        out.dictionary(remindersSent) { $0.dated($1) { $0.delivery($1) } }
        // Support grants come last, and only when there are any: a snapshot
        // without them is the same bytes as before grants existed.
        // Google Play's facts follow them the same way (after the grants'
        // section, written empty when there are Play facts but no grants).
        let hasPlay = !playPurchases.isEmpty || !playVoids.isEmpty
        if !supportGrants.isEmpty || !grantRevocations.isEmpty || hasPlay {
            out.dictionary(supportGrants) { $0.dated($1) { $0.grant($1) } }
            out.dictionary(grantRevocations) { $0.dated($1) { $0.grantRevocation($1) } }
        }
        if hasPlay {
            out.dictionary(playPurchases) { $0.array($1) { $0.dated($1) { $0.playPurchase($1) } } }
            out.dictionary(playVoids) { $0.dated($1) { $0.playVoid($1) } }
        }
        return Data(out.bytes)
    }

    /// Decodes `snapshotData()`; throws on anything else.
    public init(snapshot data: Data) throws {
        var input = SnapshotReader(bytes: [UInt8](data))
        self.init(subscriberID: try input.string())
        lastPosition = try input.int()
        keyPositions = try input.dictionary { try $0.int() }
        transactions = try input.dictionary { input in
            TransactionRecord(fact: try input.transaction(), position: try input.int(), visibleFrom: try input.date())
        }
        byOriginal = OriginalIndex(transactions)
        refunds = try input.dictionary { try $0.array { try $0.dated { try $0.refund() } } }
        refundReversals = try input.dictionary { try $0.array { try $0.dated { try $0.reversal() } } }
        extensions = try input.dictionary { try $0.array { try $0.dated { try $0.date() } } }
        ownership = try input.dictionary { try $0.array { try $0.dated { try $0.bool() } } }
        autoRenewChanges = try input.dictionary { try $0.array { try $0.dated { try $0.bool() } } }
        billingIssues = try input.dictionary { try $0.array { try $0.dated { try $0.billingIssue() } } }
        storeExpiries = try input.dictionary { try $0.array { try $0.dated { try $0.expiry() } } }
        devices = try input.dictionary { try $0.dated { try $0.string() } }
        remindersSent = try input.dictionary { try $0.dated { try $0.delivery() } }
        if !input.isAtEnd {
            supportGrants = try input.dictionary { try $0.dated { try $0.grant() } }
            grantRevocations = try input.dictionary { try $0.dated { try $0.grantRevocation() } }
        }
        if !input.isAtEnd {
            playPurchases = try input.dictionary { try $0.array { try $0.dated { try $0.playPurchase() } } }
            playVoids = try input.dictionary { try $0.dated { try $0.playVoid() } }
        }
        guard input.isAtEnd else { throw SnapshotError(reason: "trailing bytes") }
    }
}

/// A snapshot that cannot be read (another layout, or damaged).
public struct SnapshotError: Error, Sendable, CustomStringConvertible {
    public var reason: String
    public var description: String { "unreadable ledger snapshot: \(reason)" }
}

struct SnapshotWriter {
    var bytes: [UInt8] = []

    mutating func int(_ value: Int64) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func int(_ value: Int) { int(Int64(value)) }
    mutating func bool(_ value: Bool) { bytes.append(value ? 1 : 0) }
    mutating func date(_ value: Date) { int(Int64(bitPattern: value.timeIntervalSince1970.bitPattern)) }

    mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            int(utf8.count)
            bytes.append(contentsOf: utf8)
        }
    }

    mutating func optional<T>(_ value: T?, _ write: (inout SnapshotWriter, T) -> Void) {
        bool(value != nil)
        if let value { write(&self, value) }
    }

    mutating func array<T>(_ values: [T], _ write: (inout SnapshotWriter, T) -> Void) {
        int(values.count)
        for value in values { write(&self, value) }
    }

    /// Keys in sorted order, so equal ledgers give equal bytes.
    mutating func dictionary<T>(_ values: [String: T], _ write: (inout SnapshotWriter, T) -> Void) {
        int(values.count)
        for key in values.keys.sorted() {
            string(key)
            write(&self, values[key]!)
        }
    }

    mutating func dated<T>(_ value: SubscriberLedger.Dated<T>, _ write: (inout SnapshotWriter, T) -> Void) {
        date(value.date)
        int(value.position)
        write(&self, value.value)
    }

    mutating func duration(_ value: ISODuration) {
        for part in [value.years, value.months, value.weeks, value.days] { int(part) }
    }

    mutating func environment(_ value: Environment) { string(value.rawValue) }

    mutating func transaction(_ fact: TransactionFact) {
        string(fact.transactionID)
        string(fact.originalTransactionID)
        string(fact.productID)
        optional(fact.productType) { $0.string($1.rawValue) }
        optional(fact.group) { $0.string($1) }
        optional(fact.duration) { $0.duration($1) }
        date(fact.purchaseDate)
        optional(fact.expiresDate) { $0.date($1) }
        int(fact.quantity)
        optional(fact.autoRenew) { $0.bool($1) }
        optional(fact.deviceID) { $0.string($1) }
        environment(fact.environment)
        string(fact.source)
        optional(fact.details.ownershipType) { $0.string($1) }
        optional(fact.details.offerType) { $0.int($1) }
        optional(fact.details.webOrderLineItemID) { $0.string($1) }
        optional(fact.details.isUpgraded) { $0.bool($1) }
        // Format 3: the sale terms.
        sale(fact.details.sale)
    }

    /// A sale's four optional parts (a transaction's, a Play purchase's).
    mutating func sale(_ sale: SaleTerms) {
        optional(sale.price) { $0.int($1.micros) }
        optional(sale.currency) { $0.string($1) }
        optional(sale.offerDiscount) { $0.string($1.rawValue) }
        optional(sale.storefront) { $0.string($1) }
    }

    mutating func refund(_ fact: RefundFact) {
        string(fact.transactionID)
        string(fact.originalTransactionID)
        string(fact.productID)
        date(fact.revocationDate)
        optional(fact.reason) { $0.string($1) }
        environment(fact.environment)
        string(fact.source)
        optional(fact.details.revocationReason) { $0.int($1) }
        optional(fact.details.revocationType) { $0.string($1) }
        optional(fact.details.revocationPercentage) { $0.int($1) }
    }

    mutating func reversal(_ fact: RefundReversal) {
        string(fact.transactionID)
        string(fact.originalTransactionID)
        string(fact.productID)
        date(fact.date)
        optional(fact.reason) { $0.string($1) }
        environment(fact.environment)
        string(fact.source)
    }

    mutating func billingIssue(_ fact: BillingIssue) {
        string(fact.originalTransactionID)
        optional(fact.productID) { $0.string($1) }
        date(fact.effectiveDate)
        optional(fact.gracePeriodExpiresDate) { $0.date($1) }
        environment(fact.environment)
        string(fact.source)
    }

    mutating func expiry(_ fact: ExpiryFact) {
        optional(fact.originalTransactionID) { $0.string($1) }
        string(fact.group)
        optional(fact.productID) { $0.string($1) }
        date(fact.expiresDate)
        optional(fact.reason) { $0.string($1) }
        environment(fact.environment)
        string(fact.source)
    }

    mutating func actor(_ stamp: ActorStamp) {
        string(stamp.role)
        string(stamp.keyFingerprint)
        optional(stamp.actor) { $0.string($1) }
    }

    mutating func grant(_ fact: SupportGrant) {
        string(fact.grantID)
        string(fact.entitlement)
        date(fact.startsAt)
        date(fact.endsAt)
        string(fact.reason)
        actor(fact.grantedBy)
        string(fact.source)
    }

    mutating func grantRevocation(_ fact: GrantRevocation) {
        string(fact.grantID)
        date(fact.date)
        optional(fact.reason) { $0.string($1) }
        actor(fact.revokedBy)
        string(fact.source)
    }

    mutating func delivery(_ fact: ReminderDelivery) {
        string(fact.reminderID)
        string(fact.type.rawValue)
        string(fact.group)
        string(fact.productID)
        date(fact.expiresAt)
        duration(fact.lead)
        date(fact.dueAt)
        date(fact.date)
        int(fact.attempt)
        optional(fact.error) { $0.string($1) }
        string(fact.source)
    }
}
