import Foundation
import Hummingbird
import Logging
import Prometheus
import SubledgerApp

/// `GET /health` (database reachable, projection lag) and `GET /metrics`.
struct HealthController {
    let health: HealthStore
    let metrics: PrometheusCollectorRegistry
    let logger: Logger

    func addRoutes(to router: Router<AppRequestContext>) {
        router.get("/health", use: check)
        router.get("/metrics", use: render)
    }

    struct HealthBody: Encodable {
        var status: String
        var database: String
        var projections: [String: Int64]
    }

    @Sendable func check(request: Request, context: AppRequestContext) async throws -> Response {
        do {
            let lags = try await withDeadline(.seconds(3)) { [health] in try await health.projectionLags() }
            return try .json(HealthBody(status: "ok", database: "up", projections: lags))
        } catch {
            logger.warning("health check failed", metadata: ["error": "\(error)"])
            return try .json(HealthBody(status: "unavailable", database: "down", projections: [:]), status: .serviceUnavailable)
        }
    }

    @Sendable func render(request: Request, context: AppRequestContext) async throws -> Response {
        Response(
            status: .ok,
            headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: metrics.emitToBuffer())))
    }
}
