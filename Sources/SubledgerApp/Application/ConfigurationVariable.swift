/// A configuration variable, declared once: its environment name, the flag
/// of every `subledger` subcommand that overrides it, its default and what
/// it means. `SubledgerConfiguration(environment:)` reads only variables
/// declared here; `docs/configuration.md` lists exactly these (a test
/// compares the two, and with the names the sources mention).
///
/// To add a variable:
/// 1. add a `static let` below and put it in `all`;
/// 2. read it in `SubledgerConfiguration.init(environment:)` with
///    `value(.yourVariable)` (its default with `defaultValue(.yourVariable)`);
/// 3. add its flag to `ConfigurationOptions` (`Sources/CommandSupport/Options.swift`):
///    one `@Option` and one entry of `flags`;
/// 4. add its row to `docs/configuration.md`.
public struct ConfigurationVariable: Sendable, Hashable, CustomStringConvertible {
    /// The environment variable, e.g. `SUBLEDGER_API_KEYS`.
    public let name: String
    /// The long flag without its dashes, e.g. `api-keys`.
    public let flag: String
    /// The value when the variable is unset, as it is written; nil: none.
    public let defaultValue: String?
    /// One line: what it sets.
    public let help: String

    public init(_ name: String, flag: String, default defaultValue: String? = nil, help: String) {
        self.name = name
        self.flag = flag
        self.defaultValue = defaultValue
        self.help = help
    }

    public var description: String { name }

    /// The flag's `--help` text: what it sets, the variable, the default.
    public var flagHelp: String {
        "\(help) (\(name)\(defaultValue.map { ", default \($0)" } ?? ""))"
    }
}

