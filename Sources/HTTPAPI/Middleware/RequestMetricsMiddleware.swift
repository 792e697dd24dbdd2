import Foundation
import Hummingbird
import Metrics
import SubledgerApp
import Synchronization

/// Counts and times each request under the route, method and status the
/// client gets: `hb_requests`, `http_server_request_duration` (seconds),
/// `hb_request_errors` and `http_server_active_requests`, the names
/// Hummingbird's `MetricsMiddleware` uses, so dashboards keep working.
///
/// Unlike that middleware it records when the handler returns its response
/// instead of after the body is written. To time the write it wraps every
/// body in a closure, and a closure body is written part by part (head,
/// body, end), each part its own hop to the event loop, the head and the
/// body each their own `write(2)`: a two-segment response the client has to
/// read twice. Left a single buffer, a response is written whole, in one
/// system call. Every response of this service is a buffer built before
/// it returns, so the time left out is NIO's queueing of the bytes, not the
/// work of the request.
struct RequestMetricsMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext

    private let metrics: RequestMetrics

    /// `factory`: where the metrics go (tests pass a registry of their own).
    init(factory: any MetricsFactory = MetricsSystem.factory) {
        metrics = RequestMetrics(factory: factory)
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = DispatchTime.now().uptimeNanoseconds
        let active = metrics.active(request.method)
        active.increment()
        defer { active.decrement() }
        do {
            let response = try await next(request, context)
            let endpoint = metrics.endpoint(RequestMetrics.Key(route: context.endpointPath ?? "Unknown", method: request.method,
                                                              status: response.status))
            endpoint.requests.increment()
            endpoint.duration.recordNanoseconds(Int64(DispatchTime.now().uptimeNanoseconds - started))
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status ?? .internalServerError
            let endpoint = metrics.endpoint(RequestMetrics.Key(route: context.endpointPath ?? "NotFound", method: request.method,
                                                              status: status))
            endpoint.requests.increment()
            endpoint.errors.increment()
            throw error
        }
    }
}

/// The metric objects of each route, method and status, made once.
private final class RequestMetrics: Sendable {
    struct Key: Hashable {
        var route: String
        var method: HTTPRequest.Method
        var status: HTTPResponse.Status
    }

    struct Endpoint: Sendable {
        let requests: Counter
        let duration: Metrics.Timer
        let errors: Counter

        init(_ key: Key, factory: any MetricsFactory) {
            let dimensions = [("http.route", key.route), ("http.request.method", key.method.rawValue),
                              ("http.response.status_code", String(key.status.code))]
            requests = Counter(label: "hb.requests", dimensions: dimensions, factory: factory)
            duration = Metrics.Timer(label: "http.server.request.duration", dimensions: dimensions, preferredDisplayUnit: .seconds,
                                     factory: factory)
            errors = Counter(label: "hb.request.errors", dimensions: [("http.route", key.route), ("http.request.method", key.method.rawValue),
                                                                     ("error.type", String(key.status.code))],
                             factory: factory)
        }
    }

    private let factory: any MetricsFactory
    private let endpoints = Mutex<[Key: Endpoint]>([:])
    private let activeRequests = Mutex<[HTTPRequest.Method: Meter]>([:])

    init(factory: any MetricsFactory) {
        self.factory = factory
    }

    func endpoint(_ key: Key) -> Endpoint {
        endpoints.withLock { endpoints in
            if let endpoint = endpoints[key] { return endpoint }
            let endpoint = Endpoint(key, factory: factory)
            endpoints[key] = endpoint
            return endpoint
        }
    }

    func active(_ method: HTTPRequest.Method) -> Meter {
        activeRequests.withLock { meters in
            if let meter = meters[method] { return meter }
            let meter = Meter(label: "http.server.active_requests", dimensions: [("http.request.method", method.rawValue)], factory: factory)
            meters[method] = meter
            return meter
        }
    }
}
