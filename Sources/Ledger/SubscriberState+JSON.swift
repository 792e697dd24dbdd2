import Foundation
import JSON

/// The contract's `<state>` JSON written by hand: the bytes
/// `LedgerJSON.makeEncoder()` writes for the same value (sorted keys, RFC
/// 3339 dates, explicit nulls, unescaped slashes), at a fraction of the
/// cost. Every read and write of a subscriber answers with one, and
/// Foundation's encoder (a tree of boxed values, sorted per object) was
/// the largest single cost of the service's own code in those requests.
/// Tests compare the two over generated states.
extension SubscriberState {
    /// The state as the contract's JSON.
    public func encodedJSON() -> [UInt8] {
        var writer = JSONBytes()
        writer.bytes.reserveCapacity(256 + 192 * (entitlements.count + subscriptions.count + nonRenewingPeriods.count
                                                   + purchases.count + devices.count + reminders.count))
        write(to: &writer)
        return writer.bytes
    }

    /// Appends the state's JSON to `writer`.
    public func write(to writer: inout JSONBytes) {
        writer.object {
            $0.date("at", at)
            $0.array("devices", devices) { writer, device in
                writer.object {
                    $0.date("firstSeenAt", device.firstSeenAt)
                    $0.string("id", device.id)
                }
            }
            $0.array("entitlements", entitlements) { writer, entitlement in
                writer.object {
                    $0.bool("active", entitlement.active)
                    $0.date("expiresAt", entitlement.expiresAt)
                    $0.string("id", entitlement.id)
                    $0.string("productId", entitlement.productID)
                    $0.string("source", entitlement.source)
                    $0.string("store", entitlement.store?.rawValue)
                }
            }
            $0.string("environment", environment.rawValue)
            $0.array("nonRenewingPeriods", nonRenewingPeriods) { writer, period in
                writer.object {
                    $0.date("end", period.end)
                    $0.string("group", period.group)
                    $0.string("productId", period.productID)
                    $0.date("start", period.start)
                    $0.string("transactionId", period.transactionID)
                }
            }
            $0.array("purchases", purchases) { writer, purchase in
                writer.object {
                    $0.string("originalTransactionId", purchase.originalTransactionID)
                    $0.string("productId", purchase.productID)
                    $0.date("purchaseDate", purchase.purchaseDate)
                    $0.integer("quantity", Int64(purchase.quantity))
                    $0.date("revokedAt", purchase.revokedAt)
                    $0.string("store", purchase.store.rawValue)
                    $0.string("transactionId", purchase.transactionID)
                    $0.string("type", purchase.type.rawValue)
                }
            }
            $0.array("reminders", reminders) { writer, reminder in
                writer.object {
                    $0.date("dueAt", reminder.dueAt)
                    $0.string("id", reminder.id)
                    $0.string("lead", reminder.lead.description)
                    $0.string("status", reminder.status.rawValue)
                }
            }
            $0.array("storeTransactions", storeTransactions) { writer, transaction in
                writer.object {
                    if let currency = transaction.currency { $0.string("currency", currency) }
                    if let isUpgraded = transaction.isUpgraded { $0.bool("isUpgraded", isUpgraded) }
                    if let offerDiscount = transaction.offerDiscount { $0.string("offerDiscount", offerDiscount) }
                    if let offerType = transaction.offerType { $0.integer("offerType", Int64(offerType)) }
                    $0.string("originalTransactionId", transaction.originalTransactionID)
                    if let ownershipType = transaction.ownershipType { $0.string("ownershipType", ownershipType) }
                    if let price = transaction.price { $0.string("price", price) }
                    $0.string("productId", transaction.productID)
                    if let percentage = transaction.revocationPercentage { $0.integer("revocationPercentage", Int64(percentage)) }
                    if let reason = transaction.revocationReason { $0.integer("revocationReason", Int64(reason)) }
                    if let type = transaction.revocationType { $0.string("revocationType", type) }
                    if let revokedAt = transaction.revokedAt { $0.date("revokedAt", revokedAt) }
                    if let storefront = transaction.storefront { $0.string("storefront", storefront) }
                    $0.string("transactionId", transaction.transactionID)
                    if let line = transaction.webOrderLineItemID { $0.string("webOrderLineItemId", line) }
                }
            }
            $0.string("subscriberId", subscriberID)
            $0.array("subscriptions", subscriptions) { writer, subscription in
                writer.object {
                    $0.bool("autoRenew", subscription.autoRenew)
                    $0.date("expiresAt", subscription.expiresAt)
                    $0.string("group", subscription.group)
                    $0.string("originalTransactionId", subscription.originalTransactionID)
                    $0.string("productId", subscription.productID)
                    $0.string("status", subscription.status.rawValue)
                    $0.string("store", subscription.store.rawValue)
                    $0.string("type", subscription.type.rawValue)
                }
            }
        }
    }
}

