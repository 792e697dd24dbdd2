import ArgumentParser
import EventStore
import Foundation
import HTTPAPI
import SubledgerApp

struct Rebuild: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Rebuild projections from the event log (all of them, or the one named).",
        discussion: """
            Each projection is emptied and replayed in one transaction: readers see the old \
            read model until it commits, and a running server's consumer goes on from where the \
            rebuild stopped. Projections: \(Projections.names.joined(separator: ", ")).
            """)

    @OptionGroup var options: ConfigurationOptions

    @Argument(help: "The projection to rebuild; absent: all.")
    var projection: String?

    @Option(name: .customLong("batch-size"), help: "Events per batch (default 1000).")
    var batchSize = 1000

    func validate() throws {
        if let projection, !Projections.names.contains(projection) {
            throw ValidationError("unknown projection '\(projection)'; known: \(Projections.names.joined(separator: ", "))")
        }
        guard batchSize > 0 else { throw ValidationError("--batch-size must be positive") }
    }

    func run() async throws {
        try await CommandDatabase.with(options) { opened in
            let store = EventStore(pool: opened.pool, logger: opened.logger)
            let total = try await opened.pool.query("SELECT count(*) FROM events").first?.decode(Int.self, at: 0) ?? 0
            for consumer in Projections.all(store: store, catalog: opened.catalog.catalog)
            where projection == nil || consumer.name == projection {
                let display = TerminalProgress(label: "rebuilding \(consumer.name)")
                let started = ContinuousClock.now
                let replayed = try await store.rebuild(consumer, batchSize: batchSize) { display.update("\($0)/\(total) events") }
                let elapsed = started.duration(to: .now)
                display.finish(String(format: "%d events in %.1f s", replayed, elapsed.inSeconds))
            }
        }
    }
}
