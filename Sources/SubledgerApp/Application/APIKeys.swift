import Crypto

/// An API key's role.
public enum Role: String, Sendable, CaseIterable {
    /// Writes events and reads subscribers (an app's backend).
    case ingest
    /// Reads everything, writes nothing (a support desk).
    case support
    /// Everything.
    case admin
}

/// What a route needs from the caller's role.
public enum Access: Sendable {
    /// Record facts: ingest, admin.
    case write
    /// Read a subscriber's state and history: every role.
    case readSubscribers
    /// Read across subscribers (reminders, transactions, invalid identifiers): support, admin.
    case support
    /// Operations (refresh from the App Store, parked events): admin only.
    case admin

    package func allows(_ role: Role) -> Bool {
        switch (self, role) {
        case (_, .admin): true
        case (.write, .ingest), (.readSubscribers, .ingest), (.readSubscribers, .support), (.support, .support): true
        default: false
        }
    }
}

/// The keys from `SUBLEDGER_API_KEYS` (`role:key,...`).
public struct APIKeys: Sendable {
    struct Entry: Sendable {
        var role: Role
        var key: [UInt8]
        /// What the audit records instead of the key (`fingerprint(of:)`).
        var fingerprint: String

        init(role: Role, key: [UInt8], secret: InstallationSecret) {
            self.role = role
            self.key = key
            fingerprint = APIKeys.fingerprint(of: key, secret: secret)
        }
    }
    var entries: [Entry] = []

    /// The shortest key `SUBLEDGER_API_KEYS` accepts, in characters. A key
    /// is a bearer credential tried online and, without `SUBLEDGER_SECRET`,
    /// offline against its fingerprint: 16 random characters of the base64
    /// alphabet are 96 bits, beyond either.
    public static let minimumKeyLength = 16

    public init() {}

    /// Keys as given (tests, the bench): no length check.
    public init(_ keys: [(Role, String)], secret: InstallationSecret = .current) {
        entries = keys.map { Entry(role: $0.0, key: Array($0.1.utf8), secret: secret) }
    }

    public init(parsing text: String, secret: InstallationSecret = .current) throws(ConfigurationError) {
        for (index, item) in text.split(separator: ",").enumerated() {
            let parts = item.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, let role = Role(rawValue: parts[0]), !parts[1].isEmpty else {
                // Never echo the item: it may hold a key.
                throw ConfigurationError(
                    variable: "SUBLEDGER_API_KEYS",
                    message: "expected role:key pairs separated by commas, with roles ingest, support or admin")
            }
            guard parts[1].count >= Self.minimumKeyLength else {
                throw ConfigurationError(
                    variable: "SUBLEDGER_API_KEYS",
                    message: "key \(index + 1) (role \(role.rawValue)) has \(parts[1].count) characters; "
                        + "expected at least \(Self.minimumKeyLength) (e.g. `openssl rand -hex 16`)")
            }
            entries.append(Entry(role: role, key: Array(parts[1].utf8), secret: secret))
        }
    }

    public var isEmpty: Bool { entries.isEmpty }

    /// 12 hex digits of the key's HMAC under `SUBLEDGER_SECRET`
    /// (`InstallationSecret`; its SHA-256 when no secret is set): tells keys
    /// apart in the audit without revealing them. Keyed, a fingerprint
    /// cannot be matched against guessed keys by whoever lacks the secret.
    public static func fingerprint(of key: some Sequence<UInt8>, secret: InstallationSecret = .current) -> String {
        secret.digest(key, for: .keyFingerprint)
    }

    /// The role and fingerprint of a presented key, compared as `role(for:)` does.
    public func identify(_ presented: some StringProtocol) -> (role: Role, fingerprint: String)? {
        let candidate = Array(presented.utf8)
        var found: (role: Role, fingerprint: String)?
        for entry in entries where constantTimeEquals(entry.key, candidate) {
            found = found ?? (entry.role, entry.fingerprint)
        }
        return found
    }

    /// The role of a presented key. Every configured key is compared in full,
    /// in time independent of where the bytes differ.
    public func role(for presented: some StringProtocol) -> Role? {
        let candidate = Array(presented.utf8)
        var found: Role?
        for entry in entries where constantTimeEquals(entry.key, candidate) {
            found = found ?? entry.role
        }
        return found
    }
}

/// Compares two byte strings without an early exit on the first difference.
func constantTimeEquals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
    var difference: UInt8 = lhs.count == rhs.count ? 0 : 1
    let length = max(lhs.count, rhs.count)
    for index in 0..<length {
        let left = index < lhs.count ? lhs[index] : 0
        let right = index < rhs.count ? rhs[index] : 0
        difference |= left ^ right
    }
    return difference == 0
}