/// Compact JSON appended to a byte array, escaped as Foundation's
/// `JSONEncoder` escapes with `.withoutEscapingSlashes`; the caller writes
/// an object's keys in sorted order.
public struct JSONBytes: Sendable {
    public var bytes: [UInt8] = []
    /// Whether the next member or element needs a comma before it.
    private var needsComma = false

    public init() {}

    /// `{…}`, with `body` writing its members.
    public mutating func object(_ body: (inout JSONBytes) -> Void) {
        separate()
        bytes.append(UInt8(ascii: "{"))
        needsComma = false
        body(&self)
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
    }

    /// A member whose value `body` writes (an object, say).
    public mutating func member(_ key: StaticString, _ body: (inout JSONBytes) -> Void) {
        self.key(key)
        body(&self)
        needsComma = true
    }

    /// A member holding `[…]` of `elements`, each written by `element`.
    public mutating func array<Element>(_ key: StaticString, _ elements: [Element], _ element: (inout JSONBytes, Element) -> Void) {
        self.key(key)
        bytes.append(UInt8(ascii: "["))
        for value in elements { element(&self, value) }
        bytes.append(UInt8(ascii: "]"))
        needsComma = true
    }

    public mutating func string(_ key: StaticString, _ value: String) {
        self.key(key)
        quoted(value)
        needsComma = true
    }

    /// A string, or `null`.
    public mutating func string(_ key: StaticString, _ value: String?) {
        guard let value else {
            self.key(key)
            return append("null")
        }
        string(key, value)
    }

    /// A member holding any JSON value as `LedgerJSON.makeEncoder()` writes
    /// it: an object's keys in the order of their UTF-8 bytes (as its
    /// `.sortedKeys` sorts them), integers in decimal, other numbers as
    /// `JSONEncoder` writes a `Double` (a number that is not finite, which
    /// no JSON document holds, as `null`).
    public mutating func json(_ key: StaticString, _ value: JSONValue) {
        self.key(key)
        write(value)
        needsComma = true
    }

    private mutating func write(_ value: JSONValue) {
        switch value {
        case .null:
            append("null")
        case .bool(let value):
            append(value ? "true" : "false")
        case .integer(let value):
            bytes.append(contentsOf: String(value).utf8)
        case .number(let value):
            if value.isFinite, let encoded = try? JSONEncoder().encode(value) {
                bytes.append(contentsOf: encoded)
            } else {
                append("null")
            }
        case .string(let value):
            quoted(value)
        case .array(let elements):
            bytes.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                write(element)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            let sorted = members.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
            for (index, member) in sorted.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                quoted(member.key)
                bytes.append(UInt8(ascii: ":"))
                write(member.value)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    /// `value` in quotes, escaped as `JSONEncoder` escapes it.
    private mutating func quoted(_ value: String) {
        JSONStringLiteral.append(value, to: &bytes)
    }

    public mutating func bool(_ key: StaticString, _ value: Bool) {
        self.key(key)
        append(value ? "true" : "false")
    }

    public mutating func integer(_ key: StaticString, _ value: Int64) {
        self.key(key)
        bytes.append(contentsOf: String(value).utf8)
        needsComma = true
    }

    /// An RFC 3339 string (`RFC3339.format`), or `null`.
    public mutating func date(_ key: StaticString, _ value: Date?) {
        self.key(key)
        guard let value else { return append("null") }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: RFC3339.format(value).utf8)
        bytes.append(UInt8(ascii: "\""))
        needsComma = true
    }

    private mutating func key(_ name: StaticString) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        append(name)
        bytes.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
        needsComma = false
    }

    private mutating func append(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
        needsComma = true
    }

    private mutating func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
    }
}
