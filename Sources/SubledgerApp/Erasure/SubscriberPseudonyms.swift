import Crypto
import Foundation
import Ledger

/// Names a subscriber in the event log without its id: `ps-` and 32
/// hexadecimal digits (128 bits) of a digest of the id under the scheme in
/// force (`PseudonymScheme`). It is the same every time, so the write path
/// names a stream with no lookup, and after erasure the stream still answers
/// for the id. Nobody can read an id from it; with `SUBLEDGER_SECRET` the
/// digest is keyed, so whoever holds a dump, a standby or the change feed
/// but not the secret cannot confirm a guessed id either
/// (docs/decisions/0004-erasure-by-crypto-shredding.md).
public enum SubscriberPseudonyms {
    /// The pseudonym of `subscriberID` under the process's scheme.
    public static func pseudonym(for subscriberID: String) -> String {
        PseudonymScheme.current.pseudonym(for: subscriberID)
    }

    /// Whether `text` has the shape of a pseudonym.
    public static func isPseudonym(_ text: some StringProtocol) -> Bool {
        InputLimits.hasPseudonymShape(text)
    }
}

/// How subscriber ids become pseudonyms: SHA-256 of a domain and the id
/// (no secret), or HMAC-SHA256 under the key `SUBLEDGER_SECRET` derives for
/// the purpose. The database records the scheme its streams are named under
/// (`stream_naming`, sql/0034), and `StreamNamingConversion` renames them
/// when the process's scheme differs, so the two always agree while serving.
public struct PseudonymScheme: Sendable, Equatable {
    /// What is digested before the id: a domain, so the digest of an id is
    /// no digest anything else computes.
    static let domain = Array("subscriber\u{1F}".utf8)

    /// Hexadecimal digits kept of the digest: 128 bits, far from any
    /// collision among subscriber ids.
    static let digits = 32

    /// An HMAC under the scheme's key, with nothing authenticated yet (each
    /// pseudonym copies it rather than keying one again); nil: the unkeyed scheme.
    private let keyed: KeyedMAC?

    /// `HMAC` is a value that is only read once made; the box shares it.
    private final class KeyedMAC: @unchecked Sendable {
        let mac: HMAC<SHA256>
        init(_ key: [UInt8]) { mac = HMAC<SHA256>(key: SymmetricKey(data: key)) }
    }

    /// The scheme's name as `stream_naming` records it: `sha256`, or
    /// `hmac-sha256:` and 16 hexadecimal digits of the key's HMAC of a fixed
    /// text — tells one secret from another without revealing either.
    public let name: String

    /// The scheme without a secret.
    public static let unkeyed = PseudonymScheme(key: nil)

    /// The scheme of `secret` (unkeyed when it has none).
    public init(_ secret: InstallationSecret) {
        self.init(key: secret.derivedKeyBytes(for: .streamPseudonym).map(Array.init))
    }

    private init(key: [UInt8]?) {
        keyed = key.map(KeyedMAC.init)
        if let key {
            let check = HMAC<SHA256>.authenticationCode(for: Array("subledger pseudonym scheme check".utf8), using: SymmetricKey(data: key))
            name = "hmac-sha256:" + InstallationSecret.hex(check, digits: 16)
        } else {
            name = "sha256"
        }
    }

    /// The process's scheme: that of `InstallationSecret.current`.
    public static var current: PseudonymScheme { InstallationSecret.currentPseudonymScheme }

    /// `ps-` and the first 32 hexadecimal digits of the id's digest.
    public func pseudonym(for subscriberID: String) -> String {
        var message = Self.domain
        message.append(contentsOf: subscriberID.utf8)
        if let keyed {
            var mac = keyed.mac
            mac.update(data: message)
            return "ps-" + InstallationSecret.hex(mac.finalize(), digits: Self.digits)
        }
        return "ps-" + InstallationSecret.hex(SHA256.hash(data: message), digits: Self.digits)
    }

    public static func == (lhs: PseudonymScheme, rhs: PseudonymScheme) -> Bool { lhs.name == rhs.name }
}
