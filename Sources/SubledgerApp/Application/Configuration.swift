import Foundation
import Ledger
import Logging
import Postgres

/// Everything `subledger` reads from its environment (each also a `serve` flag).
public struct SubledgerConfiguration: Sendable {
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
    /// The environments App Store notifications and receipts are accepted
    /// from (`SUBLEDGER_APPSTORE_ENVIRONMENTS`); others are refused, not stored.
    public var appStoreEnvironments: Set<Ledger.Environment> = [.production, .sandbox]
    /// The app's Apple ID; when set, a notification's `appAppleId` must match.
    public var appStoreAppAppleID: Int64?
    /// Pauses before each retry of a temporary receipt status (their count is the number of retries).
    public var appStoreReceiptRetryDelays: [Duration] = [.milliseconds(500), .seconds(1), .seconds(2)]
    /// How long one `verifyReceipt` call may take.
    public var appStoreReceiptTimeout: Duration = .seconds(15)
    /// App Store Server API: the in-app purchase key (`.p8`), its id and the team's issuer id.
    public var appStoreKeyFile: String?
    public var appStoreKeyID: String?
    public var appStoreIssuerID: String?
    public var appStoreAPIURL: String = "https://api.storekit.itunes.apple.com"
    public var appStoreAPISandboxURL: String = "https://api.storekit-sandbox.itunes.apple.com"
    /// Between reconciliations of missed notifications; nil (`P0D`): off.
    public var appStoreReconcileInterval: Duration? = .seconds(3600)
    /// Whether a plain restore is checked with the App Store Server API first.
    public var restoreVerification: RestoreVerification = .none
    /// Retries, pacing and timeouts of the App Store Server API client (tests shorten them).
    public var appStoreAPISettings = AppStoreAPISettings()
    public var logLevel: Logger.Level = .info
    /// Largest request body accepted, in bytes (the contract's 1 MiB).
    public var maximumBodySize: Int = 1 << 20
    public var poolSize: Int = 16
    /// How long a request's head and body may take to arrive (`SUBLEDGER_HTTP_READ_TIMEOUT`); later: 408 and close.
    public var httpReadTimeout: Duration = .seconds(10)
    /// How long a keep-alive connection may sit between requests (`SUBLEDGER_HTTP_IDLE_TIMEOUT`).
    public var httpIdleTimeout: Duration = .seconds(60)
    /// Connections open at once (`SUBLEDGER_HTTP_MAX_CONNECTIONS`); more wait to be accepted.
    public var httpMaximumConnections: Int = 1000
    /// Limits every service connection sets on itself, so a stuck statement,
    /// lock wait or forgotten transaction cannot hold a connection for ever.
    public var sessionTimeouts = SessionTimeouts(
        statementTimeout: .seconds(30), lockTimeout: .seconds(10), idleInTransactionSessionTimeout: .seconds(60))

    public init() {}

    /// Reads the variables PRODUCT.md lists; a malformed value is an error naming it.
    public init(environment: [String: String]) throws(ConfigurationError) {
        func value(_ name: String) -> String? {
            guard let raw = environment[name]?.trimmingCharacters(in: .whitespaces), !raw.isEmpty else { return nil }
            return raw
        }
        /// Seconds (fractions allowed) as a duration.
        func seconds(_ name: String) throws(ConfigurationError) -> Duration? {
            guard let text = value(name) else { return nil }
            guard let number = Double(text), number > 0, number <= 86_400 else {
                throw ConfigurationError(variable: name, message: "expected seconds from 0.001 to 86400, got \(text)")
            }
            return .milliseconds(Int64((number * 1000).rounded(.up)))
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
        if let list = value("SUBLEDGER_APPSTORE_ENVIRONMENTS") {
            var accepted = Set<Ledger.Environment>()
            for item in list.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) {
                switch item.lowercased() {
                case "production": accepted.insert(.production)
                // Xcode and local StoreKit testing count as Sandbox.
                case "sandbox", "xcode", "localtesting": accepted.insert(.sandbox)
                default:
                    throw ConfigurationError(variable: "SUBLEDGER_APPSTORE_ENVIRONMENTS",
                                             message: "expected Production, Sandbox or both separated by a comma, got \(item)")
                }
            }
            guard !accepted.isEmpty else {
                throw ConfigurationError(variable: "SUBLEDGER_APPSTORE_ENVIRONMENTS", message: "names no environment")
            }
            appStoreEnvironments = accepted
        }
        if let id = value("SUBLEDGER_APPSTORE_APP_APPLE_ID") {
            guard let number = Int64(id), number > 0 else {
                throw ConfigurationError(variable: "SUBLEDGER_APPSTORE_APP_APPLE_ID", message: "expected the app's numeric Apple ID, got \(id)")
            }
            appStoreAppAppleID = number
        }
        try readAppStoreAPI(value)
        sessionTimeouts.statementTimeout = try seconds("SUBLEDGER_DB_STATEMENT_TIMEOUT") ?? sessionTimeouts.statementTimeout
        sessionTimeouts.lockTimeout = try seconds("SUBLEDGER_DB_LOCK_TIMEOUT") ?? sessionTimeouts.lockTimeout
        sessionTimeouts.idleInTransactionSessionTimeout =
            try seconds("SUBLEDGER_DB_IDLE_IN_TRANSACTION_TIMEOUT") ?? sessionTimeouts.idleInTransactionSessionTimeout
        httpReadTimeout = try seconds("SUBLEDGER_HTTP_READ_TIMEOUT") ?? httpReadTimeout
        httpIdleTimeout = try seconds("SUBLEDGER_HTTP_IDLE_TIMEOUT") ?? httpIdleTimeout
        if let count = value("SUBLEDGER_HTTP_MAX_CONNECTIONS") {
            guard let number = Int(count), (1...1_000_000).contains(number) else {
                throw ConfigurationError(variable: "SUBLEDGER_HTTP_MAX_CONNECTIONS", message: "expected a count from 1 to 1000000, got \(count)")
            }
            httpMaximumConnections = number
        }
        if let bytes = value("SUBLEDGER_MAX_BODY_BYTES") {
            guard let number = Int(bytes), (1024...(256 << 20)).contains(number) else {
                throw ConfigurationError(variable: "SUBLEDGER_MAX_BODY_BYTES", message: "expected bytes from 1024 to 268435456, got \(bytes)")
            }
            maximumBodySize = number
        }
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
