import Foundation
import JSON

/// An amount of money as a decimal, exact to a millionth of the unit (the
/// precision of Google's `priceAmountMicros`; Apple's milliunits fit).
/// Written and read as a decimal string (`"9.99"`); amounts are summed
/// exactly and rounded only when answered (`Currency.format`).
public struct Amount: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var micros: Int64

    public init(micros: Int64) { self.micros = micros }

    /// Apple's `price`: thousandths of the unit (9990 is 9.99).
    public init(milliunits: Int64) { micros = milliunits * 1000 }

    public static let zero = Amount(micros: 0)
    /// The largest amount a fact may carry (a decimal string of 12 digits before the point).
    public static let maximum = Amount(micros: 999_999_999_999_999_999)

    /// A decimal string: digits, and at most six after a point (`"9.99"`,
    /// `"0"`, `"1200"`); no sign, exponent or grouping. Nil otherwise.
    public init?(decimal text: String) {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.count <= 19 else { return nil }
        var units: Int64 = 0, fraction: Int64 = 0, fractionDigits = 0, integerDigits = 0, afterPoint = false
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                let digit = Int64(byte - UInt8(ascii: "0"))
                if afterPoint {
                    guard fractionDigits < 6 else { return nil }
                    fraction = fraction * 10 + digit
                    fractionDigits += 1
                } else {
                    guard integerDigits < 12 else { return nil }
                    units = units * 10 + digit
                    integerDigits += 1
                }
            case UInt8(ascii: "."):
                guard !afterPoint, integerDigits > 0 else { return nil }
                afterPoint = true
            default:
                return nil
            }
        }
        guard integerDigits > 0, !afterPoint || fractionDigits > 0 else { return nil }
        for _ in fractionDigits..<6 { fraction *= 10 }
        micros = units * 1_000_000 + fraction
    }

    /// The shortest decimal string of the amount (`"9.99"`, `"10"`).
    public var description: String {
        let sign = micros < 0 ? "-" : ""
        let magnitude = micros.magnitude
        let units = magnitude / 1_000_000, fraction = magnitude % 1_000_000
        guard fraction > 0 else { return sign + String(units) }
        var digits = String(fraction)
        digits = String(repeating: "0", count: 6 - digits.count) + digits
        while digits.hasSuffix("0") { digits.removeLast() }
        return sign + String(units) + "." + digits
    }

    public static func < (lhs: Amount, rhs: Amount) -> Bool { lhs.micros < rhs.micros }
    public static func + (lhs: Amount, rhs: Amount) -> Amount { Amount(micros: lhs.micros + rhs.micros) }
    public static func - (lhs: Amount, rhs: Amount) -> Amount { Amount(micros: lhs.micros - rhs.micros) }

    /// `self` × `numerator` ÷ `denominator`, rounded half-even to a micro
    /// (a prorated refund's share, a period's monthly value).
    /// The product is taken at full width, so the largest price times
    /// 100,000 (a refund's share in milliunits) cannot overflow; a result
    /// beyond `Int64` (never from the numbers a fact may carry) saturates.
    public func scaled(by numerator: Int64, _ denominator: Int64) -> Amount {
        guard denominator > 0 else { return .zero }
        let negative = (micros < 0) != (numerator < 0)
        let product = micros.magnitude.multipliedFullWidth(by: numerator.magnitude)
        guard product.high < UInt64(denominator) else { return Amount(micros: negative ? .min : .max) }
        let (quotient, remainder) = UInt64(denominator).dividingFullWidth(product)
        let rounded = Self.roundedHalfEven(quotient, remainder: remainder, divisor: UInt64(denominator))
        guard rounded <= UInt64(Int64.max) else { return Amount(micros: negative ? .min : .max) }
        return Amount(micros: negative ? -Int64(rounded) : Int64(rounded))
    }

    /// `value` ÷ `divisor` rounded half to even (`divisor` > 0).
    static func divideHalfEven(_ value: Int64, _ divisor: Int64) -> Int64 {
        let (quotient, remainder) = value.magnitude.quotientAndRemainder(dividingBy: divisor.magnitude)
        let rounded = roundedHalfEven(quotient, remainder: remainder, divisor: divisor.magnitude)
        return value < 0 ? Int64(truncatingIfNeeded: 0 &- rounded) : Int64(rounded)
    }

    /// The one rounding rule: a magnitude's `quotient` rounded half to even
    /// by the `remainder` its division by `divisor` left.
    static func roundedHalfEven(_ quotient: UInt64, remainder: UInt64, divisor: UInt64) -> UInt64 {
        let twice = remainder * 2  // remainder < divisor ≤ Int64.max: no overflow
        return twice > divisor || (twice == divisor && quotient % 2 == 1) ? quotient + 1 : quotient
    }
}

