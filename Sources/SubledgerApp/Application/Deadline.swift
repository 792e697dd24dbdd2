import Foundation

package struct DeadlineExceeded: Error {}

/// Runs `body`, failing with `DeadlineExceeded` when it takes longer than
/// `limit`. Answers at the deadline even if `body` ignores cancellation (a
/// task group would wait for it): the work is cancelled and left to finish.
package func withDeadline<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    let outcome = FirstOutcome<T>()
    return try await withCheckedThrowingContinuation { continuation in
        outcome.continuation = continuation
        let work = Task {
            do { outcome.resume(with: .success(try await body())) } catch { outcome.resume(with: .failure(error)) }
        }
        Task {
            try? await Task.sleep(for: limit)
            outcome.resume(with: .failure(DeadlineExceeded()))
            work.cancel()
        }
    }
}

/// Resumes a continuation with whichever outcome comes first.
final class FirstOutcome<T: Sendable>: @unchecked Sendable {
    // Safety: `continuation` is set before either task starts and read under `lock`.
    private let lock = NSLock()
    var continuation: CheckedContinuation<T, Error>?

    func resume(with result: Result<T, Error>) {
        let waiting: CheckedContinuation<T, Error>? = lock.withLock {
            defer { continuation = nil }
            return continuation
        }
        waiting?.resume(with: result)
    }
}
