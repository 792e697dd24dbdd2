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

/// Runs `body`, failing with `DeadlineExceeded` when it takes longer than `limit`.
func withDeadline<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: limit)
            throw DeadlineExceeded()
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}
