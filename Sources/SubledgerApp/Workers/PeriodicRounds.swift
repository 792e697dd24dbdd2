import Logging
import ServiceLifecycle

/// The loop of a worker: `round` runs, then `pause` waits as long as the
/// round said (by default a sleep; a listener may wake it sooner), then the
/// next round, until the task is cancelled or a round returns nil. Whatever
/// fails (a round, a pause, cancellation) ends the loop, thrown: a caller
/// that holds a connection for its rounds lets it go, and the form below
/// starts again.
func repeatRounds(pause: (Duration) async throws -> Void = { try await Task.sleep(for: $0) },
                  _ round: () async throws -> Duration?) async throws {
    while !Task.isCancelled {
        guard let wait = try await round() else { return }
        try await pause(wait)
    }
}

/// The same loop, started again after a failure: the failure is logged with
/// `failure` and the rounds go on `retryAfter` later, until the task is
/// cancelled (which ends the loop quietly) or a round returns nil.
func repeatRounds(logger: Logger, failure: Logger.Message, retryAfter: Duration,
                  pause: (Duration) async throws -> Void = { try await Task.sleep(for: $0) },
                  _ round: () async throws -> Duration?) async {
    while !Task.isCancelled {
        do {
            try await repeatRounds(pause: pause, round)
            return
        } catch is CancellationError {
            return
        } catch {
            if Task.isCancelled { return }
            logger.error(failure, metadata: ["error": "\(String(reflecting: error))"])
            try? await Task.sleep(for: retryAfter)
        }
    }
}

/// The loop of a sweeper `Service`: `round` runs, then again `interval`
/// later, until a graceful shutdown cancels it. A round that fails is logged
/// with `failure` and the next one tries again; cancellation ends the loop.
func repeatRounds(every interval: Duration, logger: Logger, failure: Logger.Message,
                  _ round: @escaping @Sendable () async throws -> Void) async {
    await cancelWhenGracefulShutdown {
        await repeatRounds(logger: logger, failure: failure, retryAfter: interval) {
            try await round()
            return interval
        }
    }
}
