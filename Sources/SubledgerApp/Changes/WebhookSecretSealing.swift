import Crypto
import Foundation
import Logging
import Postgres
import Synchronization

/// Webhook endpoints' secrets are stored sealed (AES-256-GCM), as
/// `whseal1:<key id>:<base64 of nonce, ciphertext and tag>` in
/// `webhook_endpoints.secret` and `previous_secret`.
///
/// The key: with `SUBLEDGER_SECRET`, one derived from it (HKDF, its own
/// purpose; key id `s`), kept outside the database, so a dump alone does not
/// reveal the secrets. Without it, a random key stored in
/// `webhook_sealing_keys` (key id `d`): a copy of `webhook_endpoints` alone
/// (a table-level backup, a leaked export) does not reveal them; a dump of
/// the whole database does. Rows sealed with the database key are sealed
/// again with the derived one once a secret is configured (when the database
/// is prepared). A secret stored plain by an earlier version is read as it
/// is and sealed at the same moment.
///
/// `@unchecked Sendable`: `SymmetricKey` is not marked `Sendable` (swift-crypto
/// 3.12), but it is an immutable value; these keys are never mutated.
public struct WebhookSecretSealing: @unchecked Sendable {
    static let prefix = "whseal1:"

    struct CannotUnseal: Error, CustomStringConvertible {
        var description: String {
            "the endpoint's secret cannot be unsealed (was SUBLEDGER_SECRET changed? rotate the endpoint's secret)"
        }
    }

    private let keys: [String: SymmetricKey]
    private let sealingKeyID: String

    /// `secret`: key material derived from the installation secret
    /// (`InstallationSecret.derivedKeyBytes(for: .webhookSecretSealing)`);
    /// `databaseKey`: the stored key, when there is one.
    public init(secret: Data?, databaseKey: Data?) {
        var keys: [String: SymmetricKey] = [:]
        if let secret { keys["s"] = Self.derive(secret) }
        if let databaseKey { keys["d"] = Self.derive(databaseKey) }
        self.keys = keys
        sealingKeyID = secret == nil ? "d" : "s"
    }

    private static func derive(_ material: Data) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: material), salt: Data("subledger webhooks".utf8),
                               info: Data("whseal1".utf8), outputByteCount: 32)
    }

    /// Seals a secret for storage.
    public func seal(_ plain: String) throws -> String {
        guard let key = keys[sealingKeyID] else { throw CannotUnseal() }
        guard let combined = try AES.GCM.seal(Data(plain.utf8), using: key).combined else { throw CannotUnseal() }
        return Self.prefix + sealingKeyID + ":" + combined.base64EncodedString()
    }

    /// The secret of a stored value (a plain one, from an earlier version, as it is).
    public func open(_ stored: String) throws -> String {
        guard stored.hasPrefix(Self.prefix) else { return stored }
        let rest = stored.dropFirst(Self.prefix.count)
        let parts = rest.split(separator: ":", maxSplits: 1)
        guard parts.count == 2, let key = keys[String(parts[0])], let combined = Data(base64Encoded: String(parts[1])),
              let box = try? AES.GCM.SealedBox(combined: combined), let plain = try? AES.GCM.open(box, using: key) else {
            throw CannotUnseal()
        }
        return String(decoding: plain, as: UTF8.self)
    }

    /// Whether `stored` should be sealed (again): plain, or under another key than the sealing one.
    func needsSealing(_ stored: String) -> Bool {
        !stored.hasPrefix(Self.prefix + sealingKeyID + ":")
    }

    /// The sealing for `secret`, with the database key (made on first use
    /// when there is no secret).
    public static func load(secret: Data?, on connection: Connection) async throws -> WebhookSecretSealing {
        if secret == nil {
            let key = SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }
            try await WebhookStore.insertSealingKey(key, on: connection)
        }
        let stored = try await WebhookStore.sealingKey(on: connection)
        return WebhookSecretSealing(secret: secret, databaseKey: stored)
    }

    public static func load(secret: Data?, pool: ConnectionPool) async throws -> WebhookSecretSealing {
        try await pool.withConnection { try await load(secret: secret, on: $0) }
    }

    /// Seals every stored secret that is plain or sealed under another key
    /// than the current one (`PreparedDatabase`); returns how many. One
    /// transaction; a secret that cannot be opened is left as it is.
    @discardableResult
    public static func sealStoredSecrets(secret: Data?, conninfo: String, logger: Logger) async throws -> Int {
        let connection = try await Connection.connect(to: conninfo, logger: logger)
        defer { connection.close() }
        let sealing = try await load(secret: secret, on: connection)
        return try await connection.withTransaction { connection in
            var sealed = 0
            for row in try await WebhookStore.lockStoredSecrets(on: connection) {
                var values: [String?] = [row.secret, row.previousSecret]
                var changed = false
                for index in values.indices {
                    guard let stored = values[index], sealing.needsSealing(stored), let plain = try? sealing.open(stored) else { continue }
                    values[index] = try sealing.seal(plain)
                    changed = true
                }
                guard changed else { continue }
                try await WebhookStore.updateSecrets(of: row.id, secret: values[0], previousSecret: values[1], on: connection)
                sealed += 1
            }
            if sealed > 0 { logger.notice("webhook endpoint secrets sealed", metadata: ["webhooks.sealed": "\(sealed)"]) }
            return sealed
        }
    }
}

/// Loads the sealing once per process part that needs it (the dispatcher,
/// the webhook routes), on first use.
public final class WebhookSealingSource: Sendable {
    public let secret: Data?
    private let loaded = Mutex<WebhookSecretSealing?>(nil)

    public init(secret: Data?) {
        self.secret = secret
    }

    public convenience init(_ installationSecret: InstallationSecret) {
        self.init(secret: installationSecret.derivedKeyBytes(for: .webhookSecretSealing))
    }

    public func sealing(pool: ConnectionPool) async throws -> WebhookSecretSealing {
        if let sealing = loaded.withLock({ $0 }) { return sealing }
        let sealing = try await WebhookSecretSealing.load(secret: secret, pool: pool)
        loaded.withLock { $0 = sealing }
        return sealing
    }
}
