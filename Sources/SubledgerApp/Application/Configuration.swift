import Foundation
import Ledger
import Logging
import Postgres

/// Everything `subledger` reads from its environment, each variable also a
/// flag of every subcommand. The variables, their flags and defaults are
/// declared in `ConfigurationVariable`; this type reads them, and only them.
public struct SubledgerConfiguration: Sendable {
    /// Absent: an embedded cluster under `dataDirectory`.
    public var databaseURL: String?
    /// Standbys that answer reads (`DATABASE_READ_URL`); nil: the primary does.
    public var databaseReadURL: String?
    public var dataDirectory: String
    /// The `sql/` migrations folder; nil: found beside the program (`SQLDirectory`).
    public var sqlDirectory: String?
    public var host: String
    public var port: Int
    public var apiKeys: APIKeys
    /// `SUBLEDGER_SECRET`: keys the digests of keys and ids (`InstallationSecret`).
    public var secret: InstallationSecret
    public var productsPath: String?
    public var restorePolicy: RestorePolicy
    public var webhookURL: String?
    public var webhookSecret: String?
    /// Whether webhook endpoints may be loopback or private addresses
    /// (`SUBLEDGER_WEBHOOK_ALLOW_PRIVATE`; `WebhookDestinations`).
    public var webhookAllowPrivate: Bool
    /// Between runs of the expiry sweeper.
    public var expirySweepInterval: Duration
    public var appStoreRootCertificates: [String]
    public var appStoreBundleID: String?
    public var appStoreVerifyURL: String
    public var appStoreSandboxURL: String
    public var appStoreSharedSecret: String?
    /// The environments App Store notifications and receipts are accepted
    /// from; others are refused, not stored.
    public var appStoreEnvironments: Set<Ledger.Environment>
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
    public var appStoreAPIURL: String
    public var appStoreAPISandboxURL: String
    /// Between reconciliations of missed notifications; nil (`P0D`): off.
    public var appStoreReconcileInterval: Duration?
    /// Whether a plain restore is checked with the App Store Server API first.
    public var restoreVerification: RestoreVerification
    /// Retries, pacing and timeouts of the App Store Server API client (tests shorten them).
    public var appStoreAPISettings = AppStoreAPISettings()
    public var logLevel: Logger.Level
    /// Largest request body accepted, in bytes.
    public var maximumBodySize: Int
    public var poolSize: Int = 16
    /// How long a request's head and body may take to arrive (`SUBLEDGER_HTTP_READ_TIMEOUT`); later: 408 and close.
    public var httpReadTimeout: Duration = .seconds(10)
    /// How long a keep-alive connection may sit between requests (`SUBLEDGER_HTTP_IDLE_TIMEOUT`).
    public var httpIdleTimeout: Duration = .seconds(60)
    /// Connections open at once (`SUBLEDGER_HTTP_MAX_CONNECTIONS`); more wait to be accepted.
    public var httpMaximumConnections: Int = 1000
    /// Limits every service connection sets on itself, so a stuck statement,
    /// lock wait or forgotten transaction cannot hold a connection for ever.
    public var sessionTimeouts: SessionTimeouts
    /// The longest a change feed long-poll is held (`SUBLEDGER_CHANGES_MAX_WAIT`), whatever `wait` asks.
    public var changesMaximumWait: Duration = .seconds(30)
    /// The longest wait between two rounds of the change feed's time sweeper
    /// (`SUBLEDGER_CHANGES_SWEEP_INTERVAL`): how late a transition by time
    /// alone or a due reminder may be published.
    public var changesSweepInterval: Duration = .seconds(15)
    /// Whether requests about subscribers are audited (`SUBLEDGER_AUDIT`).
    public var auditEnabled = true
    /// How long audit entries are kept; nil: for ever (`SUBLEDGER_AUDIT_RETENTION`).
    public var auditRetention: AuditRetention?
    /// The longest a support grant may last (`SUBLEDGER_GRANT_MAX_DURATION`).
    public var grantMaximumDuration = ISODuration(years: 1)
    /// Google Play (`SUBLEDGER_GOOGLEPLAY_*`).
    public var googlePlay: GooglePlayConfiguration

