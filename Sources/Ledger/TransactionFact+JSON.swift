import Foundation

extension TransactionFact {
    /// The stored JSON of the fact, written directly: byte for byte what
    /// `LedgerJSON.makeEncoder()` writes (sorted keys, absent optionals left
    /// out, RFC 3339 instants), which `TransactionFactJSONTests` checks on
    /// generated facts. Purchases and renewals are most of what a ledger
    /// appends, and the encoder's containers and boxing cost several times
    /// what the bytes do.
    public func storedJSON() -> Data {
        var writer = JSONObjectWriter()
        writer.reserve(256 + transactionID.utf8.count + originalTransactionID.utf8.count + productID.utf8.count)
        if let autoRenew { writer.field("autoRenew") { $0.append(autoRenew) } }
        if let deviceID { writer.field("deviceId") { $0.append(deviceID) } }
        if let duration { writer.field("duration") { $0.append(duration.description) } }
        writer.field("environment") { $0.append(environment.rawValue) }
        if let expiresDate { writer.field("expiresDate") { $0.append(RFC3339.format(expiresDate)) } }
        if let group { writer.field("group") { $0.append(group) } }
        writer.field("originalTransactionId") { $0.append(originalTransactionID) }
        writer.field("productId") { $0.append(productID) }
        if let productType { writer.field("productType") { $0.append(productType.rawValue) } }
        writer.field("purchaseDate") { $0.append(RFC3339.format(purchaseDate)) }
        writer.field("quantity") { $0.append(quantity) }
        writer.field("source") { $0.append(source) }
        writer.field("transactionId") { $0.append(transactionID) }
        return writer.finish()
    }
}

/// Writes one JSON object's bytes, fields in the order given, the way
/// Foundation's `JSONEncoder` writes them with `.withoutEscapingSlashes`.
struct JSONObjectWriter {
    private var out = JSONValueBytes(bytes: [UInt8(ascii: "{")])

    mutating func reserve(_ count: Int) { out.bytes.reserveCapacity(count) }

    /// Writes `"name":` (after a comma when a field came before) and the value `body` writes.
    mutating func field(_ name: StaticString, _ body: (inout JSONValueBytes) -> Void) {
        if out.bytes.count > 1 { out.bytes.append(UInt8(ascii: ",")) }
        out.bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { out.bytes.append(contentsOf: $0) }
        out.bytes.append(UInt8(ascii: "\""))
        out.bytes.append(UInt8(ascii: ":"))
        body(&out)
    }

    mutating func finish() -> Data {
        out.bytes.append(UInt8(ascii: "}"))
        return Data(out.bytes)
    }
}

/// One JSON value's bytes, appended to what came before.
struct JSONValueBytes {
    var bytes: [UInt8]

    mutating func append(_ value: Bool) {
        let text: StaticString = value ? "true" : "false"
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    mutating func append(_ value: Int) {
        bytes.append(contentsOf: String(value).utf8)
    }

    /// A string literal: `"` and `\` escaped, control characters as their
    /// short escapes or `\u00XX`, everything else (`/` too) as it is.
    mutating func append(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        if !value.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            bytes.append(contentsOf: value.utf8)
            bytes.append(UInt8(ascii: "\""))
            return
        }
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(UInt8(ascii: "\\")); bytes.append(byte)
            case UInt8(ascii: "\\"): bytes.append(UInt8(ascii: "\\")); bytes.append(byte)
            case 0x08: bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "b"))
            case 0x0C: bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "f"))
            case 0x0A: bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "n"))
            case 0x0D: bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "r"))
            case 0x09: bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "t"))
            case ..<0x20:
                let hex: StaticString = "0123456789abcdef"
                bytes.append(UInt8(ascii: "\\"))
                bytes.append(UInt8(ascii: "u"))
                bytes.append(UInt8(ascii: "0"))
                bytes.append(UInt8(ascii: "0"))
                hex.withUTF8Buffer { digits in
                    bytes.append(digits[Int(byte >> 4)])
                    bytes.append(digits[Int(byte & 0x0F)])
                }
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
