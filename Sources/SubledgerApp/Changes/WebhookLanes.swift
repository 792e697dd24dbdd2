import Foundation

/// What the dispatcher's loop knows of each endpoint in this process: which
/// have a batch in flight (they are left out of the next claims, so a slow
/// endpoint holds only its own batch) and each endpoint's circuit breaker.
///
/// The breaker: after `threshold` consecutive failed attempts an endpoint
/// is paused — none of its deliveries is claimed — for `firstPause`, then
/// one delivery is tried (half-open); a success closes the breaker, a
/// failure pauses it again for twice as long, at most `maximumPause`. The
/// deliveries stay pending with their own retry schedule: a pause only
/// delays attempts, it never loses or fails one. Each instance keeps its
/// own breakers (they are not in the database).
actor WebhookLanes {
    struct BreakerSettings: Sendable {
        var threshold = 5
        var firstPause: Duration = .seconds(30)
        var maximumPause: Duration = .seconds(300)
    }

    private struct Breaker {
        var consecutiveFailures = 0
        /// How many times in a row it opened (the pause doubles each time).
        var trips = 0
        var pausedUntil: ContinuousClock.Instant?
    }

    let settings: BreakerSettings
    private var inFlight: Set<String> = []
    private var breakers: [String: Breaker] = [:]

    init(settings: BreakerSettings) {
        self.settings = settings
    }

    /// Endpoints the next shared claim leaves out: those with a batch in
    /// flight, paused ones, and half-open ones (claimed one at a time by
    /// `probing`).
    func excluded(now: ContinuousClock.Instant = .now) -> [String] {
        Array(inFlight.union(breakers.filter { $0.value.pausedUntil != nil }.keys))
    }

    /// Half-open endpoints (their pause is over) without a batch in flight:
    /// one delivery of each is tried.
    func probing(now: ContinuousClock.Instant = .now) -> [String] {
        breakers.compactMap { id, breaker in
            guard let until = breaker.pausedUntil, until <= now, !inFlight.contains(id) else { return nil }
            return id
        }
    }

    /// Endpoints whose next due delivery is no reason to wake: those with a
    /// batch in flight (its end rings) and those paused (`nextPauseEnd`).
    func waitingOn(now: ContinuousClock.Instant = .now) -> [String] {
        Array(inFlight.union(breakers.filter { $0.value.pausedUntil.map { $0 > now } ?? false }.keys))
    }

    /// The nearest end of a pause still to come, to wake for it.
    func nextPauseEnd(now: ContinuousClock.Instant = .now) -> ContinuousClock.Instant? {
        breakers.values.compactMap(\.pausedUntil).filter { $0 > now }.min()
    }

    func start(_ endpointID: String) {
        inFlight.insert(endpointID)
    }

    /// Records a batch's outcomes, in the order they finished, and frees the endpoint.
    func finish(_ endpointID: String, outcomes: [Bool], now: ContinuousClock.Instant = .now) {
        inFlight.remove(endpointID)
        var breaker = breakers[endpointID] ?? Breaker()
        let wasProbe = breaker.pausedUntil != nil
        for succeeded in outcomes {
            if succeeded {
                breaker = Breaker()
            } else {
                breaker.consecutiveFailures += 1
            }
        }
        if breaker.consecutiveFailures >= settings.threshold || (wasProbe && breaker.consecutiveFailures > 0) {
            let factor = 1 << min(breaker.trips, 20)
            breaker.pausedUntil = now + min(settings.firstPause * factor, settings.maximumPause)
            breaker.trips += 1
        } else if breaker.consecutiveFailures == 0 {
            breaker.pausedUntil = nil
        }
        breakers[endpointID] = breaker.consecutiveFailures == 0 && breaker.trips == 0 ? nil : breaker
    }

    /// Whether the endpoint is paused now (tests, metrics).
    func isPaused(_ endpointID: String, now: ContinuousClock.Instant = .now) -> Bool {
        breakers[endpointID]?.pausedUntil.map { $0 > now } ?? false
    }

    /// Endpoints paused now.
    func pausedCount(now: ContinuousClock.Instant = .now) -> Int {
        breakers.values.filter { $0.pausedUntil.map { $0 > now } ?? false }.count
    }
}

/// Wakes the dispatcher's loop: a NOTIFY of a new change, or a batch that
/// finished. A ring while nobody waits is kept for the next wait.
final class Doorbell: @unchecked Sendable {
    // Safety: every field is touched only while holding `lock`.
    private let lock = NSLock()
    private var rung = false
    private var waiter: CheckedContinuation<Void, Never>?
    private var generation = 0

    func ring() {
        let waiting: CheckedContinuation<Void, Never>? = lock.withLock {
            guard let waiting = waiter else {
                rung = true
                return nil
            }
            waiter = nil
            return waiting
        }
        waiting?.resume()
    }

    /// Returns at the next ring, after `timeout`, or when the task is cancelled.
    func wait(timeout: Duration) async {
        await withTaskCancellationHandler {
            await waitOrTimeout(timeout)
        } onCancel: {
            ring()
        }
    }

    private func waitOrTimeout(_ timeout: Duration) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let current: Int? = lock.withLock {
                if rung {
                    rung = false
                    return nil
                }
                generation += 1
                waiter = continuation
                return generation
            }
            guard let current else {
                continuation.resume()
                return
            }
            Task { [self] in
                try? await Task.sleep(for: timeout)
                let expired: CheckedContinuation<Void, Never>? = lock.withLock {
                    guard generation == current, let waiting = waiter else { return nil }
                    waiter = nil
                    return waiting
                }
                expired?.resume()
            }
        }
    }
}
