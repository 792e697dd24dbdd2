import EventStore
import Foundation
import Hummingbird
import Postgres

/// `GET /health` (database reachable, projection lag) and `GET /metrics`.
struct HealthController {
    let dependencies: AppDependencies

    func addRoutes(to router: Router<AppRequestContext>) {
        router.get("/health", use: health)
        router.get("/metrics", use: metrics)
    }

    struct HealthBody: Encodable {
        var status: String
        var database: String
        var projections: [String: Int64]
    }

    @Sendable func health(request: Request, context: AppRequestContext) async throws -> Response {
        do {
            let lags = try await withDeadline(.seconds(3)) { [dependencies] in
                try await dependencies.pool.query("SELECT 1")
                var lags = [String: Int64]()
                for consumer in dependencies.consumers {
                    lags[consumer] = try await dependencies.store.lag(of: consumer)
                }
                return lags
            }
            return try .json(HealthBody(status: "ok", database: "up", projections: lags))
        } catch {
            dependencies.logger.warning("health check failed", metadata: ["error": "\(error)"])
            return try .json(HealthBody(status: "unavailable", database: "down", projections: [:]), status: .serviceUnavailable)
        }
    }

    @Sendable func metrics(request: Request, context: AppRequestContext) async throws -> Response {
        Response(
            status: .ok,
            headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: dependencies.metrics.emitToBuffer())))
    }
}

struct DeadlineExceeded: Error {}

/// Runs `body`, failing with `DeadlineExceeded` when it takes longer than
/// `limit`. Answers at the deadline even if `body` ignores cancellation (a
/// task group would wait for it): the work is cancelled and left to finish.
func withDeadline<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
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
