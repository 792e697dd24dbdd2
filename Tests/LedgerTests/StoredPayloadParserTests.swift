import TestSupport
import Foundation
import Testing
import JSON
@testable import Ledger

/// The rebuild's event decoder (`LedgerEvent.decodeFast`) against the
/// reference (`LedgerEvent.decode`, `JSONDecoder`): for generated events of
/// every type, as the encoder writes them and as PostgreSQL's `jsonb` prints
/// them, the same event; for mutated and hostile payloads, the same event or
/// the same error, and never a crash.
struct StoredPayloadParserTests {
    /// Every event the scenarios produce, plus generated events of every type
    /// with every optional field present or absent and awkward strings.
    static func generatedEvents() -> [LedgerEvent] {
        var all: [LedgerEvent] = []
        for seed in 0..<UInt64(150) {
            var scenario = Scenario(seed: 50_000 + seed)
            for _ in 0..<30 { scenario.step() }
            all += scenario.world.streams.values.flatMap { $0 }.map(\.event)
        }
        var generator = EventGenerator(seed: 7)
        for _ in 0..<300 {
            all += LedgerEventType.allCases.map { generator.event($0) }
        }
        return all
    }

    @Test func theParserReadsWhatTheEncoderAndJSONBWriteAsTheReferenceDoes() throws {
        var random = SplitMix64(seed: 11)
        let events = Self.generatedEvents()
        #expect(Set(events.compactMap(\.knownType)) == Set(LedgerEventType.allCases))
        for event in events {
            let encoded = try event.encodedData()
            let reference = try LedgerEvent.decode(type: event.type, schemaVersion: event.schemaVersion, data: encoded)
            #expect(reference == event)
            let jsonb = JSONBText.format(encoded, random: &random)
            for data in [encoded, jsonb, JSONBText.format(encoded, escapingEverything: true, random: &random)] {
                let known = try #require(event.knownType)
                // The plain shapes are read by hand, not handed to JSONDecoder;
                // Google Play's facts, rare beside the App Store's, are left to it.
                let parsed = data.withUnsafeBytes { StoredPayloadParser.event(known, payload: $0) }
                let byHand = known != .googlePlayPurchase && known != .googlePlayVoided
                #expect(parsed == (byHand ? reference : nil), "\(String(decoding: data, as: UTF8.self))")
                #expect(try LedgerEvent.decodeFast(type: event.type, schemaVersion: 1, data: data) == reference)
            }
        }
    }

