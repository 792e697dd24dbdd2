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

    /// An answered request is counted and timed under its route, method and
    /// status, and is no longer active once answered. (The middleware records
    /// when the handler returns, so the response body stays one buffer.)
    @Test func anAnsweredRequestIsCountedAndTimed() async throws {
        let registry = SharedMetrics.registry
        func sample(_ prefix: String) -> Double {
            let text = String(decoding: registry.emitToBuffer(), as: UTF8.self)
            return text.split(separator: "\n")
                .filter { $0.hasPrefix(prefix) && $0.contains("\"/v1/subscribers/{subscriberId}\"") && $0.contains("\"GET\"")
                    && $0.contains("\"200\"") }
                .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }
                .reduce(0, +)
        }
        let counted = sample("hb_requests{"), timed = sample("http_server_request_duration_count{")
        try await withApp { client, _ in
            let recorded = try await client.post("/v1/subscribers/metrics-timed/events", purchaseJSON("metrics-timed-1"))
            #expect(recorded.status == .created)
            for _ in 0..<3 {
                let read = try await client.get("/v1/subscribers/metrics-timed")
                #expect(read.status == .ok)
            }
        }
        #expect(sample("hb_requests{") - counted == 3)
        #expect(sample("http_server_request_duration_count{") - timed == 3)
        let text = String(decoding: registry.emitToBuffer(), as: UTF8.self)
        let active = text.split(separator: "\n").filter { $0.hasPrefix("http_server_active_requests{") }
        #expect(!active.isEmpty && active.allSatisfy { $0.hasSuffix(" 0") || $0.hasSuffix(" 0.0") }, "\(active)")
    }
}
