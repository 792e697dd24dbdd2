import Foundation
import Ledger
import Logging

/// Everything `subledger` reads from its environment (each also a `serve` flag).
public struct ServerConfiguration: Sendable {
    /// Absent: an embedded cluster under `dataDirectory`.
    public var databaseURL: String?
    public var dataDirectory: String = "./.subledger"
    public var host: String = "127.0.0.1"
    public var port: Int = 8080
    public var apiKeys: APIKeys = APIKeys()
    public var productsPath: String?
    public var restorePolicy: RestorePolicy = .transfer
    public var webhookURL: String?
    public var webhookSecret: String?
    public var appStoreRootCertificates: [String] = []
    public var appStoreBundleID: String?
    public var appStoreVerifyURL: String = "https://buy.itunes.apple.com/verifyReceipt"
    public var appStoreSandboxURL: String = "https://sandbox.itunes.apple.com/verifyReceipt"
    public var appStoreSharedSecret: String?
    /// Pauses before each retry of a temporary receipt status (their count is the number of retries).
    public var appStoreReceiptRetryDelays: [Duration] = [.milliseconds(500), .seconds(1), .seconds(2)]
    /// How long one `verifyReceipt` call may take.
    public var appStoreReceiptTimeout: Duration = .seconds(15)
    public var logLevel: Logger.Level = .info
    /// Largest request body accepted, in bytes (the contract's 1 MiB).
    public var maximumBodySize: Int = 1 << 20
    public var poolSize: Int = 16

    public init() {}

    /// Reads the variables PRODUCT.md lists; a malformed value is an error naming it.
    public init(environment: [String: String]) throws(ConfigurationError) {
        func value(_ name: String) -> String? {
            guard let raw = environment[name]?.trimmingCharacters(in: .whitespaces), !raw.isEmpty else { return nil }
            return raw
        }
        databaseURL = value("DATABASE_URL")
        if let directory = value("SUBLEDGER_DATA_DIR") { dataDirectory = directory }
        if let host = value("HOST") { self.host = host }
        if let port = value("PORT") {
            guard let number = Int(port), (0...65535).contains(number) else {
                throw ConfigurationError(variable: "PORT", message: "expected a port number from 0 to 65535, got \(port)")
            }
            self.port = number
        }
        if let keys = value("SUBLEDGER_API_KEYS") { apiKeys = try APIKeys(parsing: keys) }
        productsPath = value("SUBLEDGER_PRODUCTS")
        if let policy = value("SUBLEDGER_RESTORE_POLICY") {
            guard let parsed = RestorePolicy(rawValue: policy) else {
                throw ConfigurationError(variable: "SUBLEDGER_RESTORE_POLICY", message: "expected transfer or keep-original, got \(policy)")
            }
            restorePolicy = parsed
        }
        webhookURL = value("SUBLEDGER_WEBHOOK_URL")
        webhookSecret = value("SUBLEDGER_WEBHOOK_SECRET")
        if let roots = value("SUBLEDGER_APPSTORE_ROOT_CERTS") {
            appStoreRootCertificates = roots.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        }
        appStoreBundleID = value("SUBLEDGER_APPSTORE_BUNDLE_ID")
        if let url = value("SUBLEDGER_APPSTORE_VERIFY_URL") { appStoreVerifyURL = url }
        if let url = value("SUBLEDGER_APPSTORE_SANDBOX_URL") { appStoreSandboxURL = url }
        appStoreSharedSecret = value("SUBLEDGER_APPSTORE_SHARED_SECRET")
        if let level = value("LOG_LEVEL") {
            guard let parsed = Logger.Level(rawValue: level.lowercased()) else {
                throw ConfigurationError(variable: "LOG_LEVEL", message: "expected trace, debug, info, notice, warning, error or critical, got \(level)")
            }
            logLevel = parsed
        }
    }
}

public struct ConfigurationError: Error, CustomStringConvertible, Sendable {
    public var variable: String
    public var message: String
    public var description: String { "\(variable): \(message)" }
}

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

    func allows(_ role: Role) -> Bool {
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
    }
    var entries: [Entry] = []

    public init() {}

    public init(_ keys: [(Role, String)]) {
        entries = keys.map { Entry(role: $0.0, key: Array($0.1.utf8)) }
    }

    public init(parsing text: String) throws(ConfigurationError) {
        for item in text.split(separator: ",") {
            let parts = item.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, let role = Role(rawValue: parts[0]), !parts[1].isEmpty else {
                // Never echo the item: it may hold a key.
                throw ConfigurationError(
                    variable: "SUBLEDGER_API_KEYS",
                    message: "expected role:key pairs separated by commas, with roles ingest, support or admin")
            }
            entries.append(Entry(role: role, key: Array(parts[1].utf8)))
        }
    }

    public var isEmpty: Bool { entries.isEmpty }

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
