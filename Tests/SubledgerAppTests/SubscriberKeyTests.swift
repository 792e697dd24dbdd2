import Crypto
import Foundation
import Ledger
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
import TestSupport
import Testing

/// The building blocks of erasure by crypto-shredding: sealed personal
/// fields, digested idempotency keys, pseudonyms, and the one list of
/// erasure steps run in a transaction.
@Suite struct SubscriberKeyTests {
    static let pseudonym = "ps-" + String(repeating: "ab", count: 32)

    @Test func sealedValuesOpenOnlyWithTheirKeyAndStream() throws {
        var random = SplitMix64(seed: 3_601)
        let key = SubscriberKey.generate(), other = SubscriberKey.generate()
        for round in 0..<500 {
            let value = round % 5 == 0 ? "" : "device-\(random.next())-日本-🎉"
            let sealed = try key.seal(value, pseudonym: Self.pseudonym)
            #expect(sealed.hasPrefix(SubscriberKey.sealedPrefix))
            #expect(!sealed.contains(value) || value.isEmpty)
            #expect(try key.open(sealed, pseudonym: Self.pseudonym) == value)
            #expect(try key.seal(value, pseudonym: Self.pseudonym) != sealed, "a fresh nonce every time")
            #expect(throws: SealError.unreadable) { try other.open(sealed, pseudonym: Self.pseudonym) }
            #expect(throws: SealError.unreadable) { try key.open(sealed, pseudonym: "ps-other") }
            // Not the last character: some of its bits may be unused.
            var altered = Array(sealed)
            let index = altered.index(altered.endIndex, offsetBy: -(round % 20) - 2)
            altered[index] = altered[index] == "A" ? "B" : "A"
            #expect(throws: SealError.unreadable) { try key.open(String(altered), pseudonym: Self.pseudonym) }
        }
        // Values stored before sealing existed are read as they are.
        #expect(try key.open("device-plain", pseudonym: Self.pseudonym) == "device-plain")
    }

    @Test func keysRoundTripThroughTheirBytes() throws {
        let key = SubscriberKey.generate()
        let stored = try SubscriberKey(rawValue: key.rawValue)
        let sealed = try key.seal("device-1", pseudonym: Self.pseudonym)
        #expect(try stored.open(sealed, pseudonym: Self.pseudonym) == "device-1")
        #expect(key.rawValue.count == 2 * SubscriberKey.byteCount + 1 && key.rawValue.first == 2 && key.separatesItsKeys)
        #expect(throws: SealError.keyLength(31)) { try SubscriberKey(rawValue: Data(count: 31)) }
        #expect(throws: SealError.keyLength(33)) { try SubscriberKey(rawValue: Data([2]) + Data(count: 32)) }
        #expect(throws: SealError.keyLength(65)) { try SubscriberKey(rawValue: Data([1]) + Data(count: 64)) }
        #expect(throws: SealError.keyLength(64)) { try SubscriberKey(rawValue: Data([2]) + Data(count: 63)) }
        #expect(SubscriberKey.generate().rawValue != key.rawValue)
    }

