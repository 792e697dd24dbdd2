import Foundation

/// Keeps the client's calls within Google's quota and its own means: at
/// most `maximumConcurrentRequests` under way at once, and each quota bucket
/// paced at its rate (held back, for every caller, until a 429's
/// `Retry-After` passes).
///
/// The queue is bounded in time: a caller that would wait longer than
/// `maximumQueueWait` for its turn is refused with `unavailable` (a 503 its
/// own caller, Pub/Sub, retries) instead of holding a request open; a caller
/// cancelled while it waits leaves the queue.
/// https://developers.google.com/android-publisher/quotas
actor GooglePlayRequestLimiter {
    private struct Waiter {
        var id: UInt64
        var continuation: CheckedContinuation<Bool, Never>
        var timer: Task<Void, Never>
    }

    private let settings: GooglePlayAPISettings
    private var inFlight = 0
    private var waiters: [Waiter] = []
    private var lastWaiterID: UInt64 = 0
    /// The earliest instant the next request of each bucket may start.
    private var nextSlot: [GooglePlayAPIEndpoint.QuotaBucket: ContinuousClock.Instant] = [:]
    /// The most requests that were under way at once (tests).
    private(set) var highestInFlight = 0

    init(settings: GooglePlayAPISettings) {
        self.settings = settings
    }

    /// Waits for a place among the concurrent requests, then for the next
    /// slot of the endpoint's bucket; `release()` must follow.
    func acquire(_ endpoint: GooglePlayAPIEndpoint) async throws(GooglePlayAPIError) {
        let deadline = ContinuousClock.now + settings.maximumQueueWait
        if inFlight < max(1, settings.maximumConcurrentRequests) {
            inFlight += 1
        } else {
            lastWaiterID += 1
            let id = lastWaiterID
            let granted = await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                    let timer = Task { [weak self] in
                        try? await Task.sleep(until: deadline, clock: .continuous)
                        await self?.leave(id)
                    }
                    waiters.append(Waiter(id: id, continuation: continuation, timer: timer))
                }
            } onCancel: {
                Task { [weak self] in await self?.leave(id) }
            }
            guard granted else {
                if Task.isCancelled { throw .cancelled(endpoint) }
                throw GooglePlayAPIError(.unavailable, endpoint: endpoint, message:
                    "\(settings.maximumConcurrentRequests) requests to Google are under way and the queue did not move "
                        + "within \(settings.maximumQueueWait), the longest a caller waits")
            }
        }
        highestInFlight = max(highestInFlight, inFlight)
        guard let bucket = endpoint.bucket else { return }
        let now = ContinuousClock.now
        let slot = max(now, nextSlot[bucket] ?? now)
        guard slot <= deadline else {
            release()
            throw GooglePlayAPIError(.unavailable, endpoint: endpoint, message:
                "requests of Google's \(bucket.rawValue) quota are queued for \((slot - now).components.seconds) s, "
                    + "longer than the \(settings.maximumQueueWait) a caller waits")
        }
        let interval = Duration.nanoseconds(Int64(1e9 / max(settings.rate(bucket), 0.001)))
        nextSlot[bucket] = slot + interval
        guard slot > now else { return }
        do {
            try await Task.sleep(until: slot, clock: .continuous)
        } catch {
            release()
            throw .cancelled(endpoint)
        }
    }

    /// Gives the place back: to the first waiter, else to the pool.
    func release() {
        if waiters.isEmpty {
            inFlight = max(0, inFlight - 1)
        } else {
            let next = waiters.removeFirst()
            next.timer.cancel()
            next.continuation.resume(returning: true)
        }
    }

    /// Holds `endpoint`'s bucket back for `delay` (a 429).
    func pause(_ endpoint: GooglePlayAPIEndpoint, for delay: Duration) {
        guard let bucket = endpoint.bucket else { return }
        let until = ContinuousClock.now + delay
        nextSlot[bucket] = max(nextSlot[bucket] ?? until, until)
    }

    /// A waiter that timed out or was cancelled leaves the queue, unserved.
    private func leave(_ id: UInt64) {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return }
        let waiter = waiters.remove(at: index)
        waiter.timer.cancel()
        waiter.continuation.resume(returning: false)
    }
}

extension GooglePlayAPIError {
    /// The caller was cancelled (a shutdown): reported as unavailable, which it is for that caller.
    static func cancelled(_ endpoint: GooglePlayAPIEndpoint?) -> GooglePlayAPIError {
        GooglePlayAPIError(.unavailable, endpoint: endpoint, message: "the call was cancelled")
    }
}
