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
        /// The standbys and their lag; nil when it could not be read.
        var replication: ReplicationStatus?
    }

    @Sendable func check(request: Request, context: AppRequestContext) async throws -> Response {
        do {
            let lags = try await withDeadline(.seconds(3)) { [health] in try await health.projectionLags() }
            let replication = try? await withDeadline(.seconds(1)) { [health] in try await health.replication() }
            if let replication { recordLag(replication) }
            return try .json(HealthBody(status: "ok", database: "up", projections: lags, replication: replication))
        } catch {
            logger.warning("health check failed", metadata: ["error": "\(error)"])
            return try .json(HealthBody(status: "unavailable", database: "down", projections: [:]), status: .serviceUnavailable)
        }
    }

    @Sendable func render(request: Request, context: AppRequestContext) async throws -> Response {
        if let replication = try? await withDeadline(.seconds(1), { [health] in try await health.replication() }) {
            recordLag(replication)
        }
        return Response(
            status: .ok,
            headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: metrics.emitToBuffer())))
    }

    /// Replica lag as gauges, per standby and for the one answering reads.
    private func recordLag(_ replication: ReplicationStatus) {
        for standby in replication.standbys {
            metrics.makeGauge(name: "subledger_replica_lag_bytes", labels: [("standby", standby.name)])
                .set(Double(standby.lagBytes))
            metrics.makeGauge(name: "subledger_replica_replay_lag_seconds", labels: [("standby", standby.name)])
                .set(standby.replayLagSeconds)
        }
        if let lag = replication.readStandbyLagBytes {
            metrics.makeGauge(name: "subledger_read_standby_lag_bytes").set(Double(lag))
        }
    }
}
