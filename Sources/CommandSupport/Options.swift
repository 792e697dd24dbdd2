import ArgumentParser
import Foundation
import Logging
import HTTPAPI
import SubledgerApp

/// The configuration every subcommand reads: the environment variables of
/// `ConfigurationVariable`, each overridable by its flag. A new variable
/// adds one `@Option` below and one entry to `flags` (the configuration
/// tests check that every declared variable has both).
public struct ConfigurationOptions: ParsableArguments {
    public init() {}

    public typealias Variable = ConfigurationVariable

    @Option(name: .customLong(Variable.databaseURL.flag), help: ArgumentHelp(Variable.databaseURL.flagHelp)) var databaseURL: String?
    @Option(name: .customLong(Variable.dataDirectory.flag), help: ArgumentHelp(Variable.dataDirectory.flagHelp)) var dataDirectory: String?
    @Option(name: .customLong(Variable.sqlDirectory.flag), help: ArgumentHelp(Variable.sqlDirectory.flagHelp)) var sqlDirectory: String?
    @Option(name: .customLong(Variable.host.flag), help: ArgumentHelp(Variable.host.flagHelp)) var host: String?
    @Option(name: .customLong(Variable.port.flag), help: ArgumentHelp(Variable.port.flagHelp)) var port: String?
    @Option(name: .customLong(Variable.apiKeys.flag), help: ArgumentHelp(Variable.apiKeys.flagHelp)) var apiKeys: String?
    @Option(name: .customLong(Variable.secret.flag), help: ArgumentHelp(Variable.secret.flagHelp)) var secret: String?
    @Option(name: .customLong(Variable.products.flag), help: ArgumentHelp(Variable.products.flagHelp)) var products: String?
    @Option(name: .customLong(Variable.restorePolicy.flag), help: ArgumentHelp(Variable.restorePolicy.flagHelp)) var restorePolicy: String?
    @Option(name: .customLong(Variable.restoreVerify.flag), help: ArgumentHelp(Variable.restoreVerify.flagHelp)) var restoreVerify: String?
    @Option(name: .customLong(Variable.webhookURL.flag), help: ArgumentHelp(Variable.webhookURL.flagHelp)) var webhookURL: String?
    @Option(name: .customLong(Variable.webhookSecret.flag), help: ArgumentHelp(Variable.webhookSecret.flagHelp)) var webhookSecret: String?
    @Option(name: .customLong(Variable.webhookAllowPrivate.flag), help: ArgumentHelp(Variable.webhookAllowPrivate.flagHelp)) var webhookAllowPrivate: String?
    @Option(name: .customLong(Variable.expirySweepInterval.flag), help: ArgumentHelp(Variable.expirySweepInterval.flagHelp)) var expirySweepInterval: String?
    @Option(name: .customLong(Variable.maximumBodyBytes.flag), help: ArgumentHelp(Variable.maximumBodyBytes.flagHelp)) var maximumBodyBytes: String?
    @Option(name: .customLong(Variable.statementTimeout.flag), help: ArgumentHelp(Variable.statementTimeout.flagHelp)) var statementTimeout: String?
    @Option(name: .customLong(Variable.lockTimeout.flag), help: ArgumentHelp(Variable.lockTimeout.flagHelp)) var lockTimeout: String?
    @Option(name: .customLong(Variable.idleInTransactionTimeout.flag), help: ArgumentHelp(Variable.idleInTransactionTimeout.flagHelp)) var idleInTransactionTimeout: String?
    @Option(name: .customLong(Variable.appStoreRootCertificates.flag), help: ArgumentHelp(Variable.appStoreRootCertificates.flagHelp)) var appStoreRootCertificates: String?
    @Option(name: .customLong(Variable.appStoreBundleID.flag), help: ArgumentHelp(Variable.appStoreBundleID.flagHelp)) var appStoreBundleID: String?
    @Option(name: .customLong(Variable.appStoreAppAppleID.flag), help: ArgumentHelp(Variable.appStoreAppAppleID.flagHelp)) var appStoreAppAppleID: String?
    @Option(name: .customLong(Variable.appStoreEnvironments.flag), help: ArgumentHelp(Variable.appStoreEnvironments.flagHelp)) var appStoreEnvironments: String?
    @Option(name: .customLong(Variable.appStoreVerifyURL.flag), help: ArgumentHelp(Variable.appStoreVerifyURL.flagHelp)) var appStoreVerifyURL: String?
    @Option(name: .customLong(Variable.appStoreSandboxURL.flag), help: ArgumentHelp(Variable.appStoreSandboxURL.flagHelp)) var appStoreSandboxURL: String?
    @Option(name: .customLong(Variable.appStoreSharedSecret.flag), help: ArgumentHelp(Variable.appStoreSharedSecret.flagHelp)) var appStoreSharedSecret: String?
    @Option(name: .customLong(Variable.appStoreKeyFile.flag), help: ArgumentHelp(Variable.appStoreKeyFile.flagHelp)) var appStoreKeyFile: String?
    @Option(name: .customLong(Variable.appStoreKeyID.flag), help: ArgumentHelp(Variable.appStoreKeyID.flagHelp)) var appStoreKeyID: String?
    @Option(name: .customLong(Variable.appStoreIssuerID.flag), help: ArgumentHelp(Variable.appStoreIssuerID.flagHelp)) var appStoreIssuerID: String?
    @Option(name: .customLong(Variable.appStoreAPIURL.flag), help: ArgumentHelp(Variable.appStoreAPIURL.flagHelp)) var appStoreAPIURL: String?
    @Option(name: .customLong(Variable.appStoreAPISandboxURL.flag), help: ArgumentHelp(Variable.appStoreAPISandboxURL.flagHelp)) var appStoreAPISandboxURL: String?
    @Option(name: .customLong(Variable.appStoreReconcileInterval.flag), help: ArgumentHelp(Variable.appStoreReconcileInterval.flagHelp)) var appStoreReconcileInterval: String?
    @Option(name: .customLong(Variable.httpReadTimeout.flag), help: ArgumentHelp(Variable.httpReadTimeout.flagHelp)) var httpReadTimeout: String?
    @Option(name: .customLong(Variable.httpIdleTimeout.flag), help: ArgumentHelp(Variable.httpIdleTimeout.flagHelp)) var httpIdleTimeout: String?
    @Option(name: .customLong(Variable.httpMaximumConnections.flag), help: ArgumentHelp(Variable.httpMaximumConnections.flagHelp)) var httpMaximumConnections: String?
    @Option(name: .customLong(Variable.logLevel.flag), help: ArgumentHelp(Variable.logLevel.flagHelp)) var logLevel: String?
    @Option(name: .customLong(Variable.changesMaximumWait.flag), help: ArgumentHelp(Variable.changesMaximumWait.flagHelp)) var changesMaximumWait: String?
    @Option(name: .customLong(Variable.audit.flag), help: ArgumentHelp(Variable.audit.flagHelp)) var audit: String?
    @Option(name: .customLong(Variable.auditRetention.flag), help: ArgumentHelp(Variable.auditRetention.flagHelp)) var auditRetention: String?
    @Option(name: .customLong(Variable.grantMaximumDuration.flag), help: ArgumentHelp(Variable.grantMaximumDuration.flagHelp)) var grantMaximumDuration: String?
    @Option(name: .customLong(Variable.databaseReadURL.flag), help: ArgumentHelp(Variable.databaseReadURL.flagHelp)) var databaseReadURL: String?
    @Option(name: .customLong(Variable.changesSweepInterval.flag), help: ArgumentHelp(Variable.changesSweepInterval.flagHelp)) var changesSweepInterval: String?
    @Option(name: .customLong(Variable.googlePlayPackageName.flag), help: ArgumentHelp(Variable.googlePlayPackageName.flagHelp)) var googlePlayPackageName: String?
    @Option(name: .customLong(Variable.googlePlayServiceAccountFile.flag), help: ArgumentHelp(Variable.googlePlayServiceAccountFile.flagHelp)) var googlePlayServiceAccountFile: String?
    @Option(name: .customLong(Variable.googlePlayAPIURL.flag), help: ArgumentHelp(Variable.googlePlayAPIURL.flagHelp)) var googlePlayAPIURL: String?
    @Option(name: .customLong(Variable.googlePlayPushAudience.flag), help: ArgumentHelp(Variable.googlePlayPushAudience.flagHelp)) var googlePlayPushAudience: String?
    @Option(name: .customLong(Variable.googlePlayPushServiceAccount.flag), help: ArgumentHelp(Variable.googlePlayPushServiceAccount.flagHelp)) var googlePlayPushServiceAccount: String?
    @Option(name: .customLong(Variable.googlePlayJWKSURL.flag), help: ArgumentHelp(Variable.googlePlayJWKSURL.flagHelp)) var googlePlayJWKSURL: String?
    @Option(name: .customLong(Variable.googlePlayReconcileInterval.flag), help: ArgumentHelp(Variable.googlePlayReconcileInterval.flagHelp)) var googlePlayReconcileInterval: String?
    @Option(name: .customLong(Variable.googlePlayEnvironments.flag), help: ArgumentHelp(Variable.googlePlayEnvironments.flagHelp)) var googlePlayEnvironments: String?

