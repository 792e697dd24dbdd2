import AsyncHTTPClient
import Foundation
import GooglePlay
import JSON
import Logging
import Metrics
import NIOCore
import NIOHTTP1

/// A client of the Google Play Developer API (`androidpublisher` v3): each
/// request carries the service account's access token (exchanged once,
/// shared, renewed before it ends, and once more when the API answers 401),
/// keeps within Google's per-bucket quota and the client's own concurrency,
/// waits out a 429's `Retry-After`, retries 5xx and connection failures with
/// backoff, and reports a refused account as the configuration error it is.
/// The endpoints are in `GooglePlayAPIClient+Endpoints`.
/// https://developers.google.com/android-publisher/api-ref/rest
public struct GooglePlayAPIClient: Sendable {
    /// Google's host, for the configuration's default.
    public static let defaultAPIURL = "https://androidpublisher.googleapis.com"

    public let packageName: String
    /// The service account's email, which a refusal names.
    public let clientEmail: String
    let apiURL: String
    let settings: GooglePlayAPISettings
    let tokens: GooglePlayAccessTokens
    let limiter: GooglePlayRequestLimiter
    let http: HTTPClient
    let logger: Logger

    public init(serviceAccount: ServiceAccountKey, packageName: String, apiURL: String = GooglePlayAPIClient.defaultAPIURL,
                settings: GooglePlayAPISettings = GooglePlayAPISettings(), http: HTTPClient = .shared, logger: Logger) {
        self.packageName = packageName
        self.clientEmail = serviceAccount.clientEmail
        self.apiURL = apiURL.hasSuffix("/") ? String(apiURL.dropLast()) : apiURL
        self.settings = settings
        self.tokens = GooglePlayAccessTokens(serviceAccount: serviceAccount, settings: settings, http: http, logger: logger)
        self.limiter = GooglePlayRequestLimiter(settings: settings)
        self.http = http
        self.logger = logger
    }

    // MARK: Requests

    /// One call: `path` below `apiURL` (already percent-encoded).
    struct Call: Sendable {
        var endpoint: GooglePlayAPIEndpoint
        var method: HTTPMethod = .GET
        var path: String
        var query: [(String, String)] = []
        var body: Data?
        /// Never written into an error or a log line.
        var purchaseToken: String?
    }

    /// Sends `call` until it succeeds or fails for good; the answer's body on 2xx.
    func send(_ call: Call) async throws(GooglePlayAPIError) -> Data {
        var failures = 0
        var rateLimitWaits = 0
        var renewedToken = false
        let callStarted = ContinuousClock.now
        /// Whether another attempt after a failure fits the retries and their window.
        func mayRetry() -> Bool {
            failures < settings.retryDelays.count && ContinuousClock.now - callStarted + settings.retryDelays[failures] < settings.retryWindow
        }
        func backOff(_ what: String) async throws(GooglePlayAPIError) {
            logger.warning("google play developer api failed; retrying", metadata: [
                "googleplay.api.endpoint": "\(call.endpoint.rawValue)", "googleplay.api.attempt": "\(failures + 1)", "error": "\(what)",
            ])
            do { try await Task.sleep(for: settings.retryDelays[failures]) } catch { throw .cancelled(call.endpoint) }
            failures += 1
        }
        func fail(_ outcome: String, _ error: GooglePlayAPIError) -> GooglePlayAPIError {
            Self.count(call.endpoint, outcome)
            return error
        }
        while true {
            if Task.isCancelled { throw .cancelled(call.endpoint) }
            let accessToken: String
            do {
                accessToken = try await tokens.token()
            } catch {
                // The exchange counted itself under `token`; a passing failure is retried like any other.
                if error.kind == .unavailable && mayRetry() {
                    try await backOff(error.message)
                    continue
                }
                throw fail(error.kind == .unauthorized ? "unauthorized" : "unavailable", error)
            }
            do {
                try await limiter.acquire(call.endpoint)
            } catch {
                throw fail("queue_full", error)
            }
            let started = ContinuousClock.now
            let answer: (status: Int, headers: HTTPHeaders, body: Data)
            do {
                answer = try await execute(call, accessToken: accessToken)
            } catch {
                await limiter.release()
                if Task.isCancelled { throw .cancelled(call.endpoint) }
                Self.count(call.endpoint, "unreachable")
                guard mayRetry() else {
                    throw fail("unavailable", GooglePlayAPIError(.unavailable, endpoint: call.endpoint, message:
                        "\(apiURL) could not be reached after \(failures + 1) attempts (\(scrubbed("\(error)", call)))"))
                }
                try await backOff(scrubbed("\(error)", call))
                continue
            }
            await limiter.release()
            Self.latency(call.endpoint).recordNanoseconds(Int64((ContinuousClock.now - started) / .nanoseconds(1)))
            let google = answer.status >= 400 ? GoogleErrorBody.parse(answer.body) : nil
            let said = google?.message.map { scrubbed($0, call) } ?? "Google answered HTTP \(answer.status)"
            func error(_ kind: GooglePlayAPIError.Kind, _ message: String) -> GooglePlayAPIError {
                GooglePlayAPIError(kind, endpoint: call.endpoint, status: answer.status, reason: google?.reason, message: message)
            }
            switch answer.status {
            case 200..<300:
                Self.count(call.endpoint, "success")
                return answer.body
            case 401:
                // An access token Google no longer takes (revoked, or its clock differs from ours): one fresh one.
                await tokens.invalidate(accessToken)
                if !renewedToken {
                    renewedToken = true
                    Self.count(call.endpoint, "token_refused")
                    logger.notice("google play developer api refused the access token; renewing it", metadata: [
                        "googleplay.api.endpoint": "\(call.endpoint.rawValue)",
                    ])
                    continue
                }
                throw fail("unauthorized", error(.unauthorized,
                    "Google refused a fresh access token of \(clientEmail) (\(said)); check \(settings.credentialsHint)"))
            case 403 where google?.isQuota != true:
                // A permission, not a token: a fresh token carries the same account's.
                throw fail("unauthorized", error(.unauthorized,
                    "\(clientEmail) may not do this for \(packageName) (\(said)): invite the service account in Play Console "
                        + "with access to the app's financial data, orders and subscriptions, or check \(settings.credentialsHint)"))
            case 403, 429:
                Self.count(call.endpoint, "rate_limited")
                let now = Date()
                let retryAt = AppStoreAPIClient.retryAfterDate(answer.headers.first(name: "Retry-After"), now: now)
                    ?? now + settings.defaultRateLimitWait.timeInterval
                let delay = Duration.milliseconds(max(0, Int64((retryAt.timeIntervalSince(now) * 1000).rounded(.up))))
                // It holds the bucket back for every caller, no longer than a caller would wait.
                await limiter.pause(call.endpoint, for: min(delay, settings.maximumRateLimitWait))
                guard delay <= settings.maximumRateLimitWait, rateLimitWaits < settings.maximumRateLimitWaits else {
                    throw error(.rateLimited(retryAt: retryAt),
                        "Google's quota was reached; it allows the next request at \(RFC3339.format(retryAt))")
                }
                logger.notice("google play developer api quota reached; waiting", metadata: [
                    "googleplay.api.endpoint": "\(call.endpoint.rawValue)", "googleplay.api.retry_at": "\(RFC3339.format(retryAt))",
                ])
                rateLimitWaits += 1
                continue
            case 404, 410:
                throw fail("not_found", error(.notFound, said))
            case 500...:
                if mayRetry() {
                    Self.count(call.endpoint, "retried")
                    try await backOff("HTTP \(answer.status)")
                    continue
                }
                throw fail("unavailable", error(.unavailable, "\(said) on each of \(failures + 1) attempts"))
            default:
                throw fail("refused", error(.rejected, said))
            }
        }
    }

