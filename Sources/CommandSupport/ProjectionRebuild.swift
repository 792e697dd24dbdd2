import EventStore
import Foundation

/// A projection's rebuild as `subledger rebuild` runs it, shared with the
/// bench so that both measure and run the same thing.
public enum ProjectionRebuild {
    /// Events per batch when replaying in commit order.
    public static let defaultBatchSize = 1000
    /// Events per chunk when rebuilding stream by stream.
    public static let defaultChunkSize = 20_000

    /// Rebuilds `consumer`; returns the events replayed. Every projection is
    /// streamwise; a consumer that is not replays in commit order in one
    /// transaction.
    public static func rebuild(_ consumer: any EventConsumer, store: EventStore, chunkSize: Int = defaultChunkSize,
                               batchSize: Int = defaultBatchSize, progress: @escaping @Sendable (Int) -> Void) async throws -> Int {
        if let streamwise = consumer as? any StreamwiseConsumer {
            return try await store.rebuildStreamwise(streamwise, chunkSize: chunkSize, progress: progress)
        }
        return try await store.rebuild(consumer, batchSize: batchSize, progress: progress)
    }

    /// "120000/1000000 events, 52000 events/s, ETA 17 s".
    public static func progressLine(done: Int, total: Int, elapsed: Double) -> String {
        let rate = Double(done) / max(elapsed, 0.001)
        let eta = rate > 0 ? Double(max(total - done, 0)) / rate : 0
        return String(format: "%d/%d events, %.0f events/s, ETA %.0f s", done, total, rate, eta)
    }
}
