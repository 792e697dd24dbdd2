import ArgumentParser
import CommandSupport
import SubledgerApp

/// `subledger log-reference ID`: the `subscriber.ref` that log lines about
/// a subscriber carry, under this installation's `SUBLEDGER_SECRET`, so an
/// operator can find them (`grep`) without the logs ever holding the id.
struct LogReferenceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "log-reference",
        abstract: "Print the subscriber.ref that log lines about a subscriber carry (keyed by SUBLEDGER_SECRET).")

    @Argument(help: "The subscriber id.") var subscriber: String
    @OptionGroup var options: ConfigurationOptions

    func run() throws {
        let configuration = try options.resolve()
        print(LogReference.subscriber(subscriber, secret: configuration.secret))
    }
}
