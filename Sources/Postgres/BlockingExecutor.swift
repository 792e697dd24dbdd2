import Foundation

/// One dedicated OS thread that runs blocking jobs in order.
///
/// libpq's calls block; running them here keeps them off Swift's cooperative
/// thread pool, so an `async` caller merely suspends while a statement runs.
final class BlockingExecutor: @unchecked Sendable {
    // Safety: `jobs` and `isStopped` are only touched while holding `condition`.
    private let condition = NSCondition()
    private var jobs: [() -> Void] = []
    private var isStopped = false

    init(name: String) {
        let thread = Thread { [self] in self.loop() }
        thread.name = name
        thread.stackSize = 512 * 1024
        thread.start()
    }

    /// Queues a job; returns false when the executor has been stopped.
    func submit(_ job: @escaping () -> Void) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard !isStopped else { return false }
        jobs.append(job)
        condition.signal()
        return true
    }

    /// Lets queued jobs finish, then ends the thread.
    func stop() {
        condition.lock()
        isStopped = true
        condition.signal()
        condition.unlock()
    }

    private func loop() {
        while true {
            condition.lock()
            while jobs.isEmpty && !isStopped { condition.wait() }
            if jobs.isEmpty && isStopped {
                condition.unlock()
                return
            }
            let batch = jobs
            jobs.removeAll(keepingCapacity: true)
            condition.unlock()
            for job in batch { job() }
        }
    }
}