    /// A key of version 1 seals and digests with two keys HKDF derives from
    /// its material, neither of them the material itself; a key stored
    /// before derivation (32 bytes) still seals and digests with its bytes,
    /// so what it sealed opens and its digests match as before.
    @Test func derivedKeysSealAndDigestWithTwoKeysDerivedFromTheirMaterial() throws {
        let material = SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }
        let key = try SubscriberKey(rawValue: Data([1]) + material)
        let legacy = try SubscriberKey(rawValue: material)
        #expect(key.separatesItsKeys && !legacy.separatesItsKeys)
        let sealed = try key.seal("device-1", pseudonym: Self.pseudonym)
        #expect(throws: SealError.unreadable) { try legacy.open(sealed, pseudonym: Self.pseudonym) }
        #expect(key.digest(ofLedgerKey: "device:1") != legacy.digest(ofLedgerKey: "device:1"))
        // The legacy form: AES-GCM and HMAC under the stored bytes themselves.
        let raw = SymmetricKey(data: material)
        let legacySealed = try legacy.seal("device-2", pseudonym: Self.pseudonym)
        #expect(try Self.open(legacySealed, with: raw) == "device-2")
        #expect(legacy.digest(ofLedgerKey: "device:2") == Self.digest("device:2", with: raw))
        // The derived form: HKDF-SHA256 of the material, no salt, one info per use.
        let prk = HKDF<SHA256>.extract(inputKeyMaterial: raw, salt: Data())
        let sealing = HKDF<SHA256>.expand(pseudoRandomKey: prk, info: Data("subledger subscriber seal v1".utf8), outputByteCount: 32)
        let digesting = HKDF<SHA256>.expand(pseudoRandomKey: prk, info: Data("subledger subscriber digest v1".utf8), outputByteCount: 32)
        #expect(try Self.open(sealed, with: sealing) == "device-1")
        #expect(key.digest(ofLedgerKey: "device:2") == Self.digest("device:2", with: digesting))
        #expect(key.digest(ofLedgerKey: "device:2") != Self.digest("device:2", with: raw))
        #expect(throws: (any Error).self) { try Self.open(sealed, with: raw) }
    }

    /// A key made now is its two keys as stored (version 2): the first 32
    /// bytes after the version seal, the last 32 digest. Every form's
    /// `separated` key seals, opens and digests as the key itself does.
    @Test func newKeysAreTheirTwoKeysAndEveryFormSeparatesToTheSame() throws {
        for _ in 0..<200 {
            let key = SubscriberKey.generate()
            let bytes = key.rawValue.dropFirst()
            #expect(bytes.prefix(32) != bytes.suffix(32))
            let sealed = try key.seal("device-3", pseudonym: Self.pseudonym)
            #expect(try Self.open(sealed, with: SymmetricKey(data: bytes.prefix(32))) == "device-3")
            #expect(key.digest(ofLedgerKey: "device:3") == Self.digest("device:3", with: SymmetricKey(data: bytes.suffix(32))))
            #expect(key.separated.rawValue == key.rawValue)
            let material = SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }
            for form in [try SubscriberKey(rawValue: Data([1]) + material), try SubscriberKey(rawValue: material)] {
                let separated = try SubscriberKey(rawValue: form.separated.rawValue)
                #expect(separated.rawValue.count == 65 && separated.rawValue.first == 2)
                #expect(try separated.open(try form.seal("device-4", pseudonym: Self.pseudonym), pseudonym: Self.pseudonym) == "device-4")
                #expect(try form.open(try separated.seal("device-5", pseudonym: Self.pseudonym), pseudonym: Self.pseudonym) == "device-5")
                #expect(separated.digest(ofLedgerKey: "device:6") == form.digest(ofLedgerKey: "device:6"))
            }
        }
    }

    static func open(_ sealed: String, with key: SymmetricKey) throws -> String {
        let combined = try #require(SubscriberKey.data(base64URL: sealed.dropFirst(SubscriberKey.sealedPrefix.count)))
        let plain = try AES.GCM.open(try AES.GCM.SealedBox(combined: combined), using: key, authenticating: Data(pseudonym.utf8))
        return String(decoding: plain, as: UTF8.self)
    }

    /// The digest as RFC 4648 §5 defines base64url (no padding), through
    /// Foundation's base64: independent of the service's own encoder.
    static func digest(_ ledgerKey: String, with key: SymmetricKey) -> String {
        referenceBase64URL(Data(HMAC<SHA256>.authenticationCode(for: Data(ledgerKey.utf8), using: key)))
    }

    static func referenceBase64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// The service's base64url equals Foundation's for every length of
    /// input up to 70 bytes (every remainder of three) and random bytes,
    /// whole or cut to fewer characters, and decodes back.
    @Test func base64URLMatchesTheStandardEncoding() throws {
        var random = SplitMix64(seed: 4_648)
        for length in 0...70 {
            for _ in 0..<20 {
                let data = Data((0..<length).map { _ in UInt8.random(in: 0...255, using: &random) })
                let encoded = SubscriberKey.base64URL(data)
                #expect(encoded == Self.referenceBase64URL(data), "\(length) bytes")
                #expect(SubscriberKey.data(base64URL: Substring(encoded)) == data)
                let cut = Int.random(in: 0...encoded.count, using: &random)
                #expect(data.withUnsafeBytes { SubscriberKey.base64URL($0, characters: cut) } == String(encoded.prefix(cut)))
            }
        }
        let key = SubscriberKey.generate()
        #expect(key.digest(ofLedgerKey: "device:7", characters: 22) == String(key.digest(ofLedgerKey: "device:7").prefix(22)))
    }

    /// Keys made together are as keys made one by one: each of the stored
    /// form, all different, each sealing what only it opens.
    @Test func keysMadeTogetherAreDistinctKeys() throws {
        let keys = SubscriberKey.generate(count: 200)
        #expect(keys.count == 200 && SubscriberKey.generate(count: 0).isEmpty)
        #expect(Set(keys.map(\.rawValue)).count == 200)
        for key in keys {
            #expect(key.rawValue.count == 65 && key.rawValue.first == 2)
            #expect(try SubscriberKey(rawValue: key.rawValue).digest(ofLedgerKey: "d") == key.digest(ofLedgerKey: "d"))
        }
        let sealed = try keys[0].seal("device-1", pseudonym: Self.pseudonym)
        #expect(try keys[0].open(sealed, pseudonym: Self.pseudonym) == "device-1")
        #expect(throws: SealError.unreadable) { try keys[1].open(sealed, pseudonym: Self.pseudonym) }
    }

    /// A sealed event as stored holds none of its personal values in any
    /// readable form, and opens back to the event.
    @Test func sealedEventsHoldNoPersonalValue() throws {
        var random = SplitMix64(seed: 3_602)
        let key = SubscriberKey.generate()
        let date = Date(timeIntervalSince1970: 1_700_000_000)
        for round in 0..<300 {
            let subscriber = "subscriber-\(UUID().uuidString.lowercased())"
            let other = "subscriber-\(UUID().uuidString.lowercased())"
            let device = "device-\(random.next())-\(UUID().uuidString)"
            let fact = TransactionFact(transactionID: "t\(round)", originalTransactionID: "o\(round)", productID: "com.example.pro",
                                       purchaseDate: date, deviceID: device)
            let transfer = TransferFact(originalTransactionID: "o\(round)", fromSubscriberID: other, toSubscriberID: subscriber,
                                        afterPosition: Int64(round), date: date, transaction: fact)
            let reminderID = Coverage.reminderID(subscriberID: subscriber, group: "pro", end: date, lead: ISODuration(days: 3))
            let delivery = ReminderDelivery(reminderID: reminderID, type: .renewalReminder, group: "pro", productID: "com.example.pro",
                                            expiresAt: date, lead: ISODuration(days: 3), dueAt: date, date: date)
            let events: [LedgerEvent] = [.purchased(fact), .renewed(fact), .restored(fact), .transferredIn(transfer),
                                         .transferredOut(transfer), .deviceSeen(DeviceSeen(deviceID: device, date: date, source: FactSource.api)),
                                         .reminderSent(delivery), .reminderFailed(delivery)]
            let scans = [subscriber, other, device].map(PersonalDataScan.init)
            for event in events {
                let sealed = try key.sealingPersonalFields(of: event, pseudonym: Self.pseudonym)
                let stored = String(decoding: try sealed.encodedData(), as: UTF8.self)
                for scan in scans { #expect(scan.matches(in: stored).isEmpty, "\(event.type) stores a personal value") }
                let decoded = try LedgerEvent.decode(type: sealed.type, schemaVersion: sealed.schemaVersion, data: Data(stored.utf8))
                #expect(try key.openingPersonalFields(of: decoded, pseudonym: Self.pseudonym) == event)
                #expect(throws: SealError.unreadable) {
                    try SubscriberKey.generate().openingPersonalFields(of: decoded, pseudonym: Self.pseudonym)
                }
            }
        }
    }

    @Test func idempotencyDigestsAreStablePerKeyAndUnreadable() {
        let key = SubscriberKey.generate(), other = SubscriberKey.generate()
        for round in 0..<200 {
            let ledgerKey = "device:device-\(round)-\(UUID().uuidString)"
            #expect(key.digest(ofLedgerKey: ledgerKey) == key.digest(ofLedgerKey: ledgerKey))
            #expect(key.digest(ofLedgerKey: ledgerKey) != other.digest(ofLedgerKey: ledgerKey))
            #expect(key.digest(ofLedgerKey: ledgerKey) != key.digest(ofLedgerKey: ledgerKey + "x"))
            #expect(PersonalDataScan(String(ledgerKey.dropFirst(7))).matches(in: key.digest(ofLedgerKey: ledgerKey)).isEmpty)
        }
    }

    @Test func pseudonymsAreStableDistinctAndHoldNoID() throws {
        var seen: Set<String> = []
        for round in 0..<2_000 {
            let id = round % 3 == 0 ? "s\(round)" : UUID().uuidString.lowercased()
            let pseudonym = SubscriberPseudonyms.pseudonym(for: id)
            #expect(pseudonym == SubscriberPseudonyms.pseudonym(for: id))
            #expect(SubscriberPseudonyms.isPseudonym(pseudonym))
            #expect(PersonalDataScan(id).matches(in: pseudonym).isEmpty)
            seen.insert(pseudonym)
        }
        #expect(seen.count == 2_000)
    }

    /// The scanner used on database dumps finds a token inside a JWS inside
    /// a JSON document that is itself base64-encoded, at every alignment.
    @Test func theScanFindsATokenAtEveryAlignment() {
        for lead in 0..<6 {
            let token = UUID().uuidString.lowercased()
            let claims = #"{"a":"\#(String(repeating: "x", count: lead))","appAccountToken":"\#(token)","q":1}"#
            let jws = "eyJhbGciOiJFUzI1NiJ9." + Data(claims.utf8).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "") + ".c2ln"
            let notification = #"{"signedTransactionInfo":"\#(jws)"}"#
            for outerLead in 0..<3 {
                let outer = Data(repeating: 65, count: outerLead) + Data(notification.utf8)
                let stored = "payload=" + outer.base64EncodedString()
                #expect(!PersonalDataScan(token).matches(in: stored).isEmpty, "lead \(lead), outer lead \(outerLead)")
            }
            #expect(!PersonalDataScan(token).matches(in: jws).isEmpty)
            #expect(PersonalDataScan(UUID().uuidString.lowercased()).matches(in: jws).isEmpty)
        }
        #expect(PersonalDataScan(UUID().uuidString).matches(in: String(repeating: "QUJD", count: 500)).isEmpty)
    }

    /// Steps run in order inside the caller's transaction; a failing step
    /// rolls back what the steps before it did, and is named.
    @Test func erasureStepsRunInOneTransaction() async throws {
        let connection = try await Connection.connect(to: try await TestDatabase.make())
        defer { connection.close() }
        try await connection.query(PostgresQuery(unsafeSQL: "CREATE TABLE erasure_probe (subscriber_id text NOT NULL)"))
        try await connection.query("INSERT INTO erasure_probe VALUES (\("s-1")), (\("s-2"))")
        let rewrite = ErasureStep(name: "probe") { subscriberID, pseudonym, connection in
            try await connection.query("UPDATE erasure_probe SET subscriber_id = \(pseudonym) WHERE subscriber_id = \(subscriberID)")
        }
        let failing = ErasureStep(name: "failing") { _, _, connection in
            try await connection.query(PostgresQuery(unsafeSQL: "SELECT 1 / 0"))
        }
        func ids() async throws -> [String] {
            try await connection.query(PostgresQuery(unsafeSQL: "SELECT subscriber_id FROM erasure_probe ORDER BY 1"))
                .map { try $0.decode(String.self, at: 0) }
        }

        await #expect(throws: ErasureStepError.self) {
            try await connection.withTransaction { connection in
                try await ErasureSteps([rewrite, failing]).run(subscriberID: "s-1", pseudonym: "ps-1", on: connection)
            }
        }
        #expect(try await ids() == ["s-1", "s-2"])
        do {
            try await connection.withTransaction { connection in
                try await ErasureSteps([rewrite, failing]).run(subscriberID: "s-1", pseudonym: "ps-1", on: connection)
            }
        } catch let error as ErasureStepError {
            #expect(error.step == "failing")
        }

        var steps = ErasureSteps([])
        steps.append(rewrite)
        try await connection.withTransaction { connection in
            try await steps.run(subscriberID: "s-1", pseudonym: "ps-1", on: connection)
        }
        #expect(try await ids() == ["ps-1", "s-2"])
    }
}
