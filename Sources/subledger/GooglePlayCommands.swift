import ArgumentParser
import CommandSupport
import Foundation
import Ledger
import SubledgerApp

/// `subledger googleplay reconcile | refresh`: the Play Developer API by hand.
struct GooglePlayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "googleplay",
        abstract: "Ask the Play Developer API: revoke voided purchases, fetch one purchase again.",
        discussion: """
            Needs SUBLEDGER_GOOGLEPLAY_PACKAGE_NAME, SUBLEDGER_GOOGLEPLAY_SERVICE_ACCOUNT_FILE, \
            SUBLEDGER_GOOGLEPLAY_PUSH_AUDIENCE and SUBLEDGER_GOOGLEPLAY_PUSH_SERVICE_ACCOUNT (docs/googleplay.md).
            """,
        subcommands: [Reconcile.self, Refresh.self])

    /// Runs `body` with the Play integration on the configured database.
    static func with<T>(_ options: ConfigurationOptions, _ body: (GooglePlayIntegration) async throws -> T) async throws -> T {
        try await CommandDatabase.with(options) { database in
            let dependencies = AppDependencies(configuration: database.configuration, pool: database.pool,
                                               catalog: database.catalog, logger: database.logger)
            guard database.configuration.googlePlay.isRequested else { throw ValidationError(GooglePlayIntegration.notConfigured) }
            let integration: GooglePlayIntegration
            do {
                integration = try GooglePlayIntegration.make(dependencies, writer: LedgerWriter(dependencies),
                                                             reader: SubscriberReader(dependencies))
            } catch {
                throw ValidationError("Google Play: \(error)")
            }
            return try await body(integration)
        }
    }
}

extension GooglePlayCommand {
    struct Reconcile: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Walk Google's voided purchases once and revoke what the ledger holds.",
            discussion: """
                Pages through purchases.voidedpurchases.list (subscriptions included) from the checkpoint \
                the worker keeps (or --since; Google keeps 30 days). One unreadable item is reported and \
                skipped; voidings already recorded change nothing.
                """)

        @Option(help: "Start of the walk (RFC 3339); default: the checkpoint, or 30 days ago.")
        var since: String?
        @OptionGroup var options: ConfigurationOptions

        func run() async throws {
            let start = try parseInstant(since)
            let report = try await GooglePlayCommand.with(options) { googlePlay in
                guard let reconciler = googlePlay.reconciler else { throw ValidationError(googlePlay.unavailable) }
                return try await reconciler.reconcile(since: start)
            }
            guard !report.anotherWalkRunning else {
                print("another instance is walking Google Play's voided purchases now; nothing done")
                return
            }
            print("pages: \(report.pages), voided: \(report.voided), revoked: \(report.revoked), already revoked: \(report.alreadyRevoked), "
                  + "held by nobody here: \(report.notHeld), failed: \(report.failed)")
        }
    }

    struct Refresh: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Fetch one Play purchase and record what Google says for whoever holds it.")

        @Argument(help: "The purchase token.") var token: String
        @Option(help: "The product id, for a one-time product (a subscription is fetched without it).") var product: String?
        @OptionGroup var options: ConfigurationOptions

        func run() async throws {
            let (fetched, subscriber) = try await GooglePlayCommand.with(options) { googlePlay in
                try await reportingLedgerErrors {
                    try await googlePlay.requireService().refresh(purchaseToken: token, productID: product)
                }
            }
            print(fetched.purchase.summary)
            print(subscriber.map { "recorded for subscriber \($0)" } ?? "held by nobody here yet: link it with POST /v1/subscribers/{id}/googleplay/purchases")
        }
    }
}