/// ISO 4217 currency codes and their minor units: the amounts of a currency
/// are answered rounded half-even to its minor unit (2 for USD, 0 for JPY, 3
/// for KWD). https://www.iso.org/iso-4217-currency-codes.html
public enum Currency {
    /// Active codes whose minor unit is not 2.
    static let minorUnitExceptions: [String: Int] = [
        "BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "ISK": 0, "JPY": 0, "KMF": 0, "KRW": 0, "PYG": 0, "RWF": 0, "UGX": 0,
        "UYI": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
        "BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3,
        "CLF": 4, "UYW": 4,
    ]

    /// Active codes with a minor unit of 2.
    static let twoDecimalCodes: Set<String> = [
        "AED", "AFN", "ALL", "AMD", "ANG", "AOA", "ARS", "AUD", "AWG", "AZN", "BAM", "BBD", "BDT", "BGN", "BMD", "BND", "BOB",
        "BOV", "BRL", "BSD", "BTN", "BWP", "BYN", "BZD", "CAD", "CDF", "CHE", "CHF", "CHW", "CNY", "COP", "COU", "CRC", "CUP",
        "CVE", "CZK", "DKK", "DOP", "DZD", "EGP", "ERN", "ETB", "EUR", "FJD", "FKP", "GBP", "GEL", "GHS", "GIP", "GMD", "GTQ",
        "GYD", "HKD", "HNL", "HTG", "HUF", "IDR", "ILS", "INR", "IRR", "JMD", "KES", "KGS", "KHR", "KPW", "KYD", "KZT", "LAK",
        "LBP", "LKR", "LRD", "LSL", "MAD", "MDL", "MGA", "MKD", "MMK", "MNT", "MOP", "MRU", "MUR", "MVR", "MWK", "MXN", "MXV",
        "MYR", "MZN", "NAD", "NGN", "NIO", "NOK", "NPR", "NZD", "PAB", "PEN", "PGK", "PHP", "PKR", "PLN", "QAR", "RON", "RSD",
        "RUB", "SAR", "SBD", "SCR", "SDG", "SEK", "SGD", "SHP", "SLE", "SOS", "SRD", "SSP", "STN", "SVC", "SYP", "SZL", "THB",
        "TJS", "TMT", "TOP", "TRY", "TTD", "TWD", "TZS", "UAH", "USD", "USN", "UYU", "UZS", "VED", "VES", "WST", "XCD", "XCG",
        "YER", "ZAR", "ZMW", "ZWG",
    ]

    /// The minor unit of an active ISO 4217 code; nil for anything else.
    public static func minorUnit(_ code: String) -> Int? {
        if let exception = minorUnitExceptions[code] { return exception }
        return twoDecimalCodes.contains(code) ? 2 : nil
    }

    /// `amount` rounded half-even to the currency's minor unit, as a decimal
    /// string with exactly that many places (`"119.88"`, `"1200"` for JPY).
    /// `dividedBy`: an amount kept as a multiple (MRR as a yearly amount,
    /// answered ÷ 12), divided in the same single rounding.
    public static func format(_ amount: Amount, in code: String, dividedBy divisor: Int64 = 1) -> String {
        let places = minorUnit(code) ?? 2
        var step: Int64 = 1
        for _ in places..<6 { step *= 10 }
        let minor = Amount.divideHalfEven(amount.micros, step * max(1, divisor))
        let sign = minor < 0 ? "-" : ""
        var divisor: Int64 = 1
        for _ in 0..<places { divisor *= 10 }
        let magnitude = minor.magnitude
        let units = String(magnitude / UInt64(divisor))
        guard places > 0 else { return sign + units }
        let fraction = String(magnitude % UInt64(divisor))
        return sign + units + "." + String(repeating: "0", count: places - fraction.count) + fraction
    }
}

/// How a period was offered: the kind of offer (Apple's `offerType` 1–4,
/// stored as that number) and how its discount is paid.
public enum OfferKind: Int, Sendable, Hashable, CaseIterable {
    case introductory = 1, promotional = 2, offerCode = 3, winBack = 4

    public var name: String {
        switch self {
        case .introductory: "introductory"
        case .promotional: "promotional"
        case .offerCode: "offer_code"
        case .winBack: "win_back"
        }
    }

    public init?(name: String) {
        guard let kind = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = kind
    }
}

/// An offer's payment mode (Apple's `offerDiscountType`, lowercased).
/// https://developer.apple.com/documentation/appstoreserverapi/offerdiscounttype
public enum OfferDiscount: String, Sendable, Hashable, CaseIterable {
    case freeTrial = "free_trial", payAsYouGo = "pay_as_you_go", payUpFront = "pay_up_front"

    /// Apple's spelling (`FREE_TRIAL`...); `ONE_TIME` (a one-time purchase's
    /// offer) is no subscription discount and reads as nil.
    public init?(apple: String) {
        switch apple {
        case "FREE_TRIAL": self = .freeTrial
        case "PAY_AS_YOU_GO": self = .payAsYouGo
        case "PAY_UP_FRONT": self = .payUpFront
        default: return nil
        }
    }
}

