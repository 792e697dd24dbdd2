import ArgumentParser

@main
struct Subledger: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "subledger",
        abstract: "An event-sourced ledger of App Store purchases and subscriptions.",
        subcommands: [Serve.self, Migrate.self],
        defaultSubcommand: Serve.self)
}
