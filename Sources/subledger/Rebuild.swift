import ArgumentParser
import CommandSupport
import EventStore
import Foundation
import HTTPAPI
import SubledgerApp

struct Rebuild: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Rebuild projections from the event log (all of them, or the one named).",
        discussion: """
            Each projection is rebuilt blue-green (all of them in one pass over the log when none is \
            named): two workers read the log stream by stream in chunks, fold them in memory and \
            bulk-load shadow tables, which then catch up on what was \
            written meanwhile and are swapped in by one short transaction that hands over the live \
            consumer's checkpoint. `serve` keeps answering from the old tables, and its consumer keeps \
            them current, until the swap. Projections: \(Projections.names.joined(separator: ", ")).
            """)

    @OptionGroup var options: ConfigurationOptions

    @Argument(help: "The projection to rebuild; absent: all.")
    var projection: String?

    @Option(name: .customLong("batch-size"), help: "Events per batch when replaying in commit order (default 1000).")
    var batchSize = ProjectionRebuild.defaultBatchSize

    @Option(name: .customLong("chunk-size"), help: "Events per chunk when rebuilding stream by stream (default 20000).")
    var chunkSize = ProjectionRebuild.defaultChunkSize

    func validate() throws {
        if let projection, !Projections.names.contains(projection) {
            throw ValidationError("unknown projection '\(projection)'; known: \(Projections.names.joined(separator: ", "))")
        }
        guard batchSize > 0 else { throw ValidationError("--batch-size must be positive") }
        guard chunkSize > 0 else { throw ValidationError("--chunk-size must be positive") }
    }

    func run() async throws {
        try await CommandDatabase.with(options) { opened in
            let store = EventStore(pool: opened.pool, logger: opened.logger)
            let total = try await opened.pool.query("SELECT count(*) FROM events").first?.decode(Int.self, at: 0) ?? 0
            for consumer in Projections.rebuilt(projection, store: store, catalog: opened.catalog.catalog) {
                let display = TerminalProgress(label: "rebuilding \(consumer.name)")
                let started = ContinuousClock.now
                let report: @Sendable (Int) -> Void = { done in
                    display.update(ProjectionRebuild.progressLine(done: done, total: total, elapsed: (ContinuousClock.now - started).timeInterval))
                }
                let replayed = try await ProjectionRebuild.rebuild(consumer, store: store, chunkSize: chunkSize, batchSize: batchSize,
                                                                   progress: report)
                let elapsed = started.duration(to: .now).timeInterval
                display.finish(String(format: "%d events in %.1f s (%.0f events/s)", replayed, elapsed, Double(replayed) / max(elapsed, 0.001)))
            }
        }
    }
}