    /// Each variable with the value its flag was given, if any.
    public var flags: [(Variable, String?)] {
        [
            (.databaseURL, databaseURL),
            (.dataDirectory, dataDirectory),
            (.sqlDirectory, sqlDirectory),
            (.host, host),
            (.port, port),
            (.apiKeys, apiKeys),
            (.secret, secret),
            (.products, products),
            (.restorePolicy, restorePolicy),
            (.restoreVerify, restoreVerify),
            (.webhookURL, webhookURL),
            (.webhookSecret, webhookSecret),
            (.webhookAllowPrivate, webhookAllowPrivate),
            (.expirySweepInterval, expirySweepInterval),
            (.maximumBodyBytes, maximumBodyBytes),
            (.statementTimeout, statementTimeout),
            (.lockTimeout, lockTimeout),
            (.idleInTransactionTimeout, idleInTransactionTimeout),
            (.appStoreRootCertificates, appStoreRootCertificates),
            (.appStoreBundleID, appStoreBundleID),
            (.appStoreAppAppleID, appStoreAppAppleID),
            (.appStoreEnvironments, appStoreEnvironments),
            (.appStoreVerifyURL, appStoreVerifyURL),
            (.appStoreSandboxURL, appStoreSandboxURL),
            (.appStoreSharedSecret, appStoreSharedSecret),
            (.appStoreKeyFile, appStoreKeyFile),
            (.appStoreKeyID, appStoreKeyID),
            (.appStoreIssuerID, appStoreIssuerID),
            (.appStoreAPIURL, appStoreAPIURL),
            (.appStoreAPISandboxURL, appStoreAPISandboxURL),
            (.appStoreReconcileInterval, appStoreReconcileInterval),
            (.httpReadTimeout, httpReadTimeout),
            (.httpIdleTimeout, httpIdleTimeout),
            (.httpMaximumConnections, httpMaximumConnections),
            (.logLevel, logLevel),
            (.changesMaximumWait, changesMaximumWait),
            (.audit, audit),
            (.auditRetention, auditRetention),
            (.grantMaximumDuration, grantMaximumDuration),
            (.databaseReadURL, databaseReadURL),
            (.changesSweepInterval, changesSweepInterval),
            (.googlePlayPackageName, googlePlayPackageName),
            (.googlePlayServiceAccountFile, googlePlayServiceAccountFile),
            (.googlePlayAPIURL, googlePlayAPIURL),
            (.googlePlayPushAudience, googlePlayPushAudience),
            (.googlePlayPushServiceAccount, googlePlayPushServiceAccount),
            (.googlePlayJWKSURL, googlePlayJWKSURL),
            (.googlePlayReconcileInterval, googlePlayReconcileInterval),
            (.googlePlayEnvironments, googlePlayEnvironments),
        ]
    }

    /// The environment with the flags laid over it.
    public func resolve(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> SubledgerConfiguration {
        var merged = environment
        for case let (variable, value?) in flags { merged[variable.name] = value }
        do {
            let configuration = try SubledgerConfiguration(environment: merged)
            // The digests without a configuration at hand (log references)
            // use the process's secret.
            InstallationSecret.install(configuration.secret)
            return configuration
        } catch {
            throw ValidationError(error.description)
        }
    }
}

/// Logging to standard error at the configured level, bootstrapped once.
public enum LoggingSetup {
    nonisolated(unsafe) private static var done = false

    public static func logger(_ configuration: SubledgerConfiguration, label: String = "subledger") -> Logger {
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
