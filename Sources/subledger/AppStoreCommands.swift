import AppStore
import ArgumentParser
import CommandSupport
import Foundation
import Ledger
import Logging
import SubledgerApp

/// `subledger appstore reconcile | refresh | test-notification`: the App Store Server API by hand.
struct AppStoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "appstore",
        abstract: "Ask the App Store Server API: recover missed notifications, refresh a subscriber, send a test notification.",
        discussion: """
            Needs the in-app purchase key (SUBLEDGER_APPSTORE_KEY_FILE, SUBLEDGER_APPSTORE_KEY_ID, \
            SUBLEDGER_APPSTORE_ISSUER_ID), SUBLEDGER_APPSTORE_BUNDLE_ID and SUBLEDGER_APPSTORE_ROOT_CERTS \
            (Apple's answers are verified like notifications).
            """,
        subcommands: [Reconcile.self, Refresh.self, TestNotification.self])

    /// Runs `body` with the App Store integration on the configured database;
    /// the App Store settings are checked before the database is opened.
    static func with<T>(_ options: ConfigurationOptions, _ body: (AppStoreIntegration, CommandDatabase) async throws -> T) async throws -> T {
        let configuration = try options.resolve()
        let verifier: AppStoreVerifier
        do {
            verifier = try AppStoreIntegration.makeVerifier(configuration)
        } catch {
            throw ValidationError("App Store Server API answers are verified like notifications: \(error)")
        }
        guard let client = try AppStoreAPISetup.client(configuration, verifier: verifier, logger: LoggingSetup.logger(configuration)) else {
            throw ValidationError("The App Store Server API is not configured: set SUBLEDGER_APPSTORE_KEY_FILE, SUBLEDGER_APPSTORE_KEY_ID and SUBLEDGER_APPSTORE_ISSUER_ID.")
        }
        return try await CommandDatabase.with(options) { database in
            var dependencies = AppDependencies(configuration: database.configuration, pool: database.pool,
                                               catalog: database.catalog, logger: database.logger)
            dependencies.appStoreVerifier = verifier
            dependencies.appStoreAPIClient = client
            return try await body(AppStoreIntegration(dependencies), database)
        }
    }

    static func environment(_ text: String?, default configured: Ledger.Environment) throws -> Ledger.Environment {
        guard let text else { return configured }
        guard let environment = Ledger.Environment(rawValue: text) else {
            throw ValidationError("--environment must be Production or Sandbox, got \(text)")
        }
        return environment
    }
}

/// Building the App Store Server API client for `serve` and the commands.
enum AppStoreAPISetup {
    /// nil when no key is configured; a half or wrong configuration stops the start.
    static func client(_ configuration: SubledgerConfiguration, verifier: AppStoreVerifier?, logger: Logger) throws -> AppStoreAPIClient? {
        guard configuration.hasAppStoreAPIKey else {
            if configuration.restoreVerification == .api {
                throw ValidationError("SUBLEDGER_RESTORE_VERIFY=api needs the App Store Server API: set SUBLEDGER_APPSTORE_KEY_FILE, SUBLEDGER_APPSTORE_KEY_ID and SUBLEDGER_APPSTORE_ISSUER_ID.")
            }
            return nil
        }
        guard let verifier else {
            throw ValidationError("App Store Server API: set SUBLEDGER_APPSTORE_ROOT_CERTS and SUBLEDGER_APPSTORE_BUNDLE_ID too; Apple's answers are verified like notifications.")
        }
        do {
            return try AppStoreAPIClient.make(configuration, verifier: verifier, logger: logger)
        } catch {
            throw ValidationError("App Store Server API: \(error)")
        }
    }
}

extension AppStoreCommand {
    struct Reconcile: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Recover App Store notifications this service missed (Get Notification History), once.",
            discussion: """
                Every notification Apple sent in the window goes through the same path as POST \
                /v1/appstore/notifications; those already stored change nothing. The checkpoint the \
                worker keeps moves forward when the window starts at or before it.
                """)

        @Option(help: "Start of the window (RFC 3339); default: the checkpoint less ten minutes, or a day ago.")
        var since: String?
        @Option(help: "Production or Sandbox; default Production (Sandbox when SUBLEDGER_APPSTORE_ENVIRONMENTS lists only it).")
        var environment: String?
        @OptionGroup var options: ConfigurationOptions

        func run() async throws {
            let start = try parseInstant(since)
            let report = try await AppStoreCommand.with(options) { appStore, database in
                guard let reconciler = appStore.reconciler else { throw ValidationError(appStore.unavailable) }
                let environment = try AppStoreCommand.environment(environment, default: appStore.environmentsToReconcile[0])
                let display = TerminalProgress(label: "reconciling \(environment.rawValue)")
                let report = try await reconciler.reconcile(environment: environment, since: start) { display.update("\($0)") }
                display.finish("\(report.recovered) recovered")
                return report
            }
            print(report)
        }
    }

    struct Refresh: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Ask Get All Subscription Statuses about a subscriber's subscriptions and record what the ledger lacks.")

        @Argument(help: "The subscriber id.") var subscriber: String
        @Flag(help: "Print the report as JSON.") var json = false
        @OptionGroup var options: ConfigurationOptions

        func run() async throws {
            let report = try await AppStoreCommand.with(options) { appStore, _ in
                try await reportingLedgerErrors { try await appStore.refresh(subscriberID: subscriber) }
            }
            if json { return try printJSON(report) }
            print("asked about \(report.originalTransactionIDs.count) original transactions: \(report.originalTransactionIDs.joined(separator: ", "))")
            for fact in report.recorded { print("recorded: \(fact)") }
            print("already in the ledger: \(report.duplicates)")
            for rejected in report.rejected { print("refused: \(rejected.fact): \(rejected.code): \(rejected.message)") }
            for original in report.unknownToAppStore { print("unknown to the App Store: \(original)") }
        }
    }

    struct TestNotification: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "test-notification",
            abstract: "Ask Apple to send a TEST notification and wait until this service has stored it.",
            discussion: "Exits 1 when Apple could not deliver it or it did not arrive here in time.")

        @Option(help: "Production or Sandbox; default as for reconcile.") var environment: String?
        @Option(help: "Seconds to wait for the notification.") var timeout: Int = 120
        @OptionGroup var options: ConfigurationOptions

        func validate() throws {
            guard (1...3600).contains(timeout) else { throw ValidationError("--timeout must be from 1 to 3600 seconds") }
        }

        func run() async throws {
            let outcome = try await AppStoreCommand.with(options) { appStore, _ in
                let environment = try AppStoreCommand.environment(environment, default: appStore.environmentsToReconcile[0])
                let display = TerminalProgress(label: "test notification (\(environment.rawValue))")
                let outcome = try await appStore.sendTestNotification(environment: environment, timeout: .seconds(timeout)) {
                    display.update($0)
                }
                display.finish(outcome.isStored ? "arrived" : "not arrived")
                return outcome
            }
            print(outcome)
            if !outcome.isStored { throw ExitCode(1) }
        }
    }
}
