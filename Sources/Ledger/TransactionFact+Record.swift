import Foundation
import JSON

/// A transaction fact as the log stores it from schema version 2: one JSON
/// string holding a record of the fact's fields (docs/decisions/0007).
///
/// Purchases and renewals are most of the log, and as a JSON object their
/// `data` was 317 bytes of jsonb, two thirds of an event's row: jsonb keeps
/// every key's text and eight bytes of entries per member, and an instant
/// is a 24-character string. The record keeps only values: each field is a
/// one-letter code, its length in UTF-8 bytes, a colon and its bytes
/// (`i6:t123-5p23:com.example.pro.monthly…`), instants as milliseconds
/// since 1970, and defaults left out (an original transaction id equal to
/// the transaction's, quantity 1, Production). Fields are written in one
/// order and read in any, each at most once; an unknown code, a repeated
/// one, a missing required one or a value that does not read makes the
/// record unreadable, which the decoder reports as an error.
///
/// What the API shows is still the JSON object (`storedJSON`): the record
/// is the log's own form, and readers of stored data that show it (the
/// history, the change feed) show the event's public form instead.
extension TransactionFact {
    /// The record's bytes (not yet a JSON string).
    func recordBytes() -> [UInt8] {
        var record = RecordWriter()
        record.bytes.reserveCapacity(96 + transactionID.utf8.count + productID.utf8.count + (deviceID?.utf8.count ?? 0))
        record.text(.transactionID, transactionID)
        if originalTransactionID != transactionID { record.text(.originalTransactionID, originalTransactionID) }
        record.text(.productID, productID)
        if let productType { record.text(.productType, productType.recordCode) }
        if let group { record.text(.group, group) }
        if let duration { record.text(.duration, duration.description) }
        record.integer(.purchaseDate, RFC3339.milliseconds(of: purchaseDate))
        if let expiresDate { record.integer(.expiresDate, RFC3339.milliseconds(of: expiresDate)) }
        if quantity != 1 { record.integer(.quantity, Int64(quantity)) }
        if let autoRenew { record.text(.autoRenew, autoRenew ? "1" : "0") }
        if let deviceID { record.text(.deviceID, deviceID) }
        if environment != .production { record.text(.environment, environment.rawValue) }
        record.text(.source, source)
        if let ownershipType = details.ownershipType { record.text(.ownershipType, ownershipType) }
        if let offerType = details.offerType { record.integer(.offerType, Int64(offerType)) }
        if let webOrderLineItemID = details.webOrderLineItemID { record.text(.webOrderLineItemID, webOrderLineItemID) }
        if let isUpgraded = details.isUpgraded { record.text(.isUpgraded, isUpgraded ? "1" : "0") }
        if let price = details.sale.price { record.integer(.price, price.micros) }
        if let currency = details.sale.currency { record.text(.currency, currency) }
        if let offerDiscount = details.sale.offerDiscount { record.text(.offerDiscount, offerDiscount.rawValue) }
        if let storefront = details.sale.storefront { record.text(.storefront, storefront) }
        return record.bytes
    }

    /// The stored form: the record as a JSON string literal.
    public func storedRecord() -> Data {
        let record = recordBytes()
        var literal: [UInt8] = []
        literal.reserveCapacity(record.count + 2)
        JSONStringLiteral.append(String(decoding: record, as: UTF8.self), to: &literal)
        return Data(literal)
    }

    /// The fact a record's bytes hold; nil when they are not a record this
    /// build writes.
    static func reading(record bytes: UnsafeBufferPointer<UInt8>) -> TransactionFact? {
        var reader = RecordReader(bytes: bytes)
        var transactionID: String?, originalTransactionID: String?, productID: String?, productType: ProductType?
        var group: String?, duration: ISODuration?, purchaseDate: Date?, expiresDate: Date?, quantity = 1
        var autoRenew: Bool?, deviceID: String?, environment = Environment.production, source: String?
        var details = AppleTransactionDetails()
        var seen: UInt32 = 0
        while !reader.isAtEnd {
            guard let (code, value) = reader.next(), let field = RecordField(rawValue: code) else { return nil }
            let bit: UInt32 = 1 << field.bit
            guard seen & bit == 0 else { return nil }
            seen |= bit
            switch field {
            case .transactionID: guard let text = value.text else { return nil }; transactionID = text
            case .originalTransactionID: guard let text = value.text else { return nil }; originalTransactionID = text
            case .productID: guard let text = value.text else { return nil }; productID = text
            case .productType: guard let type = value.text.flatMap(ProductType.init(recordCode:)) else { return nil }; productType = type
            case .group: guard let text = value.text else { return nil }; group = text
            case .duration: guard let parsed = value.text.flatMap({ try? ISODuration(parsing: $0) }) else { return nil }; duration = parsed
            case .purchaseDate: guard let date = value.date else { return nil }; purchaseDate = date
            case .expiresDate: guard let date = value.date else { return nil }; expiresDate = date
            case .quantity: guard let number = value.integer else { return nil }; quantity = number
            case .autoRenew: guard let flag = value.flag else { return nil }; autoRenew = flag
            case .deviceID: guard let text = value.text else { return nil }; deviceID = text
            case .environment: guard let named = value.text.flatMap(Environment.init(rawValue:)) else { return nil }; environment = named
            case .source: guard let text = value.text else { return nil }; source = text
            case .ownershipType: guard let text = value.text else { return nil }; details.ownershipType = text
            case .offerType: guard let number = value.integer else { return nil }; details.offerType = number
            case .webOrderLineItemID: guard let text = value.text else { return nil }; details.webOrderLineItemID = text
            case .isUpgraded: guard let flag = value.flag else { return nil }; details.isUpgraded = flag
            case .price:
                guard let micros = value.integer.map(Int64.init), micros >= 0, micros <= Amount.maximum.micros else { return nil }
                details.sale.price = Amount(micros: micros)
            case .currency: guard let text = value.text else { return nil }; details.sale.currency = text
            case .offerDiscount: guard let discount = value.text.flatMap(OfferDiscount.init(rawValue:)) else { return nil }; details.sale.offerDiscount = discount
            case .storefront: guard let text = value.text else { return nil }; details.sale.storefront = text
            }
        }
        guard let transactionID, let productID, let purchaseDate, let source else { return nil }
        return TransactionFact(transactionID: transactionID, originalTransactionID: originalTransactionID ?? transactionID,
                               productID: productID, productType: productType, group: group, duration: duration,
                               purchaseDate: purchaseDate, expiresDate: expiresDate, quantity: quantity, autoRenew: autoRenew,
                               deviceID: deviceID, environment: environment, source: source, details: details)
    }
}