    /// Every variable at its default.
    public init() {
        do {
            try self.init(environment: [:])
        } catch {
            fatalError("a default of ConfigurationVariable does not parse: \(error)")
        }
    }

    /// Reads every variable of `ConfigurationVariable.all` from `environment`,
    /// unset ones at their defaults; a malformed value is an error naming it.
    public init(environment: [String: String]) throws(ConfigurationError) {
        func value(_ variable: ConfigurationVariable) -> String? {
            guard let raw = environment[variable.name]?.trimmingCharacters(in: .whitespaces), !raw.isEmpty else {
                return variable.defaultValue
            }
            return raw
        }
        func fail(_ variable: ConfigurationVariable, _ message: String) -> ConfigurationError {
            ConfigurationError(variable: variable.name, message: message)
        }
        /// Seconds (fractions allowed) as a duration.
        func seconds(_ variable: ConfigurationVariable) throws(ConfigurationError) -> Duration {
            let text = value(variable) ?? ""
            guard let number = Double(text), number > 0, number <= 86_400 else {
                throw fail(variable, "expected seconds from 0.001 to 86400, got \(text)")
            }
            return .milliseconds(Int64((number * 1000).rounded(.up)))
        }
        databaseURL = value(.databaseURL)
        databaseReadURL = value(.databaseReadURL)
        dataDirectory = value(.dataDirectory) ?? ""
        sqlDirectory = value(.sqlDirectory)
        host = value(.host) ?? ""
        let port = value(.port) ?? ""
        guard let portNumber = Int(port), (0...65535).contains(portNumber) else {
            throw fail(.port, "expected a port number from 0 to 65535, got \(port)")
        }
        self.port = portNumber
        secret = try InstallationSecret(value(.secret))
        if let keys = value(.apiKeys) { apiKeys = try APIKeys(parsing: keys, secret: secret) } else { apiKeys = APIKeys() }
        productsPath = value(.products)
        let policy = value(.restorePolicy) ?? ""
        guard let parsedPolicy = RestorePolicy(rawValue: policy) else {
            throw fail(.restorePolicy, "expected transfer or keep-original, got \(policy)")
        }
        restorePolicy = parsedPolicy
        webhookURL = value(.webhookURL)
        webhookSecret = value(.webhookSecret)
        switch (value(.webhookAllowPrivate) ?? "").lowercased() {
        case "false": webhookAllowPrivate = false
        case "true": webhookAllowPrivate = true
        case let other: throw fail(.webhookAllowPrivate, "expected true or false, got \(other.prefix(64))")
        }
        let sweep = value(.expirySweepInterval) ?? ""
        guard let sweepSeconds = Int(sweep), sweepSeconds > 0 else {
            throw fail(.expirySweepInterval, "expected a positive number of seconds, got \(sweep)")
        }
        expirySweepInterval = .seconds(sweepSeconds)
        appStoreRootCertificates = value(.appStoreRootCertificates).map {
            $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        } ?? []
        appStoreBundleID = value(.appStoreBundleID)
        appStoreVerifyURL = value(.appStoreVerifyURL) ?? ""
        appStoreSandboxURL = value(.appStoreSandboxURL) ?? ""
        appStoreSharedSecret = value(.appStoreSharedSecret)
        var accepted = Set<Ledger.Environment>()
        for item in (value(.appStoreEnvironments) ?? "").split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) {
            switch item.lowercased() {
            case "production": accepted.insert(.production)
            // Xcode and local StoreKit testing count as Sandbox.
            case "sandbox", "xcode", "localtesting": accepted.insert(.sandbox)
            default:
                throw fail(.appStoreEnvironments, "expected Production, Sandbox or both separated by a comma, got \(item)")
            }
        }
        guard !accepted.isEmpty else { throw fail(.appStoreEnvironments, "names no environment") }
        appStoreEnvironments = accepted
        if let id = value(.appStoreAppAppleID) {
            guard let number = Int64(id), number > 0 else {
                throw fail(.appStoreAppAppleID, "expected the app's numeric Apple ID, got \(id)")
            }
            appStoreAppAppleID = number
        } else {
            appStoreAppAppleID = nil
        }
        appStoreKeyFile = value(.appStoreKeyFile)
        appStoreKeyID = value(.appStoreKeyID)
        appStoreIssuerID = value(.appStoreIssuerID)
        appStoreAPIURL = value(.appStoreAPIURL) ?? ""
        appStoreAPISandboxURL = value(.appStoreAPISandboxURL) ?? ""
        let reconcile = value(.appStoreReconcileInterval) ?? ""
        do {
            let interval = try ClockDuration.parse(reconcile)
            appStoreReconcileInterval = interval == .zero ? nil : interval
        } catch {
            throw fail(.appStoreReconcileInterval, error.description)
        }
        if let interval = appStoreReconcileInterval, interval < .seconds(60) {
            throw fail(.appStoreReconcileInterval, "expected at least PT1M (or P0D to turn reconciliation off), got \(reconcile)")
        }
        let verify = value(.restoreVerify) ?? ""
        guard let parsedVerify = RestoreVerification(rawValue: verify) else {
            throw fail(.restoreVerify, "expected none or api, got \(verify.prefix(64))")
        }
        restoreVerification = parsedVerify
        sessionTimeouts = SessionTimeouts(
            statementTimeout: try seconds(.statementTimeout), lockTimeout: try seconds(.lockTimeout),
            idleInTransactionSessionTimeout: try seconds(.idleInTransactionTimeout))
        let bytes = value(.maximumBodyBytes) ?? ""
        guard let byteCount = Int(bytes), (1024...(256 << 20)).contains(byteCount) else {
            throw fail(.maximumBodyBytes, "expected bytes from 1024 to 268435456, got \(bytes)")
        }
        maximumBodySize = byteCount
        httpReadTimeout = try seconds(.httpReadTimeout)
        httpIdleTimeout = try seconds(.httpIdleTimeout)
        let connections = value(.httpMaximumConnections) ?? ""
        guard let connectionCount = Int(connections), (1...1_000_000).contains(connectionCount) else {
            throw fail(.httpMaximumConnections, "expected a count from 1 to 1000000, got \(connections)")
        }
        httpMaximumConnections = connectionCount
        let level = value(.logLevel) ?? ""
        guard let parsedLevel = Logger.Level(rawValue: level.lowercased()) else {
            throw fail(.logLevel, "expected trace, debug, info, notice, warning, error or critical, got \(level)")
        }
        logLevel = parsedLevel
        let maximumWait = value(.changesMaximumWait) ?? ""
        guard let waitSeconds = Int(maximumWait), (0...30).contains(waitSeconds) else {
            throw fail(.changesMaximumWait, "expected whole seconds from 0 to 30, got \(maximumWait.prefix(64))")
        }
        changesMaximumWait = .seconds(waitSeconds)
        let changesSweep = value(.changesSweepInterval) ?? ""
        guard let changesSweepSeconds = Int(changesSweep), (1...60).contains(changesSweepSeconds) else {
            throw fail(.changesSweepInterval, "expected whole seconds from 1 to 60, got \(changesSweep.prefix(64))")
        }
        changesSweepInterval = .seconds(changesSweepSeconds)
        switch (value(.audit) ?? "").lowercased() {
        case "on": auditEnabled = true
        case "off": auditEnabled = false
        case let other: throw fail(.audit, "expected on or off, got \(other.prefix(64))")
        }
        let retention = value(.auditRetention) ?? ""
        do {
            let duration = try ISODuration(parsing: retention)
            auditRetention = duration.isZero ? nil : AuditRetention(duration)
        } catch {
            throw fail(.auditRetention, "expected an ISO 8601 duration of days, weeks, months or years such as P400D (P0D: keep for ever), got \(retention.prefix(64))")
        }
        let grantMaximum = value(.grantMaximumDuration) ?? ""
        guard let maximum = try? ISODuration(parsing: grantMaximum), !maximum.isZero, maximum.years >= 0, maximum.months >= 0,
              maximum.weeks >= 0, maximum.days >= 0 else {
            throw fail(.grantMaximumDuration, "expected a positive ISO 8601 duration of days, weeks, months or years such as P1Y, got \(grantMaximum.prefix(64))")
        }
        grantMaximumDuration = maximum
        googlePlay = try GooglePlayConfiguration(value: value)
    }
}

public struct ConfigurationError: Error, CustomStringConvertible, Sendable {
    public var variable: String
    public var message: String
    public var description: String { "\(variable): \(message)" }
}