    /// Unknown types and newer versions stay `.unknown` with their data,
    /// whatever it holds; older versions decode as the current one.
    @Test func unknownTypesAndVersionsAreKeptAsTheReferenceKeepsThem() throws {
        let payloads = [Data(#"{"a":1}"#.utf8), Data("not json".utf8), Data(), Data([0xFF, 0x00])]
        for data in payloads {
            for (type, version) in [("gift_received", 1), ("purchased", 3), ("refunded", 2), ("purchased", 99), ("", 1)] {
                let fast = try LedgerEvent.decodeFast(type: type, schemaVersion: version, data: data)
                #expect(fast == (try LedgerEvent.decode(type: type, schemaVersion: version, data: data)))
                #expect(fast == .unknown(type: type, schemaVersion: version, data: data))
            }
        }
        let fact = TransactionFact(transactionID: "t", originalTransactionID: "t", productID: IDs.level2, purchaseDate: date("2024-01-01T00:00:00Z"))
        let data = try LedgerEvent.purchased(fact).encodedData()
        for version in [0, -3] {
            #expect(try LedgerEvent.decodeFast(type: "purchased", schemaVersion: version, data: data) == .purchased(fact))
        }
    }

    /// Payloads mutated byte by byte and member by member: whatever the
    /// parser accepts, the reference decodes to the same event, and
    /// `decodeFast` gives the reference's event or error.
    @Test func mutatedPayloadsDecodeOrFailExactlyAsTheReferenceDoes() throws {
        var random = SplitMix64(seed: 23)
        var parsedByHand = 0
        var failed = 0
        let events = Self.generatedEvents().filter { _ in Int.random(in: 0..<4, using: &random) == 0 }
        for event in events {
            let known = try #require(event.knownType)
            let encoded = try event.encodedData()
            let base = Int.random(in: 0..<2, using: &random) == 0 ? encoded : JSONBText.format(encoded, random: &random)
            for _ in 0..<12 {
                let data = Mutation.apply(to: base, random: &random)
                let reference = Result { try LedgerEvent.decode(type: known.rawValue, schemaVersion: 1, data: data) }
                let fast = Result { try LedgerEvent.decodeFast(type: known.rawValue, schemaVersion: 1, data: data) }
                let text = String(decoding: data, as: UTF8.self)
                switch (reference, fast) {
                case (.success(let expected), .success(let actual)):
                    #expect(actual == expected, "\(text)")
                case (.failure(let expected), .failure(let actual)):
                    failed += 1
                    #expect("\(actual)" == "\(expected)", "\(text)")
                default:
                    Issue.record("reference \(reference), fast \(fast): \(text)")
                }
                if let parsed = data.withUnsafeBytes({ StoredPayloadParser.event(known, payload: $0) }) {
                    parsedByHand += 1
                    #expect(try reference.get() == parsed, "\(text)")
                }
            }
        }
        // Both sides of the line were exercised.
        #expect(parsedByHand > 1000)
        #expect(failed > 1000)
    }

    /// Payloads no encoder writes: whatever the parser accepts, the reference
    /// decodes to the same event.
    @Test func hostilePayloadsNeverCrashAndNeverDisagree() throws {
        var random = SplitMix64(seed: 31)
        let alphabet = Array(#"{}[]":,\ntrufalsenul0123456789-+.eE"u\#t"#.utf8) + [0x00, 0x1F, 0x7F, 0xC3, 0xA9, 0xED, 0xA0, 0x80, 0xFF]
        var samples: [Data] = [
            Data("{".utf8), Data("{}".utf8), Data("[]".utf8), Data("null".utf8), Data(#""x""#.utf8), Data(" ".utf8),
            Data(String(repeating: "[", count: 100_000).utf8), Data(String(repeating: #"{"a":"#, count: 50_000).utf8),
            Data(#"{"deviceId":"D1","date":"2024-01-01T00:00:00Z","source":"api"}garbage"#.utf8),
            Data(#"{"deviceId":"D1","date":"2024-01-01T00:00:00Z","source":"api","deviceId":"D2"}"#.utf8),
            Data(#"{"deviceId":"D\ud800","date":"2024-01-01T00:00:00Z","source":"api"}"#.utf8),
            Data(#"{"deviceId":"D\u0000","date":"2024-01-01T00:00:00Z","source":"api"}"#.utf8),
            Data(#"{"device\u0049d":"D1","date":"2024-01-01T00:00:00Z","source":"api"}"#.utf8),
            Data(#"{"deviceId":"D1","date":"2024-02-30T00:00:00Z","source":"api"}"#.utf8),
            Data(#"{"deviceId":"D1","date":"2024-01-01T00:00:00Z","source":"api"} "#.utf8),
        ]
        for _ in 0..<3000 {
            samples.append(Data((0..<Int.random(in: 0..<40, using: &random)).map { _ in alphabet.randomElement(using: &random)! }))
        }
        for data in samples {
            for type in LedgerEventType.allCases {
                let reference = Result { try LedgerEvent.decode(type: type.rawValue, schemaVersion: 1, data: data) }
                let fast = Result { try LedgerEvent.decodeFast(type: type.rawValue, schemaVersion: 1, data: data) }
                #expect("\(fast)" == "\(reference)")
                if let parsed = data.withUnsafeBytes({ StoredPayloadParser.event(type, payload: $0) }) {
                    #expect(try reference.get() == parsed)
                }
            }
        }
    }
}

/// Random events of every type, with optional fields present or not and
/// strings that need escaping.
struct EventGenerator {
    var random: SplitMix64

    init(seed: UInt64) {
        random = SplitMix64(seed: seed)
    }

    mutating func chance(_ percent: Int) -> Bool { Int.random(in: 1...100, using: &random) <= percent }
    mutating func maybe<T>(_ value: T) -> T? { chance(50) ? value : nil }
    mutating func pick<T>(_ items: [T]) -> T { items.randomElement(using: &random)! }

    mutating func text() -> String {
        switch Int.random(in: 0..<10, using: &random) {
        case 0: ""
        case 1: "café \u{301}e\u{301}"
        case 2: "quote \" back\\slash /slash"
        case 3: "controls \n\r\t\u{1}\u{1F}\u{7F}"
        case 4: "astral 🎉 𝄞 日本語"
        case 5: String(repeating: "long-id-", count: Int.random(in: 4...40, using: &random))
        default: "id-\(Int.random(in: 0...1_000_000, using: &random))"
        }
    }

    mutating func date() -> Date {
        let first = RFC3339.firstInstantOfYearOne * 1000, last = RFC3339.firstInstantOfYear10000 * 1000 - 1
        let milliseconds = chance(70) ? Int64.random(in: 1_500_000_000_000...2_000_000_000_000, using: &random)
            : Int64.random(in: first...last, using: &random)
        return RFC3339.date(milliseconds: chance(50) ? milliseconds / 1000 * 1000 : milliseconds)
    }

    mutating func duration() -> ISODuration {
        func part(_ generator: inout EventGenerator) -> Int {
            generator.chance(50) ? 0 : Int.random(in: 0...999_999, using: &generator.random)
        }
        return ISODuration(years: part(&self), months: part(&self), weeks: part(&self), days: part(&self))
    }

    mutating func integer() -> Int {
        chance(80) ? Int.random(in: -5...100_000, using: &random) : Int.random(in: Int.min...Int.max, using: &random)
    }

    mutating func environment() -> Environment { Environment.allCases.randomElement(using: &random)! }

    mutating func transaction() -> TransactionFact {
        TransactionFact(transactionID: text(), originalTransactionID: text(), productID: text(),
                        productType: maybe(ProductType.allCases.randomElement(using: &random)!), group: maybe(text()),
                        duration: maybe(duration()), purchaseDate: date(), expiresDate: maybe(date()), quantity: integer(),
                        autoRenew: maybe(chance(50)), deviceID: maybe(text()), environment: environment(), source: text(),
                        details: chance(50) ? AppleTransactionDetails() : details())
    }

    /// What the store said beyond the terms, each part present or not; the
    /// prices reach past a unit, a thousand and a billion.
    mutating func details() -> AppleTransactionDetails {
        let price = maybe(Amount(micros: Int64(pick([0, 1, 990_000, 9_990_000, 999_999, 1_000_000_000, 123_456_789_012_345_678]))))
        return AppleTransactionDetails(
            ownershipType: maybe(pick(["PURCHASED", "FAMILY_SHARED"])), offerType: maybe(Int.random(in: 1...4, using: &random)),
            webOrderLineItemID: maybe(text()), isUpgraded: maybe(chance(50)),
            sale: SaleTerms(price: price, currency: price == nil ? nil : pick(["USD", "EUR", "JPY", "KWD"]),
                            offerDiscount: maybe(OfferDiscount.allCases.randomElement(using: &random)!), storefront: maybe(text())))
    }

    mutating func delivery() -> ReminderDelivery {
        ReminderDelivery(reminderID: text(), type: chance(50) ? .expiryPrompt : .renewalReminder, group: text(), productID: text(),
                         expiresAt: date(), lead: duration(), dueAt: date(), date: date(), attempt: integer(),
                         error: maybe(text()), source: text())
    }

    mutating func event(_ type: LedgerEventType) -> LedgerEvent {
        switch type {
        case .purchased: .purchased(transaction())
        case .renewed: .renewed(transaction())
        case .restored: .restored(transaction())
        case .refunded:
            .refunded(RefundFact(transactionID: text(), originalTransactionID: text(), productID: text(), revocationDate: date(),
                                 reason: maybe(text()), environment: environment(), source: text()))
        case .refundReversed:
            .refundReversed(RefundReversal(transactionID: text(), originalTransactionID: text(), productID: text(), date: date(),
                                           reason: maybe(text()), environment: environment(), source: text()))
        case .renewalExtended:
            .renewalExtended(RenewalExtension(transactionID: text(), originalTransactionID: text(), productID: text(),
                                              expiresDate: date(), effectiveDate: date(), environment: environment(), source: text()))
        case .expired:
            .expired(ExpiryFact(originalTransactionID: maybe(text()), group: text(), productID: maybe(text()), expiresDate: date(),
                                reason: maybe(text()), environment: environment(), source: text()))
        case .autoRenewChanged:
            .autoRenewChanged(AutoRenewChange(originalTransactionID: text(), productID: maybe(text()), autoRenew: chance(50),
                                              effectiveDate: date(), environment: environment(), source: text()))
        case .billingIssue:
            .billingIssue(BillingIssue(originalTransactionID: text(), productID: maybe(text()), effectiveDate: date(),
                                       gracePeriodExpiresDate: maybe(date()), environment: environment(), source: text()))
        case .transferredOut, .transferredIn:
            {
                let transfer = TransferFact(originalTransactionID: text(), fromSubscriberID: text(), toSubscriberID: text(),
                                            afterPosition: Int64(integer()), date: date(), transaction: maybe(transaction()),
                                            source: text())
                return type == .transferredIn ? .transferredIn(transfer) : .transferredOut(transfer)
            }()
        case .deviceSeen: .deviceSeen(DeviceSeen(deviceID: text(), date: date(), source: text()))
        case .reminderSent: .reminderSent(delivery())
        case .reminderFailed: .reminderFailed(delivery())
        case .granted:
            .granted(SupportGrant(grantID: text(), entitlement: text(), startsAt: date(), endsAt: date(), reason: text(),
                                  grantedBy: ActorStamp(role: text(), keyFingerprint: text(), actor: maybe(text())), source: text()))
        case .grantRevoked:
            .grantRevoked(GrantRevocation(grantID: text(), date: date(), reason: maybe(text()),
                                          revokedBy: ActorStamp(role: text(), keyFingerprint: text(), actor: maybe(text())),
                                          source: text()))
        case .erased:
            .erased(SubscriberErasure(date: date(), reason: text(),
                                      erasedBy: ActorStamp(role: text(), keyFingerprint: text(), actor: maybe(text())), source: text()))
        case .googlePlayPurchase:
            .googlePlayPurchase(GooglePlayPurchase(
                kind: chance(50) ? .subscription : .product, purchaseToken: text(), orderID: maybe(text()), productID: text(),
                basePlanID: maybe(text()), state: GooglePlayPurchase.State.allCases.randomElement(using: &random)!, startTime: date(),
                expiryTime: maybe(date()), autoRenew: maybe(chance(50)), linkedPurchaseToken: maybe(text()), acknowledged: chance(50),
                observedAt: date(), environment: environment(), quantity: integer(), source: text()))
        case .googlePlayVoided:
            .googlePlayVoided(GooglePlayVoid(purchaseToken: text(), orderID: maybe(text()), voidedAt: date(),
                                             reason: maybe(integer()), voidedSource: maybe(integer()), environment: environment(),
                                             source: text()))
        }
    }
}

/// JSON as PostgreSQL prints a `jsonb` value: keys shortest first, then by
/// bytes; `": "` and `", "` between; only `"`, `\` and control characters
/// escaped. Optionally with every other character escaped as `\uXXXX`
/// (surrogate pairs beyond the BMP) and random whitespace, which a reader
/// must take as well.
enum JSONBText {
    static func format(_ data: Data, escapingEverything: Bool = false, random: inout SplitMix64) -> Data {
        guard case .success(let value) = JSONValue.parse(data) else { fatalError("the encoder wrote invalid JSON") }
        var out = ""
        write(value, escapingEverything: escapingEverything, random: &random, to: &out)
        return Data(out.utf8)
    }

    private static func write(_ value: JSONValue, escapingEverything: Bool, random: inout SplitMix64, to out: inout String) {
        func space() -> String {
            escapingEverything ? ["", " ", "\n", "\t\r "].randomElement(using: &random)! : ""
        }
        switch value {
        case .null: out += "null"
        case .bool(let flag): out += flag ? "true" : "false"
        case .integer(let number): out += String(number)
        case .number(let number): out += String(number)
        case .string(let text): string(text, escapingEverything: escapingEverything, random: &random, to: &out)
        case .array(let items):
            out += "[" + space()
            for (index, item) in items.enumerated() {
                if index > 0 { out += ", " }
                write(item, escapingEverything: escapingEverything, random: &random, to: &out)
            }
            out += space() + "]"
        case .object(let members):
            let keys = members.keys.sorted { left, right in
                let (left, right) = (Array(left.utf8), Array(right.utf8))
                return left.count != right.count ? left.count < right.count : left.lexicographicallyPrecedes(right)
            }
            out += space() + "{" + space()
            for (index, key) in keys.enumerated() {
                if index > 0 { out += space() + ", " + space() }
                // Keys stay unescaped: a real jsonb key is, and an escaped one is left to JSONDecoder.
                string(key, escapingEverything: false, random: &random, to: &out)
                out += space() + ": " + space()
                write(members[key]!, escapingEverything: escapingEverything, random: &random, to: &out)
            }
            out += space() + "}" + space()
        }
    }

    private static func string(_ text: String, escapingEverything: Bool, random: inout SplitMix64, to out: inout String) {
        out += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{8}": out += "\\b"
            case "\u{C}": out += "\\f"
            case _ where scalar.value < 0x20 || (escapingEverything && Bool.random(using: &random)):
                let uppercase = Bool.random(using: &random)
                if scalar.value > 0xFFFF {
                    let offset = scalar.value - 0x10000
                    out += hex(0xD800 + offset >> 10, uppercase) + hex(0xDC00 + offset & 0x3FF, uppercase)
                } else {
                    out += hex(scalar.value, uppercase)
                }
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }

    private static func hex(_ value: UInt32, _ uppercase: Bool) -> String {
        let digits = String(value, radix: 16, uppercase: uppercase)
        return "\\u" + String(repeating: "0", count: 4 - digits.count) + digits
    }
}

/// One random change to a payload: a byte removed, replaced or inserted;
/// the end cut off; a member repeated, added, nulled or given a value of
/// another type; a number written another way.
enum Mutation {
    static func apply(to data: Data, random: inout SplitMix64) -> Data {
        var bytes = Array(data)
        let special = Array(#"{}[]":,\ 0-.eE"#.utf8) + [0x00, 0x0A, 0x80, 0xC3, 0xFF]
        switch Int.random(in: 0..<10, using: &random) {
        case 0 where !bytes.isEmpty:
            bytes.remove(at: Int.random(in: 0..<bytes.count, using: &random))
        case 1 where !bytes.isEmpty:
            bytes[Int.random(in: 0..<bytes.count, using: &random)] = special.randomElement(using: &random)!
        case 2:
            bytes.insert(special.randomElement(using: &random)!, at: Int.random(in: 0...bytes.count, using: &random))
        case 3:
            bytes = Array(bytes.prefix(Int.random(in: 0...bytes.count, using: &random)))
        case 4, 5, 6, 7:
            guard case .success(.object(var members)) = JSONValue.parse(data), let key = members.keys.randomElement(using: &random)
            else { break }
            switch Int.random(in: 0..<6, using: &random) {
            case 0: members[key] = .null
            case 1: members.removeValue(forKey: key)
            case 2: members["unexpected"] = .string("x")
            case 3: members[key] = [.integer(1), .bool(true), .string("2024-01-01T00:00:00Z"), .number(1.5), .array([]),
                                    .object([:]), .string("Production"), .string("P1D")].randomElement(using: &random)!
            case 4:
                // The same key twice (the encoder never writes it).
                var text = String(decoding: data, as: UTF8.self)
                text.removeLast()
                let value = String(decoding: try! JSONEncoder().encode(members[key]!), as: UTF8.self)
                return Data((text + ",\"\(key)\":" + value + "}").utf8)
            default:
                return Data(String(decoding: data, as: UTF8.self)
                    .replacingOccurrences(of: ":1,", with: [":1.0,", ":1e0,", ":-0,", ":01,", ": 1 ,"].randomElement(using: &random)!)
                    .utf8)
            }
            return try! JSONEncoder().encode(JSONValue.object(members))
        default:
            // Whitespace where JSON allows it, or where it does not.
            let at = Int.random(in: 0...bytes.count, using: &random)
            bytes.insert(contentsOf: Array([" ", "\t", "\r\n", "\u{A0}", "\u{B}"].randomElement(using: &random)!.utf8), at: at)
        }
        return Data(bytes)
    }
}