extension ConfigurationVariable {
    public static let databaseURL = ConfigurationVariable(
        "DATABASE_URL", flag: "database-url", help: "PostgreSQL URL or conninfo; absent: an embedded cluster")
    public static let dataDirectory = ConfigurationVariable(
        "SUBLEDGER_DATA_DIR", flag: "data-dir", default: "./.subledger", help: "Folder of the embedded cluster")
    public static let sqlDirectory = ConfigurationVariable(
        "SUBLEDGER_SQL_DIR", flag: "sql-dir", help: "The sql/ migrations folder; absent: found beside the program")
    public static let host = ConfigurationVariable("HOST", flag: "host", default: "127.0.0.1", help: "Address to listen on")
    public static let port = ConfigurationVariable("PORT", flag: "port", default: "8080", help: "Port to listen on")
    public static let apiKeys = ConfigurationVariable(
        "SUBLEDGER_API_KEYS", flag: "api-keys", help: "API keys, role:key,... (roles ingest, support, admin)")
    public static let secret = ConfigurationVariable(
        "SUBLEDGER_SECRET", flag: "secret",
        help: "At least 32 characters that key the audit's key fingerprints and the logs' subscriber references; absent: unkeyed")
    public static let products = ConfigurationVariable("SUBLEDGER_PRODUCTS", flag: "products", help: "Product catalog JSON file")
    public static let restorePolicy = ConfigurationVariable(
        "SUBLEDGER_RESTORE_POLICY", flag: "restore-policy", default: "transfer", help: "transfer or keep-original")
    public static let restoreVerify = ConfigurationVariable(
        "SUBLEDGER_RESTORE_VERIFY", flag: "restore-verify", default: "none",
        help: "none, or api: check plain restores with the App Store Server API")
    public static let webhookURL = ConfigurationVariable(
        "SUBLEDGER_WEBHOOK_URL", flag: "webhook-url", help: "Where reminders are POSTed; absent: none are sent")
    public static let webhookSecret = ConfigurationVariable(
        "SUBLEDGER_WEBHOOK_SECRET", flag: "webhook-secret", help: "HMAC secret that signs the reminder webhook")
    public static let webhookAllowPrivate = ConfigurationVariable(
        "SUBLEDGER_WEBHOOK_ALLOW_PRIVATE", flag: "webhook-allow-private", default: "false",
        help: "true: webhook endpoints may be loopback or private addresses, and plain http to loopback (tests)")
    public static let expirySweepInterval = ConfigurationVariable(
        "SUBLEDGER_EXPIRY_SWEEP_INTERVAL", flag: "expiry-sweep-interval", default: "30",
        help: "Seconds between expiry sweeps")
    public static let maximumBodyBytes = ConfigurationVariable(
        "SUBLEDGER_MAX_BODY_BYTES", flag: "max-body-bytes", default: "1048576",
        help: "Largest request body accepted, in bytes (1024 to 268435456)")
    public static let statementTimeout = ConfigurationVariable(
        "SUBLEDGER_DB_STATEMENT_TIMEOUT", flag: "db-statement-timeout", default: "30", help: "Seconds a statement may run")
    public static let lockTimeout = ConfigurationVariable(
        "SUBLEDGER_DB_LOCK_TIMEOUT", flag: "db-lock-timeout", default: "10", help: "Seconds a statement may wait for a lock")
    public static let idleInTransactionTimeout = ConfigurationVariable(
        "SUBLEDGER_DB_IDLE_IN_TRANSACTION_TIMEOUT", flag: "db-idle-in-transaction-timeout", default: "60",
        help: "Seconds a transaction may sit idle")
    public static let appStoreRootCertificates = ConfigurationVariable(
        "SUBLEDGER_APPSTORE_ROOT_CERTS", flag: "appstore-root-certs",
        help: "Apple root certificates, comma-separated DER or PEM files")
    public static let appStoreBundleID = ConfigurationVariable(
        "SUBLEDGER_APPSTORE_BUNDLE_ID", flag: "appstore-bundle-id", help: "The app's bundle id")
    public static let appStoreAppAppleID = ConfigurationVariable(
        "SUBLEDGER_APPSTORE_APP_APPLE_ID", flag: "appstore-app-apple-id", help: "The app's Apple ID notifications must name")
    public static let appStoreEnvironments = ConfigurationVariable(
        "SUBLEDGER_APPSTORE_ENVIRONMENTS", flag: "appstore-environments", default: "Production,Sandbox",
        help: "Environments App Store facts are accepted from, comma-separated")
    public static let appStoreVerifyURL = ConfigurationVariable(
        "SUBLEDGER_APPSTORE_VERIFY_URL", flag: "appstore-verify-url", default: "https://buy.itunes.apple.com/verifyReceipt",
        help: "Receipt validation URL")
    public static let appStoreSandboxURL = ConfigurationVariable(
        "SUBLEDGER_APPSTORE_SANDBOX_URL", flag: "appstore-sandbox-url",
        default: "https://sandbox.itunes.apple.com/verifyReceipt", help: "Sandbox receipt validation URL")
    public static let appStoreSharedSecret = ConfigurationVariable(
        "SUBLEDGER_APPSTORE_SHARED_SECRET", flag: "appstore-shared-secret", help: "App-specific shared secret for receipts")
    public static let appStoreKeyFile = ConfigurationVariable(
        "SUBLEDGER_APPSTORE_KEY_FILE", flag: "appstore-key-file", help: "The in-app purchase key, a .p8 file")
    public static let appStoreKeyID = ConfigurationVariable(
        "SUBLEDGER_APPSTORE_KEY_ID", flag: "appstore-key-id", help: "The in-app purchase key's id")
    public static let appStoreIssuerID = ConfigurationVariable(
        "SUBLEDGER_APPSTORE_ISSUER_ID", flag: "appstore-issuer-id", help: "The team's issuer id")
    public static let appStoreAPIURL = ConfigurationVariable(
        "SUBLEDGER_APPSTORE_API_URL", flag: "appstore-api-url", default: "https://api.storekit.itunes.apple.com",
        help: "App Store Server API, production")
    public static let appStoreAPISandboxURL = ConfigurationVariable(
        "SUBLEDGER_APPSTORE_API_SANDBOX_URL", flag: "appstore-api-sandbox-url",
        default: "https://api.storekit-sandbox.itunes.apple.com", help: "App Store Server API, sandbox")
    public static let appStoreReconcileInterval = ConfigurationVariable(
        "SUBLEDGER_APPSTORE_RECONCILE_INTERVAL", flag: "appstore-reconcile-interval", default: "PT1H",
        help: "ISO 8601 duration between reconciliations of missed notifications, P0D = off")
    public static let httpReadTimeout = ConfigurationVariable(
        "SUBLEDGER_HTTP_READ_TIMEOUT", flag: "http-read-timeout", default: "10",
        help: "Seconds a request's head and body may take to arrive; later: 408 and close")
    public static let httpIdleTimeout = ConfigurationVariable(
        "SUBLEDGER_HTTP_IDLE_TIMEOUT", flag: "http-idle-timeout", default: "60",
        help: "Seconds a keep-alive connection may sit idle between requests")
    public static let httpMaximumConnections = ConfigurationVariable(
        "SUBLEDGER_HTTP_MAX_CONNECTIONS", flag: "http-max-connections", default: "1000",
        help: "Connections open at once; more wait to be accepted")
    public static let logLevel = ConfigurationVariable(
        "LOG_LEVEL", flag: "log-level", default: "info", help: "trace, debug, info, notice, warning, error or critical")
    public static let changesMaximumWait = ConfigurationVariable(
        "SUBLEDGER_CHANGES_MAX_WAIT", flag: "changes-max-wait", default: "30",
        help: "Seconds a GET /v1/changes long-poll is held at most, 0 to 30 (below a proxy's timeout)")
    public static let databaseReadURL = ConfigurationVariable(
        "DATABASE_READ_URL", flag: "database-read-url",
        help: "PostgreSQL URL of standbys for reads (state, history, listings, stats); absent: the primary reads")

