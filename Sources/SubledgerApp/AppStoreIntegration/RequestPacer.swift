import Foundation
import Ledger

/// Spaces requests per endpoint and environment at the client's own rate
/// (below Apple's), and holds an endpoint back until a 429's `Retry-After`
/// passes, for every caller at once.
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

    /// Reserves the next slot of `key` and sleeps until it comes.
    func wait(_ endpoint: AppStoreAPIEndpoint, _ environment: Ledger.Environment) async throws {
        let key = Key(endpoint: endpoint, environment: environment)
        let now = ContinuousClock.now
        let slot = max(now, next[key] ?? now)
        let rate = settings.rate(endpoint, in: environment)
        next[key] = slot + .nanoseconds(Int64(1e9 / max(rate, 0.001)))
        if slot > now { try await Task.sleep(until: slot, clock: .continuous) }
    }

    /// Holds `key` back for `delay` (a 429).
    func pause(_ endpoint: AppStoreAPIEndpoint, _ environment: Ledger.Environment, for delay: Duration) {
        let key = Key(endpoint: endpoint, environment: environment)
        let until = ContinuousClock.now + delay
        next[key] = max(next[key] ?? until, until)
    }
}
