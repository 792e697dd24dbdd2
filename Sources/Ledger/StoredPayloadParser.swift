import Foundation
import JSON

extension LedgerEvent {
    /// Decodes a stored event exactly as `decode(type:schemaVersion:data:)`
    /// does — the same event, or the same error — in a fraction of the time:
    /// what every reader of stored events uses (the rebuild decodes every
    /// event of the log; a write or a read, the tail of a stream).
    ///
    /// A payload in the shape this build writes (every key one of its type's,
    /// unescaped and once; integers without fraction or exponent) is read
    /// from its bytes by `StoredPayloadParser`; anything else (unknown or
    /// repeated keys, escaped keys, invalid JSON, wrong types...) goes to
    /// `decode(type:schemaVersion:data:)`, which gives its value or its error.
    public static func decodeFast(type: String, schemaVersion: Int, data: Data) throws -> LedgerEvent {
        try data.withUnsafeBytes { try decodeFast(type: type, schemaVersion: schemaVersion, payload: $0, data: data) }
    }

    /// `decodeFast(type:schemaVersion:data:)` of a payload read in place
    /// (a rebuild's rows): no copy of the bytes unless it must fall back.
    public static func decodeFast(type: String, schemaVersion: Int, payload: UnsafeRawBufferPointer) throws -> LedgerEvent {
        try decodeFast(type: type, schemaVersion: schemaVersion, payload: payload, data: nil)
    }

    /// `data`: the payload as `Data` when the caller has it (the fallbacks then copy nothing).
    private static func decodeFast(type: String, schemaVersion: Int, payload: UnsafeRawBufferPointer, data: Data?) throws
        -> LedgerEvent {
        guard let known = LedgerEventType(rawValue: type), schemaVersion <= known.newestSchemaVersion else {
            return .unknown(type: type, schemaVersion: schemaVersion, data: data ?? Data(payload))
        }
        if schemaVersion >= LedgerEventType.recordSchemaVersion {
            return try known.event(recordPayload: payload, schemaVersion: schemaVersion)
        }
        if let event = StoredPayloadParser.event(known, payload: payload) { return event }
        return try decode(type: type, schemaVersion: schemaVersion, data: data ?? Data(payload))
    }
}

/// A hand-written reader of the JSON payloads of known event types, from
/// their UTF-8 bytes to the values `JSONDecoder` (with `LedgerJSON`'s date
/// strategy) gives.
///
/// It is never more lenient than `JSONDecoder`: whatever it does not read
/// exactly as that would — anything but the plain shape this build writes —
/// makes it return nil, and the caller decodes with `JSONDecoder` instead.
/// So it needs to be right only about what it accepts, and hostile input
/// costs at worst a fallback. Nothing recurses beyond one nested object
/// (a transfer's transaction, a grant's actor).
struct StoredPayloadParser {
    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0

    private init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    /// The event of type `type` with this payload; nil when it must be left to `JSONDecoder`.
    static func event(_ type: LedgerEventType, payload: UnsafeRawBufferPointer) -> LedgerEvent? {
        var parser = StoredPayloadParser(payload.bindMemory(to: UInt8.self))
        guard let event = parser.event(type) else { return nil }
        // Only whitespace may follow the object.
        parser.skipWhitespace()
        return parser.index == parser.bytes.count ? event : nil
    }

    /// The transaction fact of a payload in record form (schema version 2,
    /// `TransactionFact.storedRecord`): one JSON string; nil for anything else.
    static func transactionRecord(payload: UnsafeRawBufferPointer) -> TransactionFact? {
        var parser = StoredPayloadParser(payload.bindMemory(to: UInt8.self))
        parser.skipWhitespace()
        let fact: TransactionFact?
        if let plain = parser.plainString() {
            fact = TransactionFact.reading(record: plain.bytes)
        } else if var text = parser.escapedString() {
            fact = text.withUTF8 { TransactionFact.reading(record: $0) }
        } else {
            return nil
        }
        parser.skipWhitespace()
        return parser.index == parser.bytes.count ? fact : nil
    }

    /// An integer written plainly (`integer()`) that is the whole of
    /// `bytes`: a value of a transaction record.
    static func wholeInteger(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        var parser = StoredPayloadParser(bytes)
        guard let value = parser.integer(), parser.index == bytes.count else { return nil }
        return value
    }

