import ArgumentParser
import Foundation
import Logging
import HTTPAPI
import SubledgerApp

/// The configuration every subcommand reads: environment variables, each
/// overridable by the flag of the same meaning.
struct ConfigurationOptions: ParsableArguments {
    @Option(name: .customLong("database-url"), help: "PostgreSQL URL (DATABASE_URL); absent: an embedded cluster.")
    var databaseURL: String?
    @Option(name: .customLong("data-dir"), help: "Folder of the embedded cluster (SUBLEDGER_DATA_DIR, default ./.subledger).")
    var dataDirectory: String?
    @Option(help: "Address to listen on (HOST, default 127.0.0.1).")
    var host: String?
    @Option(help: "Port to listen on (PORT, default 8080).")
    var port: Int?
    @Option(name: .customLong("api-keys"), help: "role:key,... (SUBLEDGER_API_KEYS).")
    var apiKeys: String?
    @Option(help: "Product catalog JSON file (SUBLEDGER_PRODUCTS).")
    var products: String?
    @Option(name: .customLong("restore-policy"), help: "transfer or keep-original (SUBLEDGER_RESTORE_POLICY).")
    var restorePolicy: String?
    @Option(name: .customLong("webhook-url"), help: "Where reminders are POSTed (SUBLEDGER_WEBHOOK_URL).")
    var webhookURL: String?
    @Option(name: .customLong("webhook-secret"), help: "HMAC secret of the reminder webhook (SUBLEDGER_WEBHOOK_SECRET).")
    var webhookSecret: String?
    @Option(name: .customLong("appstore-root-certs"), help: "Apple root certificates, comma-separated DER or PEM files (SUBLEDGER_APPSTORE_ROOT_CERTS).")
    var appStoreRootCertificates: String?
    @Option(name: .customLong("appstore-bundle-id"), help: "The app's bundle id (SUBLEDGER_APPSTORE_BUNDLE_ID).")
    var appStoreBundleID: String?
    @Option(name: .customLong("appstore-verify-url"), help: "Receipt validation URL (SUBLEDGER_APPSTORE_VERIFY_URL).")
    var appStoreVerifyURL: String?
    @Option(name: .customLong("appstore-sandbox-url"), help: "Sandbox receipt validation URL (SUBLEDGER_APPSTORE_SANDBOX_URL).")
    var appStoreSandboxURL: String?
    @Option(name: .customLong("appstore-shared-secret"), help: "App-specific shared secret (SUBLEDGER_APPSTORE_SHARED_SECRET).")
    var appStoreSharedSecret: String?
    @Option(name: .customLong("appstore-environments"), help: "Production, Sandbox or both, comma-separated (SUBLEDGER_APPSTORE_ENVIRONMENTS).")
    var appStoreEnvironments: String?
    @Option(name: .customLong("appstore-app-apple-id"), help: "The app's Apple ID notifications must name (SUBLEDGER_APPSTORE_APP_APPLE_ID).")
    var appStoreAppAppleID: String?
    @Option(name: .customLong("max-body-bytes"), help: "Largest request body accepted (SUBLEDGER_MAX_BODY_BYTES, default 1 MiB).")
    var maximumBodyBytes: String?
    @Option(name: .customLong("db-statement-timeout"), help: "Seconds a statement may run (SUBLEDGER_DB_STATEMENT_TIMEOUT, default 30).")
    var statementTimeout: String?
    @Option(name: .customLong("db-lock-timeout"), help: "Seconds a statement may wait for a lock (SUBLEDGER_DB_LOCK_TIMEOUT, default 10).")
    var lockTimeout: String?
    @Option(name: .customLong("db-idle-in-transaction-timeout"),
            help: "Seconds a transaction may sit idle (SUBLEDGER_DB_IDLE_IN_TRANSACTION_TIMEOUT, default 60).")
    var idleInTransactionTimeout: String?
    @Option(name: .customLong("http-read-timeout"),
            help: "Seconds a request's head and body may take to arrive, then 408 (SUBLEDGER_HTTP_READ_TIMEOUT, default 10).")
    var httpReadTimeout: String?
    @Option(name: .customLong("http-idle-timeout"),
            help: "Seconds a keep-alive connection may sit idle (SUBLEDGER_HTTP_IDLE_TIMEOUT, default 60).")
    var httpIdleTimeout: String?
    @Option(name: .customLong("http-max-connections"),
            help: "Connections open at once (SUBLEDGER_HTTP_MAX_CONNECTIONS, default 1000).")
    var httpMaximumConnections: String?
    @Option(name: .customLong("appstore-key-file"), help: "The in-app purchase key, a .p8 file (SUBLEDGER_APPSTORE_KEY_FILE).")
    var appStoreKeyFile: String?
    @Option(name: .customLong("appstore-key-id"), help: "The in-app purchase key's id (SUBLEDGER_APPSTORE_KEY_ID).")
    var appStoreKeyID: String?
    @Option(name: .customLong("appstore-issuer-id"), help: "The team's issuer id (SUBLEDGER_APPSTORE_ISSUER_ID).")
    var appStoreIssuerID: String?
    @Option(name: .customLong("appstore-api-url"), help: "App Store Server API, production (SUBLEDGER_APPSTORE_API_URL).")
    var appStoreAPIURL: String?
    @Option(name: .customLong("appstore-api-sandbox-url"), help: "App Store Server API, sandbox (SUBLEDGER_APPSTORE_API_SANDBOX_URL).")
    var appStoreAPISandboxURL: String?
    @Option(name: .customLong("appstore-reconcile-interval"),
            help: "ISO 8601 duration between reconciliations, P0D = off (SUBLEDGER_APPSTORE_RECONCILE_INTERVAL, default PT1H).")
    var appStoreReconcileInterval: String?
    @Option(name: .customLong("restore-verify"), help: "none or api (SUBLEDGER_RESTORE_VERIFY).")
    var restoreVerify: String?
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error (LOG_LEVEL).")
    var logLevel: String?

