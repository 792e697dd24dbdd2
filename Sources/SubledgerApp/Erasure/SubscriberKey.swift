import Crypto
import Foundation
import Ledger

/// A subscriber's own key. It seals the personal fields of the subscriber's
/// events (AES-GCM) and digests their idempotency keys (HMAC-SHA256); it is
/// kept apart from the events, so destroying it on erasure leaves those
/// fields unreadable in the append-only log while every other field stays
/// as it was (docs/decisions/0004-erasure-by-crypto-shredding.md).
///
/// Three stored forms. A key made now is a version byte (2), 32 random bytes
/// for sealing and 32 others for digests, so no key serves two algorithms
/// and none is derived when the key is loaded. A key of version 1 is the
/// version byte and 32 random bytes from which HKDF-SHA256 derives the two
/// (deriving them on every load was 18–30% of a rebuild's CPU; such keys
/// are converted to version 2 with the same two keys when the database is
/// prepared, `SubscriberKeyConversion`). A key made before derivation
/// existed is its 32 bytes alone and serves both, as it did. What a key
/// sealed and digested must still open and match in every form: the log is
/// not rewritten.
///
/// `@unchecked Sendable`: `SymmetricKey` is not marked `Sendable`, but it is
/// an immutable value (its bytes are never changed after it is made).
public struct SubscriberKey: @unchecked Sendable {
    /// AES-256: 32 bytes of key material.
    public static let byteCount = 32
    /// The first byte of a key whose two keys HKDF derives from 32 bytes.
    static let derivedVersion: UInt8 = 1
    /// The first byte of a key stored as its two keys.
    static let separateVersion: UInt8 = 2
    /// The stored length of each form.
    static let derivedCount = 1 + byteCount, separateCount = 1 + 2 * byteCount

    /// What a sealed value starts with. No identifier the API accepts holds a
    /// control character, so a stored value with this prefix is sealed and
    /// one without it was stored before sealing existed and is read as it is.
    public static let sealedPrefix = "\u{1F}sealed:"

    /// The key's bytes, to store in its own table.
    public let rawValue: Data
    /// Made once: every seal and open uses it.
    private let sealingKey: SymmetricKey
    /// For a key of version 1, derived when the first idempotency-key digest
    /// needs it: reads and rebuilds, which only open sealed fields, never do.
    private let digestKey: DigestKey

    /// A fresh random key: its two keys, stored with their version.
    public static func generate() -> SubscriberKey {
        generate(count: 1)[0]
    }

    /// `count` fresh random keys, their bytes drawn from the system's
    /// generator at once: a write of new subscribers (an import batch makes
    /// a hundred) asks the kernel once, not once a key.
    public static func generate(count: Int) -> [SubscriberKey] {
        guard count > 0 else { return [] }
        let width = 2 * byteCount
        return SymmetricKey(size: SymmetricKeySize(bitCount: 8 * width * count)).withUnsafeBytes { random in
            (0..<count).map { index in
                var raw = Data(capacity: separateCount)
                raw.append(separateVersion)
                raw.append(contentsOf: random[(index * width)..<((index + 1) * width)])
                return SubscriberKey(checked: raw)
            }
        }
    }

    /// The key as stored (`rawValue`) in any of its forms; anything else is
    /// refused.
    public init(rawValue: Data) throws(SealError) {
        switch (rawValue.count, rawValue.first) {
        case (Self.byteCount, _), (Self.derivedCount, Self.derivedVersion), (Self.separateCount, Self.separateVersion): break
        default: throw SealError.keyLength(rawValue.count)
        }
        self.init(checked: rawValue)
    }

    private init(checked rawValue: Data) {
        self.rawValue = rawValue
        switch rawValue.count {
        case Self.separateCount:
            let start = rawValue.startIndex + 1
            sealingKey = SymmetricKey(data: rawValue[start..<(start + Self.byteCount)])
            digestKey = DigestKey(SymmetricKey(data: rawValue[(start + Self.byteCount)...]))
        case Self.derivedCount:
            // HKDF's extract step is the same for both keys (same material,
            // no salt), so it runs once; each key is its own expand step.
            let pseudoRandomKey = HKDF<SHA256>.extract(inputKeyMaterial: SymmetricKey(data: rawValue.dropFirst()), salt: Data())
            sealingKey = HKDF<SHA256>.expand(pseudoRandomKey: pseudoRandomKey, info: Data("subledger subscriber seal v1".utf8),
                                             outputByteCount: Self.byteCount)
            digestKey = DigestKey(deriving: Data(pseudoRandomKey))
        default:
            sealingKey = SymmetricKey(data: rawValue)
            digestKey = DigestKey(sealingKey)
        }
    }

    /// The same key stored as its two keys (version 2): what it seals and
    /// digests is unchanged.
    public var separated: SubscriberKey {
        guard rawValue.count != Self.separateCount else { return self }
        var raw = Data(capacity: Self.separateCount)
        raw.append(Self.separateVersion)
        sealingKey.withUnsafeBytes { raw.append(contentsOf: $0) }
        digestKey.value.withUnsafeBytes { raw.append(contentsOf: $0) }
        return SubscriberKey(checked: raw)
    }

    /// The digest key: the sealing key itself for a key made before
    /// derivation, else expanded from the pseudo-random key on first use and
    /// kept. Kept as an HMAC already keyed, which each digest copies: keying
    /// one (two hashes of the padded key) was most of a digest's cost.
    private final class DigestKey: @unchecked Sendable {
        private let lock = NSLock()
        private var key: SymmetricKey?
        private var keyed: HMAC<SHA256>?
        private let pseudoRandomKey: Data

        init(_ key: SymmetricKey) {
            self.key = key
            pseudoRandomKey = Data()
        }