    private mutating func event(_ type: LedgerEventType) -> LedgerEvent? {
        switch type {
        case .purchased: transactionFact().map(LedgerEvent.purchased)
        case .renewed: transactionFact().map(LedgerEvent.renewed)
        case .restored: transactionFact().map(LedgerEvent.restored)
        case .refunded: refundFact().map(LedgerEvent.refunded)
        case .refundReversed: refundReversal().map(LedgerEvent.refundReversed)
        case .renewalExtended: renewalExtension().map(LedgerEvent.renewalExtended)
        case .expired: expiryFact().map(LedgerEvent.expired)
        case .autoRenewChanged: autoRenewChange().map(LedgerEvent.autoRenewChanged)
        case .billingIssue: billingIssue().map(LedgerEvent.billingIssue)
        case .transferredOut: transferFact().map(LedgerEvent.transferredOut)
        case .transferredIn: transferFact().map(LedgerEvent.transferredIn)
        case .deviceSeen: deviceSeen().map(LedgerEvent.deviceSeen)
        case .reminderSent: reminderDelivery().map(LedgerEvent.reminderSent)
        case .reminderFailed: reminderDelivery().map(LedgerEvent.reminderFailed)
        case .granted: supportGrant().map(LedgerEvent.granted)
        case .grantRevoked: grantRevocation().map(LedgerEvent.grantRevoked)
        case .erased: subscriberErasure().map(LedgerEvent.erased)
        // Rare beside App Store facts: left to `JSONDecoder`.
        case .googlePlayPurchase, .googlePlayVoided: nil
        }
    }

    // MARK: Objects

    /// One member's value: read at most once; nil when absent or `null`.
    struct Field<Value> {
        var isRead = false
        var value: Value?
    }

    /// Reads a member's value into `field`. False (give up) for a key seen
    /// before or a value `reader` cannot read; `null` is read as absent
    /// where the property is optional, as `decodeIfPresent` does.
    mutating func read<Value>(_ field: inout Field<Value>, nullable: Bool = false,
                                      _ reader: (inout StoredPayloadParser) -> Value?) -> Bool {
        guard !field.isRead else { return false }
        field.isRead = true
        if nullable, literal("null") { return true }
        guard let value = reader(&self) else { return false }
        field.value = value
        return true
    }

    /// The bytes of a key, which has no escapes (one that has is not read).
    struct Key {
        let bytes: UnsafeBufferPointer<UInt8>

        static func == (key: Key, name: StaticString) -> Bool {
            key.bytes.count == name.utf8CodeUnitCount
                && memcmp(key.bytes.baseAddress!, name.utf8Start, key.bytes.count) == 0
        }
    }

    /// Reads an object, giving `member` each key with the parser at its
    /// value, which `member` reads; false when anything does not read.
    mutating func members(_ member: (inout StoredPayloadParser, Key) -> Bool) -> Bool {
        skipWhitespace()
        guard next(UInt8(ascii: "{")) else { return false }
        skipWhitespace()
        if next(UInt8(ascii: "}")) { return true }
        while true {
            guard let key = key() else { return false }
            skipWhitespace()
            guard next(UInt8(ascii: ":")) else { return false }
            skipWhitespace()
            guard member(&self, key) else { return false }
            skipWhitespace()
            if next(UInt8(ascii: "}")) { return true }
            guard next(UInt8(ascii: ",")) else { return false }
            skipWhitespace()
        }
    }