    /// The environment with the flags laid over it.
    func resolve(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> SubledgerConfiguration {
        var merged = environment
        let flags: [(String, String?)] = [
            ("DATABASE_URL", databaseURL), ("SUBLEDGER_DATA_DIR", dataDirectory), ("HOST", host),
            ("PORT", port.map(String.init)), ("SUBLEDGER_API_KEYS", apiKeys), ("SUBLEDGER_PRODUCTS", products),
            ("SUBLEDGER_RESTORE_POLICY", restorePolicy), ("SUBLEDGER_WEBHOOK_URL", webhookURL),
            ("SUBLEDGER_WEBHOOK_SECRET", webhookSecret), ("SUBLEDGER_APPSTORE_ROOT_CERTS", appStoreRootCertificates),
            ("SUBLEDGER_APPSTORE_BUNDLE_ID", appStoreBundleID), ("SUBLEDGER_APPSTORE_VERIFY_URL", appStoreVerifyURL),
            ("SUBLEDGER_APPSTORE_SANDBOX_URL", appStoreSandboxURL),
            ("SUBLEDGER_APPSTORE_SHARED_SECRET", appStoreSharedSecret), ("LOG_LEVEL", logLevel),
            ("SUBLEDGER_APPSTORE_ENVIRONMENTS", appStoreEnvironments), ("SUBLEDGER_APPSTORE_APP_APPLE_ID", appStoreAppAppleID),
            ("SUBLEDGER_MAX_BODY_BYTES", maximumBodyBytes), ("SUBLEDGER_DB_STATEMENT_TIMEOUT", statementTimeout),
            ("SUBLEDGER_DB_LOCK_TIMEOUT", lockTimeout), ("SUBLEDGER_DB_IDLE_IN_TRANSACTION_TIMEOUT", idleInTransactionTimeout),
            ("SUBLEDGER_HTTP_READ_TIMEOUT", httpReadTimeout), ("SUBLEDGER_HTTP_IDLE_TIMEOUT", httpIdleTimeout),
            ("SUBLEDGER_HTTP_MAX_CONNECTIONS", httpMaximumConnections), ("SUBLEDGER_APPSTORE_KEY_FILE", appStoreKeyFile),
            ("SUBLEDGER_APPSTORE_KEY_ID", appStoreKeyID), ("SUBLEDGER_APPSTORE_ISSUER_ID", appStoreIssuerID),
            ("SUBLEDGER_APPSTORE_API_URL", appStoreAPIURL), ("SUBLEDGER_APPSTORE_API_SANDBOX_URL", appStoreAPISandboxURL),
            ("SUBLEDGER_APPSTORE_RECONCILE_INTERVAL", appStoreReconcileInterval), ("SUBLEDGER_RESTORE_VERIFY", restoreVerify),
        ]
        for case let (name, value?) in flags { merged[name] = value }
        do {
            return try SubledgerConfiguration(environment: merged)
        } catch {
            throw ValidationError(error.description)
        }
    }
}

/// Logging to standard error at the configured level, bootstrapped once.
enum LoggingSetup {
    nonisolated(unsafe) private static var done = false

    static func logger(_ configuration: SubledgerConfiguration, label: String = "subledger") -> Logger {
        if !done {
            done = true
            let level = configuration.logLevel
            LoggingSystem.bootstrap { label in
                var handler = DeferredMetadataLogHandler(StreamLogHandler.standardError(label: label))
                handler.logLevel = level
                return handler
            }
        }
        return Logger(label: label)
    }
}