/// What a purchase or renewal was sold for, as the store or the client said:
/// the price and its currency, the offer, the storefront. A fact without a
/// price counts in every count and in no amount.
public struct SaleTerms: Sendable, Hashable {
    public var price: Amount?
    /// An ISO 4217 code; present exactly when `price` is.
    public var currency: String?
    public var offerDiscount: OfferDiscount?
    /// The store's country or region code (Apple's `storefront`, Play's `regionCode`).
    public var storefront: String?

    public init(price: Amount? = nil, currency: String? = nil, offerDiscount: OfferDiscount? = nil, storefront: String? = nil) {
        self.price = price
        self.currency = currency
        self.offerDiscount = offerDiscount
        self.storefront = storefront
    }

    public var isEmpty: Bool { self == SaleTerms() }
    /// A free-trial period (its price is 0).
    public var isFreeTrial: Bool { offerDiscount == .freeTrial }
}

/// Stored as `{"price": "9.99", "currency", "offerDiscount", "storefront"}`
/// (a Google Play fact's `sale`; an App Store transaction keeps the same
/// keys flat in its own JSON).
extension SaleTerms: Codable {
    enum CodingKeys: String, CodingKey { case price, currency, offerDiscount, storefront }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init()
        if let price = try container.decodeIfPresent(String.self, forKey: .price) {
            guard let amount = Amount(decimal: price) else {
                throw DecodingError.dataCorruptedError(forKey: .price, in: container, debugDescription: "not a decimal string")
            }
            self.price = amount
        }
        currency = try container.decodeIfPresent(String.self, forKey: .currency)
        if let discount = try container.decodeIfPresent(String.self, forKey: .offerDiscount) {
            guard let value = OfferDiscount(rawValue: discount) else {
                throw DecodingError.dataCorruptedError(forKey: .offerDiscount, in: container, debugDescription: "unknown discount")
            }
            offerDiscount = value
        }
        storefront = try container.decodeIfPresent(String.self, forKey: .storefront)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(price?.description, forKey: .price)
        try container.encodeIfPresent(currency, forKey: .currency)
        try container.encodeIfPresent(offerDiscount?.rawValue, forKey: .offerDiscount)
        try container.encodeIfPresent(storefront, forKey: .storefront)
    }
}

extension FieldReader {
    /// The sale terms of a fact: `price` (a decimal string), `currency`
    /// (ISO 4217, with a price and only with one), `offer` (`{"type",
    /// "discount"}`) and `storefront`; `offerType` (Apple's number) is the
    /// offer's type when `offer` is absent and must agree with it otherwise.
    /// Returns the terms and the offer's type.
    func saleTerms() throws(LedgerError) -> (terms: SaleTerms, offerType: Int?) {
        var terms = SaleTerms()
        if let text = try string("price", maxLength: 32) {
            guard let amount = Amount(decimal: text) else {
                throw .invalidField(name("price"), expected: "a decimal string such as \"9.99\" (digits, at most 6 after the point)",
                                    got: "\"\(text.prefix(32))\"")
            }
            terms.price = amount
        }
        if let code = try string("currency", maxLength: 8) {
            guard Currency.minorUnit(code) != nil else {
                throw .invalidField(name("currency"), expected: "an ISO 4217 currency code such as \"USD\"", got: "\"\(code.prefix(8))\"")
            }
            terms.currency = code
        }
        if terms.price != nil, terms.currency == nil { throw .missingField(name("currency"), "a price needs its currency") }
        if terms.price == nil, terms.currency != nil { throw .missingField(name("price"), "a currency goes with a price") }
        terms.storefront = try identifier("storefront")
        let appleOfferType = try integer("offerType", in: 1...99)
        var offerType = appleOfferType
        if let offer = fields["offer"], offer != .null {
            guard case .object(let offerFields) = offer else {
                throw .invalidField(name("offer"), expected: "an object with \"type\" and \"discount\"", got: offer.kindDescription)
            }
            let reader = FieldReader(fields: offerFields, prefix: name("offer") + ".")
            let kinds = OfferKind.allCases.map(\.name)
            guard let typeName = try reader.oneOf("type", kinds) else { throw .missingField(reader.name("type"), "an offer has a type") }
            let kind = OfferKind(name: typeName)!
            if let appleOfferType, appleOfferType != kind.rawValue {
                throw .invalidField(name("offerType"), expected: "\(kind.rawValue) to agree with offer.type \"\(typeName)\"",
                                    got: "\(appleOfferType)")
            }
            offerType = kind.rawValue
            terms.offerDiscount = try reader.oneOf("discount", OfferDiscount.allCases.map(\.rawValue)).flatMap(OfferDiscount.init(rawValue:))
        }
        if terms.isFreeTrial, let price = terms.price, price != .zero {
            throw .invalidField(name("price"), expected: "\"0\" for a free trial", got: "\"\(price)\"")
        }
        return (terms, offerType)
    }
}
