import CoreMetrics
import Foundation
@testable import HTTPAPI
import Hummingbird
import HummingbirdTesting
import Prometheus
import SubledgerApp
import SubledgerAppTesting
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
    /// status, and is no longer active once answered; a thrown error is
    /// counted as an error. (The middleware records when the handler
    /// returns, so a response body stays one buffer.) A registry of its own:
    /// the shared one counts the requests of every test running meanwhile.
    @Test func anAnsweredRequestIsCountedAndTimed() async throws {
        let registry = PrometheusCollectorRegistry()
        let router = Router(context: AppRequestContext.self)
        router.add(middleware: RequestMetricsMiddleware(factory: PrometheusMetricsFactory(registry: registry)))
        router.get("/things/:id") { _, _ in Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: "{}"))) }
        router.get("/broken") { _, _ -> Response in throw HTTPError(.conflict) }
        try await Application(router: router).test(.router) { client in
            for id in 0..<3 {
                let response = try await client.execute(uri: "/things/\(id)", method: .get)
                #expect(response.status == .ok)
            }
            _ = try? await client.execute(uri: "/broken", method: .get)
        }
        let lines = String(decoding: registry.emitToBuffer(), as: UTF8.self).split(separator: "\n")
        func value(_ prefix: String, _ labels: String...) -> Double? {
            lines.first { $0.hasPrefix(prefix) && labels.allSatisfy($0.contains) }.flatMap { $0.split(separator: " ").last }.flatMap { Double($0) }
        }
        #expect(value("hb_requests{", #""/things/{id}""#, #""GET""#, #""200""#) == 3, "\(lines)")
        #expect(value("http_server_request_duration_count{", #""/things/{id}""#, #""GET""#, #""200""#) == 3, "\(lines)")
        #expect(value("hb_request_errors{", #""/broken""#, #""409""#) == 1, "\(lines)")
        #expect(value("http_server_active_requests{", #""GET""#) == 0, "\(lines)")
    }
}
