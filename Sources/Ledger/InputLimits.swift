import Foundation
import JSON

/// What every entry point accepts (docs/api.md, "Input limits"); anything else
/// is a 400 `invalid_field` naming the field (`date_in_future` for an
/// effective date too far ahead). The parsers check these as they read, and
/// the `Decider` checks every request again, so requests built in code (App
/// Store notifications, receipts) meet them too.
///
/// Identifiers are normalised to Unicode NFC once, at the edge where requests
/// are parsed (`FactRequest.parse`, `RestoreRequest.parse`,
/// `validateSubscriberID`, the App Store verifier): Swift's `==` treats
/// canonically equivalent spellings ("café" precomposed and "cafe\u{301}")
/// as equal while PostgreSQL compares bytes; in NFC, equal means byte for
/// byte equal, so both agree. The `Decider` refuses an identifier that is not
/// in NFC instead of normalising it, so what is stored is what the caller
/// looked up owners with.
public enum InputLimits {
    /// 1970-01-01T00:00:00Z: no App Store fact is older.
    public static let earliestInstant = Date(timeIntervalSince1970: 0)
    /// 9999-12-31T23:59:59Z: the last instant RFC 3339's four-digit year can
    /// write, so everything stored can be read back.
    public static let latestInstant = Date(timeIntervalSince1970: 253_402_300_799)
    /// Bytes of UTF-8 in an identifier (`String.count` counts grapheme
    /// clusters: "a" and 1500 combining marks is one, 3 KB).
    public static let identifierBytes = 1...200
    /// Bytes of UTF-8 in free text (`reason`).
    public static let maximumFreeTextBytes = 1000
    public static let quantities = 1...1_000_000
    public static let maximumRestoredTransactions = 1000
    /// How far after the decision's clock an effective date (purchase,
    /// revocation, change) may lie.
    public static let futureTolerance: TimeInterval = 24 * 60 * 60

    static let rangeDescription = "between 1970-01-01T00:00:00Z and 9999-12-31T23:59:59Z"

    // MARK: Identifiers

    /// `text` in NFC when it is an acceptable identifier; else `invalid_field`
    /// naming `field`.
    public static func identifier(_ text: String, field: String) throws(LedgerError) -> String {
        let normalized = nfc(text)
        try checkIdentifierShape(normalized, field: field)
        return normalized
    }

    /// Checks a subscriber id from a path, a query or an import line (every
    /// route and the import read ids through here, and the write path checks
    /// each command's again); returns it in NFC, the spelling to look it up
    /// and store it with. An id of a pseudonym's shape is refused: streams
    /// and erased subscribers' rows are named by pseudonyms, and a
    /// subscriber named like one would share them (its writes would block
    /// the erasure of the subscriber whose pseudonym it is).
    @discardableResult
    public static func validateSubscriberID(_ subscriberID: String, field: String = "subscriberId") throws(LedgerError) -> String {
        let normalized = try identifier(subscriberID, field: field)
        guard !hasPseudonymShape(normalized) else {
            throw .invalidField(field, expected: "an id without the reserved shape of a pseudonym (\"ps-\" and 32 lowercase hexadecimal digits)",
                                got: "that shape")
        }
        return normalized
    }

    /// `ps-` and 32 lowercase hexadecimal digits: the shape of
    /// `SubscriberPseudonyms.pseudonym(for:)`, which answers
    /// `isPseudonym` with this (a test compares it with real pseudonyms).
    public static func hasPseudonymShape(_ text: some StringProtocol) -> Bool {
        let bytes = text.utf8
        return bytes.count == 35 && bytes.starts(with: "ps-".utf8)
            && bytes.dropFirst(3).allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    /// An identifier of a request built in code: within the limits and
    /// already in NFC.
    static func checkIdentifier(_ text: String, field: String) throws(LedgerError) {
        try checkIdentifierShape(text, field: field)
        guard text.utf8.elementsEqual(nfc(text).utf8) else {
            throw .invalidField(field, expected: "an identifier in Unicode NFC (the request parsers normalise; InputLimits.identifier(_:field:) does)",
                                got: "another spelling")
        }
    }

    /// `text` in NFC. ASCII is NFC already, and Foundation's mapping costs
    /// microseconds an identifier (an import checks millions).
    static func nfc(_ text: String) -> String {
        text.utf8.allSatisfy { $0 < 0x80 } ? text : text.precomposedStringWithCanonicalMapping
    }

    private static func checkIdentifierShape(_ text: String, field: String) throws(LedgerError) {
        let expected = "1 to 200 bytes of UTF-8 without control characters"
        let bytes = text.utf8.count
        guard identifierBytes.contains(bytes) else {
            throw .invalidField(field, expected: expected, got: bytes == 0 ? "an empty string" : "\(bytes) bytes")
        }
        // Printable ASCII has no control character (Cc is U+0000–U+001F and
        // U+007F–U+009F): no Unicode property lookup per character, which
        // was 2.7% of an import, for the usual identifier.
        if text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return }
        if let control = text.unicodeScalars.first(where: { $0.properties.generalCategory == .control }) {
            throw .invalidField(field, expected: expected, got: "control character \(codePoint(control))")
        }
    }