    mutating func key() -> Key? {
        guard next(UInt8(ascii: "\"")) else { return nil }
        let start = index
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "\""):
                defer { index += 1 }
                // A key is never empty here: `bytes` has a base address.
                return Key(bytes: UnsafeBufferPointer(rebasing: bytes[start..<index]))
            case UInt8(ascii: "\\"), 0..<0x20: return nil
            default: index += 1
            }
        }
        return nil
    }

    // MARK: Values

    /// A string; nil for anything else, an invalid escape or invalid UTF-8.
    mutating func string() -> String? {
        guard let plain = plainString() else { return escapedString() }
        return plain.isASCII ? String(decoding: plain.bytes, as: UTF8.self) : String(validating: plain.bytes, as: UTF8.self)
    }

    /// The bytes of a string without escapes, moving past it, and whether
    /// they are all ASCII; nil (not moving) for anything else.
    private mutating func plainString() -> (bytes: UnsafeBufferPointer<UInt8>, isASCII: Bool)? {
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
        var end = index + 1
        var high: UInt8 = 0
        while end < bytes.count {
            let byte = bytes[end]
            if byte == UInt8(ascii: "\"") {
                let raw = UnsafeBufferPointer(rebasing: bytes[index + 1..<end])
                index = end + 1
                return (raw, high < 0x80)
            }
            if byte == UInt8(ascii: "\\") || byte < 0x20 { return nil }
            high |= byte
            end += 1
        }
        return nil
    }

    /// A string with escapes (`\n`, `\u00e9`, surrogate pairs...). A lone
    /// surrogate, a control character or invalid UTF-8 gives nil.
    private mutating func escapedString() -> String? {
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
        var position = index + 1
        var text: [UInt8] = []
        while position < bytes.count {
            let byte = bytes[position]
            position += 1
            switch byte {
            case UInt8(ascii: "\""):
                index = position
                return String(validating: text, as: UTF8.self)
            case 0..<0x20:
                return nil
            case UInt8(ascii: "\\"):
                guard let next = JSONStringEscape.unescape(utf8: bytes, at: position, into: &text) else { return nil }
                position = next
            default:
                text.append(byte)
            }
        }
        return nil
    }

    /// An RFC 3339 date-time string (`LedgerJSON`'s strategy), read in place.
    mutating func date() -> Date? {
        if let plain = plainString() { return RFC3339.parse(utf8: plain.bytes) }
        return escapedString().flatMap { RFC3339.parse($0) }
    }

    mutating func duration() -> ISODuration? {
        string().flatMap { try? ISODuration(parsing: $0) }
    }

    /// A case of `Value` by its raw value. Plain ASCII is compared byte for
    /// byte with each case's raw value, without making a String: for ASCII
    /// text that is what `init(rawValue:)`'s String comparison decides.
    /// Anything else goes through `init(rawValue:)`.
    mutating func rawValue<Value: RawRepresentable & CaseIterable>() -> Value? where Value.RawValue == String {
        let start = index
        if let plain = plainString(), plain.isASCII {
            return Value.allCases.first { value in
                var raw = value.rawValue
                return raw.withUTF8 { raw in
                    raw.count == plain.bytes.count && (raw.isEmpty || memcmp(raw.baseAddress!, plain.bytes.baseAddress!, raw.count) == 0)
                }
            }
        }
        index = start
        return string().flatMap(Value.init(rawValue:))
    }

    /// An integer written plainly (`-12`, `0`): no fraction, exponent, leading
    /// zero or `-0`, and within `Int`.
    mutating func integer() -> Int? {
        var position = index
        let isNegative = position < bytes.count && bytes[position] == UInt8(ascii: "-")
        if isNegative { position += 1 }
        let digitsStart = position
        var value = 0
        while position < bytes.count, bytes[position] >= UInt8(ascii: "0"), bytes[position] <= UInt8(ascii: "9") {
            let (times10, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowAgain) = times10.addingReportingOverflow(Int(bytes[position] - UInt8(ascii: "0")))
            guard !overflow, !overflowAgain else { return nil }
            value = sum
            position += 1
        }
        let digits = position - digitsStart
        guard digits > 0, bytes[digitsStart] != UInt8(ascii: "0") || (digits == 1 && !isNegative) else { return nil }
        if position < bytes.count {
            switch bytes[position] {
            case UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"): return nil
            default: break
            }
        }
        index = position
        return isNegative ? -value : value
    }

    mutating func boolean() -> Bool? {
        if literal("true") { return true }
        if literal("false") { return false }
        return nil
    }

    /// Moves past `word` (`null`, `true`, `false`) if it is next and ends there.
    private mutating func literal(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count, memcmp(bytes.baseAddress! + index, word.utf8Start, count) == 0 else { return false }
        let end = index + count
        if end < bytes.count {
            switch bytes[end] {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                return false
            default: break
            }
        }
        index = end
        return true
    }

    // MARK: Bytes

    private mutating func next(_ byte: UInt8) -> Bool {
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    /// JSON's whitespace: space, tab, line feed, carriage return.
    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }
}