    private func execute(_ call: Call, accessToken: String) async throws -> (status: Int, headers: HTTPHeaders, body: Data) {
        var url = apiURL + call.path
        if !call.query.isEmpty {
            url += "?" + call.query.map { Self.queryComponent($0.0) + "=" + Self.queryComponent($0.1) }.joined(separator: "&")
        }
        return try await StoreRequest.send(url: url, method: call.method, bearer: accessToken, body: call.body,
                                           timeout: settings.requestTimeout, http: http)
    }

    /// Google's words (or a connection error's) as an error may hold them:
    /// without the purchase token, escaped and short.
    private func scrubbed(_ text: String, _ call: Call) -> String {
        var text = text
        if let token = call.purchaseToken, !token.isEmpty {
            text = text.replacingOccurrences(of: token, with: "…").replacingOccurrences(of: Self.pathSegment(token), with: "…")
        }
        return UntrustedText.escaped(text, limit: 300)
    }

    /// An identifier as one path segment: everything but RFC 3986's
    /// unreserved characters percent-encoded (a token's `/`, `+`, `=` too).
    static func pathSegment(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text
    }

    /// A query name or value, likewise (`+` would otherwise read as a space).
    static func queryComponent(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text
    }

    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    // MARK: Metrics

    /// `subledger_googleplay_api_requests_total{endpoint, outcome}`: per
    /// attempt `unreachable`, `retried`, `rate_limited`, `token_refused`;
    /// per call `success`, `not_found`, `refused`, `unauthorized`,
    /// `unavailable`, `queue_full` (refused by the client's own queue); per exchange (endpoint `token`) `success`,
    /// `unauthorized`, `unavailable`, `unreachable`, `invalid_answer`.
    static func count(_ endpoint: GooglePlayAPIEndpoint, _ outcome: String) {
        Counter(label: "subledger_googleplay_api_requests_total", dimensions: [("endpoint", endpoint.rawValue), ("outcome", outcome)])
            .increment()
    }

    /// `subledger_googleplay_api_request_duration_seconds{endpoint}`, per HTTP request.
    static func latency(_ endpoint: GooglePlayAPIEndpoint) -> Metrics.Timer {
        Metrics.Timer(label: "subledger_googleplay_api_request_duration_seconds", dimensions: [("endpoint", endpoint.rawValue)],
                      preferredDisplayUnit: .seconds)
    }
}
