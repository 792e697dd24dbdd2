import ArgumentParser
import SubledgerBench

@main
struct Subledger: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "subledger",
        abstract: "An event-sourced ledger of App Store and Google Play purchases and subscriptions.",
        subcommands: [Serve.self, Migrate.self, Status.self, History.self, Explain.self, Import.self, Bench.self, Rebuild.self, AnalyticsCommand.self, AppStoreCommand.self, GooglePlayCommand.self, LogReferenceCommand.self],
        defaultSubcommand: Serve.self)
}
