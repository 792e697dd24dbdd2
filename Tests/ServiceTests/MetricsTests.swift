import CoreMetrics
import Foundation
import HTTPAPI
import Hummingbird
import HummingbirdTesting
import Prometheus
import SubledgerApp
import Testing

/// The registry every test in this process shares once metrics are
/// bootstrapped (swift-metrics allows one bootstrap per process).
enum SharedMetrics {
    static let registry: PrometheusCollectorRegistry = {
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        return registry
    }()
}

@Suite struct MetricsTests {
    /// A client error is counted under its own status. The metrics middleware
    /// used to sit inside the error mapping, so it saw the thrown error and
    /// labelled every 400 as a 500.
    @Test func aClientErrorIsCountedUnderItsStatus() async throws {
        let registry = SharedMetrics.registry
        try await withApp { client, _ in
            let response = try await client.post("/v1/subscribers/metrics-probe/events", #"{"type": "purchase"}"#)
            #expect(response.status == .badRequest)
        }
        let text = String(decoding: registry.emitToBuffer(), as: UTF8.self)
        let lines = text.split(separator: "\n").filter { $0.hasPrefix("hb_request") && $0.contains("/v1/subscribers/{subscriberId}/events") }
        #expect(lines.contains { $0.contains("\"400\"") }, "\(lines)")
        #expect(!lines.contains { $0.contains("\"500\"") }, "\(lines)")
    }
}
