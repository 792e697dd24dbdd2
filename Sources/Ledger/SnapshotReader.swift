import Foundation

/// Reads what `SnapshotWriter` wrote (`SubscriberLedger+Snapshot.swift`):
/// anything short or out of range throws, so a damaged snapshot is ignored
/// and replaced, never misread.
struct SnapshotReader {
    let bytes: [UInt8]
    var offset = 0

    var isAtEnd: Bool { offset == bytes.count }

    mutating func int() throws -> Int64 {
        guard offset + 8 <= bytes.count else { throw SnapshotError(reason: "truncated") }
        var value: UInt64 = 0
        for index in 0..<8 { value |= UInt64(bytes[offset + index]) << (8 * UInt64(index)) }
        offset += 8
        return Int64(bitPattern: value)
    }

    mutating func count() throws -> Int {
        let value = try int()
        guard value >= 0, value <= bytes.count - offset else { throw SnapshotError(reason: "bad length") }
        return Int(value)
    }

    mutating func bool() throws -> Bool {
        guard offset < bytes.count else { throw SnapshotError(reason: "truncated") }
        defer { offset += 1 }
        return bytes[offset] != 0
    }

    mutating func date() throws -> Date {
        Date(timeIntervalSince1970: Double(bitPattern: UInt64(bitPattern: try int())))
    }

    mutating func string() throws -> String {
        let length = try count()
        guard offset + length <= bytes.count else { throw SnapshotError(reason: "truncated string") }
        defer { offset += length }
        return String(decoding: bytes[offset..<(offset + length)], as: UTF8.self)
    }

    mutating func optional<T>(_ read: (inout SnapshotReader) throws -> T) throws -> T? {
        try bool() ? try read(&self) : nil
    }

    mutating func array<T>(_ read: (inout SnapshotReader) throws -> T) throws -> [T] {
        let count = try count()
        var values: [T] = []
        values.reserveCapacity(count)
        for _ in 0..<count { values.append(try read(&self)) }
        return values
    }

    mutating func dictionary<T>(_ read: (inout SnapshotReader) throws -> T) throws -> [String: T] {
        let count = try count()
        var values: [String: T] = [:]
        values.reserveCapacity(count)
        for _ in 0..<count {
            let key = try string()
            values[key] = try read(&self)
        }
        return values
    }

    mutating func dated<T>(_ read: (inout SnapshotReader) throws -> T) throws -> SubscriberLedger.Dated<T> {
        SubscriberLedger.Dated(date: try date(), position: try int(), value: try read(&self))
    }

    mutating func duration() throws -> ISODuration {
        ISODuration(years: Int(try int()), months: Int(try int()), weeks: Int(try int()), days: Int(try int()))
    }

    mutating func environment() throws -> Environment {
        let text = try string()
        guard let environment = Environment(rawValue: text) else { throw SnapshotError(reason: "unknown environment \(text)") }
        return environment
    }

    mutating func productType() throws -> ProductType {
        let text = try string()
        guard let type = ProductType(rawValue: text) else { throw SnapshotError(reason: "unknown product type \(text)") }
        return type
    }

    mutating func transaction() throws -> TransactionFact {
        TransactionFact(
            transactionID: try string(), originalTransactionID: try string(), productID: try string(),
            productType: try optional { try $0.productType() }, group: try optional { try $0.string() },
            duration: try optional { try $0.duration() }, purchaseDate: try date(), expiresDate: try optional { try $0.date() },
            quantity: Int(try int()), autoRenew: try optional { try $0.bool() }, deviceID: try optional { try $0.string() },
            environment: try environment(), source: try string(),
            details: AppleTransactionDetails(ownershipType: try optional { try $0.string() },
                                             offerType: try optional { Int(try $0.int()) },
                                             webOrderLineItemID: try optional { try $0.string() },
                                             isUpgraded: try optional { try $0.bool() }, sale: try sale()))
    }

    mutating func sale() throws -> SaleTerms {
        SaleTerms(price: try optional { Amount(micros: try $0.int()) }, currency: try optional { try $0.string() },
                  offerDiscount: try optional { try $0.offerDiscount() }, storefront: try optional { try $0.string() })
    }

    mutating func offerDiscount() throws -> OfferDiscount {
        let text = try string()
        guard let discount = OfferDiscount(rawValue: text) else { throw SnapshotError(reason: "unknown offer discount \(text)") }
        return discount
    }

    mutating func refund() throws -> RefundFact {
        RefundFact(transactionID: try string(), originalTransactionID: try string(), productID: try string(),
                   revocationDate: try date(), reason: try optional { try $0.string() }, environment: try environment(),
                   source: try string(),
                   details: AppleRevocationDetails(revocationReason: try optional { Int(try $0.int()) },
                                                   revocationType: try optional { try $0.string() },
                                                   revocationPercentage: try optional { Int(try $0.int()) }))
    }

    mutating func reversal() throws -> RefundReversal {
        RefundReversal(transactionID: try string(), originalTransactionID: try string(), productID: try string(),
                       date: try date(), reason: try optional { try $0.string() }, environment: try environment(),
                       source: try string())
    }

    mutating func billingIssue() throws -> BillingIssue {
        BillingIssue(originalTransactionID: try string(), productID: try optional { try $0.string() },
                     effectiveDate: try date(), gracePeriodExpiresDate: try optional { try $0.date() },
                     environment: try environment(), source: try string())
    }

    mutating func expiry() throws -> ExpiryFact {
        ExpiryFact(originalTransactionID: try optional { try $0.string() }, group: try string(),
                   productID: try optional { try $0.string() }, expiresDate: try date(),
                   reason: try optional { try $0.string() }, environment: try environment(), source: try string())
    }

    mutating func delivery() throws -> ReminderDelivery {
        let id = try string()
        let typeText = try string()
        guard let type = ReminderType(rawValue: typeText) else { throw SnapshotError(reason: "unknown reminder type \(typeText)") }
        return ReminderDelivery(reminderID: id, type: type, group: try string(), productID: try string(), expiresAt: try date(),
                                lead: try duration(), dueAt: try date(), date: try date(), attempt: Int(try int()),
                                error: try optional { try $0.string() }, source: try string())
    }

    mutating func actor() throws -> ActorStamp {
        ActorStamp(role: try string(), keyFingerprint: try string(), actor: try optional { try $0.string() })
    }

    mutating func grant() throws -> SupportGrant {
        SupportGrant(grantID: try string(), entitlement: try string(), startsAt: try date(), endsAt: try date(),
                     reason: try string(), grantedBy: try actor(), source: try string())
    }

    mutating func grantRevocation() throws -> GrantRevocation {
        GrantRevocation(grantID: try string(), date: try date(), reason: try optional { try $0.string() },
                        revokedBy: try actor(), source: try string())
    }
}