    public static let audit = ConfigurationVariable(
        "SUBLEDGER_AUDIT", flag: "audit", default: "on",
        help: "on, or off: record no audit entries (for measuring what auditing costs)")
    public static let auditRetention = ConfigurationVariable(
        "SUBLEDGER_AUDIT_RETENTION", flag: "audit-retention", default: "P400D",
        help: "ISO 8601 duration audit entries are kept, P0D = for ever")
    public static let changesSweepInterval = ConfigurationVariable(
        "SUBLEDGER_CHANGES_SWEEP_INTERVAL", flag: "changes-sweep-interval", default: "15",
        help: "Longest seconds between looks for entitlement changes by time alone and due reminders, 1 to 60")
    public static let grantMaximumDuration = ConfigurationVariable(
        "SUBLEDGER_GRANT_MAX_DURATION", flag: "grant-max-duration", default: "P1Y",
        help: "ISO 8601 duration a support grant may last at most (its duration, or its endsAt from now)")
    public static let googlePlayPackageName = ConfigurationVariable(
        "SUBLEDGER_GOOGLEPLAY_PACKAGE_NAME", flag: "googleplay-package-name",
        help: "The app's package name pushes must name")
    public static let googlePlayServiceAccountFile = ConfigurationVariable(
        "SUBLEDGER_GOOGLEPLAY_SERVICE_ACCOUNT_FILE", flag: "googleplay-service-account-file",
        help: "The service account's JSON key file for the Play Developer API")
    public static let googlePlayAPIURL = ConfigurationVariable(
        "SUBLEDGER_GOOGLEPLAY_API_URL", flag: "googleplay-api-url", default: "https://androidpublisher.googleapis.com",
        help: "Base URL of the Play Developer API")
    public static let googlePlayPushAudience = ConfigurationVariable(
        "SUBLEDGER_GOOGLEPLAY_PUSH_AUDIENCE", flag: "googleplay-push-audience",
        help: "The audience of the Pub/Sub push subscription's OIDC token")
    public static let googlePlayPushServiceAccount = ConfigurationVariable(
        "SUBLEDGER_GOOGLEPLAY_PUSH_SERVICE_ACCOUNT", flag: "googleplay-push-service-account",
        help: "The service account email the push subscription authenticates as")
    public static let googlePlayJWKSURL = ConfigurationVariable(
        "SUBLEDGER_GOOGLEPLAY_JWKS_URL", flag: "googleplay-jwks-url", default: "https://www.googleapis.com/oauth2/v3/certs",
        help: "Where Google's keys for push tokens are published")
    public static let googlePlayReconcileInterval = ConfigurationVariable(
        "SUBLEDGER_GOOGLEPLAY_RECONCILE_INTERVAL", flag: "googleplay-reconcile-interval", default: "PT1H",
        help: "ISO 8601 duration between voided-purchase reconciliations (P0D: off)")
    public static let googlePlayEnvironments = ConfigurationVariable(
        "SUBLEDGER_GOOGLEPLAY_ENVIRONMENTS", flag: "googleplay-environments", default: "Production,Sandbox",
        help: "Environments whose Play purchases are recorded (test purchases are Sandbox)")
    /// Every variable, in the order `--help` and the docs list them.
    public static let all: [ConfigurationVariable] = [
        databaseURL, dataDirectory, sqlDirectory, host, port, apiKeys, products, restorePolicy, restoreVerify,
        webhookURL, webhookSecret, webhookAllowPrivate, expirySweepInterval, maximumBodyBytes, statementTimeout, lockTimeout,
        idleInTransactionTimeout, appStoreRootCertificates, appStoreBundleID, appStoreAppAppleID, appStoreEnvironments,
        appStoreVerifyURL, appStoreSandboxURL, appStoreSharedSecret, appStoreKeyFile, appStoreKeyID, appStoreIssuerID,
        appStoreAPIURL, appStoreAPISandboxURL, appStoreReconcileInterval, httpReadTimeout, httpIdleTimeout,
        httpMaximumConnections, logLevel,
        changesMaximumWait,
        audit, auditRetention,
        databaseReadURL,
        changesSweepInterval,
        secret,
        grantMaximumDuration,
        googlePlayPackageName, googlePlayServiceAccountFile, googlePlayAPIURL, googlePlayPushAudience, googlePlayPushServiceAccount, googlePlayJWKSURL, googlePlayReconcileInterval, googlePlayEnvironments,
    ]
}
