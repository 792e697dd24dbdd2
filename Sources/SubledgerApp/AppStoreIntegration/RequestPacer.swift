import Foundation
import Ledger

/// Spaces requests per endpoint and environment at the client's own rate
/// (below Apple's), and holds an endpoint back until a 429's `Retry-After`
/// passes, for every caller at once.
///
/// The queue is bounded in time: a caller whose turn would come later than
/// `maximumQueueWait` is refused at once (a 503 its own caller may retry)
/// instead of holding a request open, and a caller cancelled while it waits
/// gives its turn back.
actor RequestPacer {
    struct Key: Hashable {
        var endpoint: AppStoreAPIEndpoint
        var environment: Ledger.Environment
    }

    private let settings: AppStoreAPISettings
    /// The earliest instant the next request of each key may start.
    private var next: [Key: ContinuousClock.Instant] = [:]

    init(settings: AppStoreAPISettings) {
        self.settings = settings
    }

    /// Until when a 429 holds each key back; a turn given back never moves the queue before it.
    private var pausedUntil: [Key: ContinuousClock.Instant] = [:]

    /// Reserves the next slot of `key` and sleeps until it comes.
    func wait(_ endpoint: AppStoreAPIEndpoint, _ environment: Ledger.Environment) async throws {
        let key = Key(endpoint: endpoint, environment: environment)
        let now = ContinuousClock.now
        let slot = max(now, next[key] ?? now)
        guard slot - now <= settings.maximumQueueWait else {
            let wait = slot - now
            throw AppStoreAPIError(.rateLimited(retryAt: Date() + Double(wait.components.seconds) + 1), endpoint: endpoint,
                                   message: "\(environment.rawValue) requests to this endpoint are queued for \(wait.components.seconds) s, "
                                       + "longer than the \(settings.maximumQueueWait) a caller waits")
        }
        let interval = Duration.nanoseconds(Int64(1e9 / max(settings.rate(endpoint, in: environment), 0.001)))
        next[key] = slot + interval
        guard slot > now else { return }
        do {
            try await Task.sleep(until: slot, clock: .continuous)
        } catch {
            // Cancelled: the turn goes back to the queue (never before a 429's pause).
            let floor = max(ContinuousClock.now, pausedUntil[key] ?? now)
            next[key] = max(floor, (next[key] ?? floor) - interval)
            throw error
        }
    }

    /// Holds `key` back for `delay` (a 429).
    func pause(_ endpoint: AppStoreAPIEndpoint, _ environment: Ledger.Environment, for delay: Duration) {
        let key = Key(endpoint: endpoint, environment: environment)
        let until = ContinuousClock.now + delay
        next[key] = max(next[key] ?? until, until)
        pausedUntil[key] = max(pausedUntil[key] ?? until, until)
    }
}
