import Logging
import ServiceLifecycle

/// The loop of a sweeper `Service`: `round` runs, then again `interval`
/// later, until a graceful shutdown cancels it. A round that fails is logged
/// with `failure` and the next one tries again; cancellation ends the loop.
func repeatRounds(every interval: Duration, logger: Logger, failure: Logger.Message,
                  _ round: @escaping @Sendable () async throws -> Void) async {
    try? await cancelWhenGracefulShutdown {
        while !Task.isCancelled {
            do {
                try await round()
            } catch is CancellationError {
                return
            } catch {
                logger.error(failure, metadata: ["error": "\(String(reflecting: error))"])
            }
            try await Task.sleep(for: interval)
        }
    }
}
