import Crypto
import Foundation
import Synchronization

/// The installation's secret (`SUBLEDGER_SECRET`): the key of every digest
/// that names something personal or secret outside the database's own rows —
/// the streams' pseudonyms, the audit's API-key fingerprints and the log
/// lines' subscriber references — so that whoever holds a dump, a log file or a standby cannot
/// confirm a guessed id or recover a weak key by trying candidates.
///
/// Each use gets a key of its own, derived with HKDF-SHA256 (`Purpose`), so
/// a digest made for one purpose says nothing about another. Without a
/// secret the digests are plain SHA-256 of a domain and the bytes, as before
/// the secret existed; `serve` warns at start.
///
/// Kept outside the database on purpose: a secret stored beside the data it
/// protects is in every dump of that data.
public struct InstallationSecret: Sendable {
    /// Each derived key's use, which is also its HKDF `info`.
    public enum Purpose: String, Sendable, CaseIterable {
        /// `APIKeys.fingerprint(of:)`: which key acted, in the audit.
        case keyFingerprint = "subledger key fingerprint v1"
        /// `LogReference.subscriber(_:)`: which subscriber a log line is about.
        case logReference = "subledger log reference v1"
        /// `WebhookSecretSealing`: the key that seals webhook endpoints' secrets.
        case webhookSecretSealing = "subledger webhook secret sealing v1"
        /// `PseudonymScheme`: the pseudonym that names a subscriber's stream.
        case streamPseudonym = "subledger stream pseudonym v1"
        /// `ChangeFold.digest`: a change's id made from the subscriber and the transition.
        case changeID = "subledger change id v1"
    }

    /// The shortest secret accepted, in bytes of its text: 256 bits of a
    /// random hexadecimal or base64 string and then some.
    public static let minimumLength = 32

    /// Each purpose's derived key, as bytes (`SymmetricKey` is not `Sendable`).
    private let keys: [Purpose: [UInt8]]

    /// No secret: plain digests.
    public static let none = InstallationSecret(keys: [:])

    private init(keys: [Purpose: [UInt8]]) {
        self.keys = keys
    }

    /// A secret from its text (`SUBLEDGER_SECRET`); nil or empty: none.
    public init(_ text: String?) throws(ConfigurationError) {
        guard let text, !text.isEmpty else {
            self = .none
            return
        }
        guard text.utf8.count >= Self.minimumLength else {
            // Never echo the value: it is the secret.
            throw ConfigurationError(
                variable: ConfigurationVariable.secret.name,
                message: "expected at least \(Self.minimumLength) characters (e.g. `openssl rand -hex 32`), got \(text.utf8.count)")
        }
        let master = SymmetricKey(data: Data(text.utf8))
        var keys: [Purpose: [UInt8]] = [:]
        for purpose in Purpose.allCases {
            let derived = HKDF<SHA256>.deriveKey(
                inputKeyMaterial: master, salt: Data("subledger".utf8), info: Data(purpose.rawValue.utf8), outputByteCount: 32)
            keys[purpose] = derived.withUnsafeBytes { Array($0) }
        }
        self.init(keys: keys)
    }

    /// Whether a secret was given.
    public var isConfigured: Bool { !keys.isEmpty }

    /// The bytes of the key derived for `purpose`, for uses that are not
    /// digests (sealing); nil without a secret.
    public func derivedKeyBytes(for purpose: Purpose) -> Data? {
        keys[purpose].map { $0.withUnsafeBytes { Data($0) } }
    }

    /// The first `hexDigits` hexadecimal digits of the keyed digest of
    /// `bytes` for `purpose` (HMAC-SHA256), or, without a secret, of
    /// SHA-256 over the bytes alone (what fingerprints were before).
    public func digest(_ bytes: some Sequence<UInt8>, for purpose: Purpose, hexDigits: Int = 12) -> String {
        let data = Array(bytes)
        if let key = keys[purpose] {
            return Self.hex(HMAC<SHA256>.authenticationCode(for: data, using: SymmetricKey(data: key)), digits: hexDigits)
        }
        return Self.hex(SHA256.hash(data: data), digits: hexDigits)
    }

    static func hex(_ bytes: some Sequence<UInt8>, digits: Int) -> String {
        let alphabet = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(digits)
        for byte in bytes where text.count < digits {
            text.append(alphabet[Int(byte >> 4)])
            if text.count < digits { text.append(alphabet[Int(byte & 0x0F)]) }
        }
        return String(decoding: text, as: UTF8.self)
    }

    // MARK: The process's secret

    private static let installed = Mutex((secret: InstallationSecret.none, scheme: PseudonymScheme.unkeyed))

    /// The secret the process runs with: set once by `serve` (and the other
    /// commands) from the configuration, read by the digests that have no
    /// configuration at hand (log references, streams' pseudonyms).
    public static var current: InstallationSecret {
        installed.withLock { $0.secret }
    }

    /// The pseudonym scheme of `current`, made once per install.
    static var currentPseudonymScheme: PseudonymScheme {
        installed.withLock { $0.scheme }
    }

    /// Makes `secret` the process's secret. The database's streams must be
    /// named under its scheme before the process serves
    /// (`StreamNamingConversion`, run when the database is prepared).
    public static func install(_ secret: InstallationSecret) {
        let scheme = PseudonymScheme(secret)
        installed.withLock { $0 = (secret, scheme) }
    }
}