        init(deriving pseudoRandomKey: Data) {
            self.pseudoRandomKey = pseudoRandomKey
        }

        var value: SymmetricKey {
            lock.withLock { derive() }
        }

        /// An HMAC under the key with nothing authenticated yet.
        var mac: HMAC<SHA256> {
            lock.withLock {
                if let keyed { return keyed }
                let made = HMAC<SHA256>(key: derive())
                keyed = made
                return made
            }
        }

        /// Called under `lock`.
        private func derive() -> SymmetricKey {
            if let key { return key }
            let derived = HKDF<SHA256>.expand(pseudoRandomKey: pseudoRandomKey, info: Data("subledger subscriber digest v1".utf8),
                                              outputByteCount: SubscriberKey.byteCount)
            key = derived
            return derived
        }
    }

    /// Whether sealing and digests use two keys (any key made since
    /// derivation existed).
    public var separatesItsKeys: Bool { rawValue.count != Self.byteCount }

    /// `value` sealed for the stream named `pseudonym`: the prefix, then
    /// base64url of nonce, ciphertext and tag. The pseudonym is authenticated
    /// with it, so a sealed value copied into another stream does not open.
    public func seal(_ value: String, pseudonym: String) throws -> String {
        let box = try AES.GCM.seal(Data(value.utf8), using: sealingKey, authenticating: Data(pseudonym.utf8))
        guard let combined = box.combined else { throw SealError.unreadable }
        return Self.sealedPrefix + Self.base64URL(combined)
    }

    /// The value `seal` sealed; a value without the prefix as it is.
    public func open(_ stored: String, pseudonym: String) throws(SealError) -> String {
        guard stored.hasPrefix(Self.sealedPrefix) else { return stored }
        guard let combined = Self.data(base64URL: stored.dropFirst(Self.sealedPrefix.count)),
              let box = try? AES.GCM.SealedBox(combined: combined),
              let plain = try? AES.GCM.open(box, using: sealingKey, authenticating: Data(pseudonym.utf8)),
              let value = String(data: plain, encoding: .utf8)
        else { throw SealError.unreadable }
        return value
    }

    /// The event with its personal fields sealed (`LedgerEvent.mappingPersonalFields`).
    public func sealingPersonalFields(of event: LedgerEvent, pseudonym: String) throws -> LedgerEvent {
        try event.mappingPersonalFields { try seal($0, pseudonym: pseudonym) }
    }

    /// The event with its personal fields opened; `SealError.unreadable`
    /// when one does not open with this key.
    public func openingPersonalFields(of event: LedgerEvent, pseudonym: String) throws -> LedgerEvent {
        try event.mappingPersonalFields { try open($0, pseudonym: pseudonym) }
    }

    /// A ledger idempotency key as the store keeps it: the same for the same
    /// key under this subscriber key (so a retried fact is still found), and
    /// unreadable once the key is destroyed (ledger keys name device ids,
    /// transfers' subscribers and reminders).
    public func digest(ofLedgerKey ledgerKey: String) -> String {
        digest(ofLedgerKey: ledgerKey, characters: .max)
    }

    /// The first `characters` of `digest(ofLedgerKey:)` (43 in all).
    public func digest(ofLedgerKey ledgerKey: String, characters: Int) -> String {
        var mac = digestKey.mac
        var text = ledgerKey
        text.withUTF8 { mac.update(data: UnsafeRawBufferPointer($0)) }
        return mac.finalize().withUnsafeBytes { Self.base64URL($0, characters: characters) }
    }

    /// Base64url without padding.
    static func base64URL(_ data: Data) -> String {
        data.withUnsafeBytes { base64URL($0, characters: (data.count * 8 + 5) / 6) }
    }

    private static let base64URLAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// The first `characters` of the bytes' base64url (no padding), written
    /// straight into the string: through Foundation's base64 and a pass
    /// replacing `+` and `/` it was an array, a `Data` and a copy for every
    /// event's key digest and sealed field.
    static func base64URL(_ bytes: UnsafeRawBufferPointer, characters: Int) -> String {
        let count = min(characters, (bytes.count * 8 + 5) / 6)
        return String(unsafeUninitializedCapacity: count) { out in
            for index in 0..<count {
                let bit = index * 6
                let byte = bit / 8, shift = bit % 8
                var value = Int(bytes[byte]) << 8
                if byte + 1 < bytes.count { value |= Int(bytes[byte + 1]) }
                out[index] = base64URLAlphabet[(value >> (10 - shift)) & 0x3F]
            }
            return count
        }
    }

    static func data(base64URL text: Substring) -> Data? {
        var bytes = Array(text.utf8)
        for index in bytes.indices {
            switch bytes[index] {
            case UInt8(ascii: "-"): bytes[index] = UInt8(ascii: "+")
            case UInt8(ascii: "_"): bytes[index] = UInt8(ascii: "/")
            case UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: "="): return nil
            default: break
            }
        }
        bytes += repeatElement(UInt8(ascii: "="), count: (4 - bytes.count % 4) % 4)
        return Data(base64Encoded: Data(bytes))
    }
}

/// Why a personal field or a key could not be used.
public enum SealError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A stored key of none of the three forms.
    case keyLength(Int)
    /// A sealed value that this key does not open: another key sealed it,
    /// or it was altered.
    case unreadable

    public var description: String {
        switch self {
        case .keyLength(let count):
            "a subscriber key is \(SubscriberKey.byteCount) bytes, or \(SubscriberKey.derivedCount) or \(SubscriberKey.separateCount) "
                + "starting with their version byte, not \(count)"
        case .unreadable: "a sealed personal field does not open with the subscriber's key"
        }
    }
}