    // MARK: Free text

    static func checkFreeText(_ text: String, field: String) throws(LedgerError) {
        let expected = "at most \(maximumFreeTextBytes) bytes of UTF-8 without NUL"
        let bytes = text.utf8.count
        guard bytes <= maximumFreeTextBytes else { throw .invalidField(field, expected: expected, got: "\(bytes) bytes") }
        guard !text.utf8.contains(0) else { throw .invalidField(field, expected: expected, got: "a NUL character") }
    }

    // MARK: Instants

    /// Whether `date` lies in `earliestInstant...latestInstant`.
    public static func contains(_ date: Date) -> Bool {
        earliestInstant <= date && date <= latestInstant
    }

    /// `date` kept to the millisecond when it lies in the range; else
    /// `invalid_field` naming `field`.
    public static func instant(_ date: Date, field: String) throws(LedgerError) -> Date {
        // Checked before rounding: far outside the range, milliseconds do not fit an Int64.
        guard contains(date) else {
            throw .invalidField(field, expected: "an instant \(rangeDescription)", got: describe(date))
        }
        return RFC3339.date(milliseconds: RFC3339.milliseconds(of: date))
    }

    /// Parses an RFC 3339 date-time with an offset that lies in the range
    /// (for query parameters such as `?at=`); else `invalid_field`.
    public static func instant(parsing text: String, field: String) throws(LedgerError) -> Date {
        guard let date = RFC3339.parse(text), contains(date) else {
            throw .invalidField(field, expected: "an RFC 3339 date-time such as \"2024-01-31T12:00:00Z\" \(rangeDescription)",
                                got: "\"\(text.prefix(64))\"")
        }
        return date
    }

    /// An effective date (purchase, revocation, change): in the range and at
    /// most `futureTolerance` after `now`, else `date_in_future`.
    static func checkEffectiveDate(_ date: Date, field: String, now: Date) throws(LedgerError) {
        _ = try instant(date, field: field)
        guard date <= now + futureTolerance else {
            throw LedgerError(kind: .badRequest, code: .dateInFuture,
                              message: "Field '\(field)' must be at most 24 hours after the server's clock (\(RFC3339.format(now))), got \(RFC3339.format(date)).",
                              field: field)
        }
    }

    /// A date for a message, even one RFC 3339 cannot write.
    private static func describe(_ date: Date) -> String {
        date < earliestInstant ? "a time before 1970 (\(date.timeIntervalSince1970) s since 1970)"
            : date > latestInstant ? "a time after year 9999 (\(date.timeIntervalSince1970) s since 1970)"
            : RFC3339.format(date)
    }

    private static func codePoint(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }
}

extension InputLimits {
    /// The longest Google Play purchase token accepted. Google documents no
    /// length; tokens seen are about 150 characters.
    public static let purchaseTokenBytes = 1...4096

    /// A Play purchase token: 1–4096 bytes of printable ASCII (no space or
    /// control character, so it can never hold an ownership key's separator).
    public static func checkPurchaseToken(_ token: String, field: String) throws(LedgerError) {
        let bytes = token.utf8
        guard purchaseTokenBytes.contains(bytes.count), bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw .invalidField(field, expected: "a Google Play purchase token of 1 to \(purchaseTokenBytes.upperBound) printable ASCII characters",
                                got: "\(bytes.count) bytes")
        }
    }
}