/// The fields of a transaction record and their codes. The codes are stored:
/// never change or reuse one.
enum RecordField: UInt8 {
    case transactionID = 0x69 // i
    case originalTransactionID = 0x6F // o
    case productID = 0x70 // p
    case productType = 0x6B // k
    case group = 0x67 // g
    case duration = 0x64 // d
    case purchaseDate = 0x62 // b
    case expiresDate = 0x78 // x
    case quantity = 0x71 // q
    case autoRenew = 0x61 // a
    case deviceID = 0x76 // v
    case environment = 0x65 // e
    case source = 0x73 // s
    case ownershipType = 0x77 // w
    case offerType = 0x66 // f
    case webOrderLineItemID = 0x6C // l
    case isUpgraded = 0x75 // u
    case price = 0x72 // r
    case currency = 0x63 // c
    case offerDiscount = 0x6E // n
    case storefront = 0x74 // t

    /// Its bit in the reader's set of fields seen (a letter's place in the alphabet).
    var bit: UInt32 { UInt32(rawValue - 0x61) }
}

extension ProductType {
    /// The type's one-letter code in a transaction record. Stored: never change one.
    var recordCode: String {
        switch self {
        case .consumable: "c"
        case .nonConsumable: "n"
        case .autoRenewable: "a"
        case .nonRenewing: "r"
        case .free: "f"
        }
    }

    init?(recordCode: String) {
        guard let type = ProductType.allCases.first(where: { $0.recordCode == recordCode }) else { return nil }
        self = type
    }
}

/// Writes `<code><length>:<value>` fields.
private struct RecordWriter {
    var bytes: [UInt8] = []

    mutating func text(_ field: RecordField, _ value: String) {
        bytes.append(field.rawValue)
        bytes.append(contentsOf: String(value.utf8.count).utf8)
        bytes.append(UInt8(ascii: ":"))
        bytes.append(contentsOf: value.utf8)
    }

    mutating func integer(_ field: RecordField, _ value: Int64) {
        text(field, String(value))
    }
}

/// Reads the fields `RecordWriter` writes, strictly: a length in plain
/// decimal (no sign or leading zero) that the bytes left can hold.
private struct RecordReader {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0

    var isAtEnd: Bool { index == bytes.count }

    struct Value {
        let bytes: UnsafeBufferPointer<UInt8>

        /// Valid UTF-8 as a string.
        var text: String? {
            bytes.allSatisfy { $0 < 0x80 } ? String(decoding: bytes, as: UTF8.self) : String(validating: bytes, as: UTF8.self)
        }

        /// A plain decimal integer (`-12`, `0`; no leading zero, `-0` or `+`)
        /// within `Int`, read as the JSON payloads' integers are.
        var integer: Int? { StoredPayloadParser.wholeInteger(bytes) }

        /// Milliseconds since 1970 within the instants an RFC 3339 date-time
        /// of a four-digit year can say, as the object form's dates are.
        var date: Date? {
            guard let milliseconds = integer.map(Int64.init),
                  milliseconds >= RFC3339.firstInstantOfYearOne * 1000, milliseconds < RFC3339.firstInstantOfYear10000 * 1000
            else { return nil }
            return RFC3339.date(milliseconds: milliseconds)
        }

        var flag: Bool? {
            guard bytes.count == 1 else { return nil }
            switch bytes[0] {
            case UInt8(ascii: "1"): return true
            case UInt8(ascii: "0"): return false
            default: return nil
            }
        }
    }

    mutating func next() -> (code: UInt8, value: Value)? {
        guard index < bytes.count else { return nil }
        let code = bytes[index]
        var position = index + 1
        let lengthStart = position
        var length = 0
        while position < bytes.count, bytes[position] >= UInt8(ascii: "0"), bytes[position] <= UInt8(ascii: "9") {
            length = length * 10 + Int(bytes[position] - UInt8(ascii: "0"))
            position += 1
            guard position - lengthStart <= 9 else { return nil }
        }
        let digits = position - lengthStart
        guard digits > 0, bytes[lengthStart] != UInt8(ascii: "0") || digits == 1,
              position < bytes.count, bytes[position] == UInt8(ascii: ":") else { return nil }
        position += 1
        guard length <= bytes.count - position else { return nil }
        index = position + length
        return (code, Value(bytes: UnsafeBufferPointer(rebasing: bytes[position..<position + length])))
    }
}
