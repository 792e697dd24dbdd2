import AppStore
import AsyncHTTPClient
import Foundation
import JSON
import Ledger
import Logging
import Metrics
import NIOCore
import NIOHTTP1

/// A client of Apple's App Store Server API: each request carries a cached
/// ES256 JWT, is paced below Apple's per-endpoint rate, waits out a 429's
/// `Retry-After`, retries 5xx and connection failures with backoff, and
/// reports a 401 as the configuration error it is. Every signed part of an
/// answer is verified with the same `AppStoreVerifier` as notifications
/// before anything uses it (see `AppStoreAPIClient+Endpoints`).
public struct AppStoreAPIClient: Sendable {
    public let verifier: AppStoreVerifier
    public let bundleID: String
    let baseURLs: [Ledger.Environment: String]
    let settings: AppStoreAPISettings
    let tokens: AppStoreAPITokenCache
    let pacer: RequestPacer
    let http: HTTPClient
    let logger: Logger

    public init(credentials: AppStoreAPICredentials, verifier: AppStoreVerifier, productionURL: String, sandboxURL: String,
                settings: AppStoreAPISettings = AppStoreAPISettings(), http: HTTPClient = .shared, logger: Logger) {
        self.verifier = verifier
        self.bundleID = credentials.bundleID
        self.baseURLs = [.production: Self.trimmed(productionURL), .sandbox: Self.trimmed(sandboxURL)]
        self.settings = settings
        self.tokens = AppStoreAPITokenCache(credentials: credentials, lifetime: settings.tokenLifetime,
                                            renewalMargin: settings.tokenRenewalMargin)
        self.pacer = RequestPacer(settings: settings)
        self.http = http
        self.logger = logger
    }

    /// The client the configuration describes; errors name the variable to fix.
    public static func make(_ configuration: SubledgerConfiguration, verifier: AppStoreVerifier,
                            logger: Logger) throws(ConfigurationError) -> AppStoreAPIClient {
        func required(_ value: String?, _ variable: String, _ what: String) throws(ConfigurationError) -> String {
            guard let value else {
                throw ConfigurationError(variable: variable, message: "not set: the App Store Server API needs \(what)")
            }
            return value
        }
        let keyFile = try required(configuration.appStoreKeyFile, "SUBLEDGER_APPSTORE_KEY_FILE",
                                   "the in-app purchase key (.p8) from App Store Connect")
        let keyID = try required(configuration.appStoreKeyID, "SUBLEDGER_APPSTORE_KEY_ID", "the key's id (10 characters)")
        let issuerID = try required(configuration.appStoreIssuerID, "SUBLEDGER_APPSTORE_ISSUER_ID",
                                    "the team's issuer id (a UUID, on the keys page of App Store Connect)")
        let bundleID = try required(configuration.appStoreBundleID, "SUBLEDGER_APPSTORE_BUNDLE_ID", "the app's bundle id")
        for (variable, url) in [("SUBLEDGER_APPSTORE_API_URL", configuration.appStoreAPIURL),
                                ("SUBLEDGER_APPSTORE_API_SANDBOX_URL", configuration.appStoreAPISandboxURL)] {
            guard let parsed = URL(string: url), ["http", "https"].contains(parsed.scheme ?? ""), parsed.host != nil else {
                throw ConfigurationError(variable: variable, message: "expected an http(s) URL, got \(url.prefix(200))")
            }
        }
        let credentials = try AppStoreAPICredentials(keyFile: keyFile, keyID: keyID, issuerID: issuerID, bundleID: bundleID)
        return AppStoreAPIClient(credentials: credentials, verifier: verifier, productionURL: configuration.appStoreAPIURL,
                                 sandboxURL: configuration.appStoreAPISandboxURL, settings: configuration.appStoreAPISettings,
                                 logger: logger)
    }

    private static func trimmed(_ url: String) -> String {
        url.hasSuffix("/") ? String(url.dropLast()) : url
    }

    // MARK: Requests

    /// One call: `path` below the environment's base URL (already percent-encoded).
    struct Call: Sendable {
        var endpoint: AppStoreAPIEndpoint
        var environment: Ledger.Environment
        var method: HTTPMethod = .GET
        var path: String
        var query: [(String, String)] = []
        var body: Data?
    }

    /// Apple's error body (`{"errorCode", "errorMessage"}`).
    struct AppleError: Decodable {
        var errorCode: Int?
        var errorMessage: String?
    }

    /// Sends `call` until it succeeds or fails for good; the answer's body on 2xx.
    func send(_ call: Call) async throws -> Data {
        var failures = 0
        var rateLimitWaits = 0
        let callStarted = ContinuousClock.now
        /// Whether another attempt after a failure fits the retries and their window.
        func mayRetry() -> Bool {
            failures < settings.retryDelays.count && ContinuousClock.now - callStarted + settings.retryDelays[failures] < settings.retryWindow
        }
        while true {
            try Task.checkCancellation()
            try await pacer.wait(call.endpoint, call.environment)
            let started = ContinuousClock.now
            let answer: (status: Int, headers: HTTPHeaders, body: Data)
            do {
                answer = try await execute(call)
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                Self.count(call.endpoint, "unreachable")
                try Task.checkCancellation()
                guard mayRetry() else {
                    throw AppStoreAPIError(.unreachable, endpoint: call.endpoint,
                                           message: "\(call.environment.rawValue) API at \(baseURLs[call.environment] ?? "") could not be reached after \(failures + 1) attempts (\(error))")
                }
                logger.warning("app store server api unreachable; retrying", metadata: metadata(call, attempt: failures + 1, error: "\(error)"))
                try await Task.sleep(for: settings.retryDelays[failures])
                failures += 1
                continue
            }
            Self.latency(call.endpoint).recordNanoseconds(Int64((ContinuousClock.now - started) / .nanoseconds(1)))
            let apple = try? JSONDecoder().decode(AppleError.self, from: answer.body)
            switch answer.status {
            case 200..<300:
                Self.count(call.endpoint, "success")
                return answer.body
            case 401:
                Self.count(call.endpoint, "unauthorized")
                await tokens.invalidate()
                throw AppStoreAPIError(.unauthorized, endpoint: call.endpoint, status: 401, appleErrorCode: apple?.errorCode,
                                       message: "Apple refused the JWT: check SUBLEDGER_APPSTORE_KEY_FILE, SUBLEDGER_APPSTORE_KEY_ID, SUBLEDGER_APPSTORE_ISSUER_ID and SUBLEDGER_APPSTORE_BUNDLE_ID (and that the key is an in-app purchase key of this app's team)")
            case 429:
                Self.count(call.endpoint, "rate_limited")
                let now = Date()
                let retryAt = Self.retryAfterDate(answer.headers.first(name: "Retry-After"), now: now)
                    ?? now.addingTimeInterval(settings.defaultRateLimitWait.timeInterval)
                let delay = Duration.milliseconds(max(0, Int64((retryAt.timeIntervalSince(now) * 1000).rounded(.up))))
                // A longer Retry-After than the client waits is refused below;
                // it holds the endpoint back no longer than the client would wait.
                await pacer.pause(call.endpoint, call.environment, for: min(delay, settings.maximumRateLimitWait))
                guard delay <= settings.maximumRateLimitWait, rateLimitWaits < settings.maximumRateLimitWaits else {
                    throw AppStoreAPIError(.rateLimited(retryAt: retryAt), endpoint: call.endpoint, status: 429, appleErrorCode: apple?.errorCode,
                                           message: "Apple's rate limit was reached; it allows the next request at \(RFC3339.format(retryAt))")
                }
                logger.notice("app store server api rate limit reached; waiting", metadata: [
                    "appstore.api.endpoint": "\(call.endpoint.rawValue)", "appstore.api.retry_at": "\(RFC3339.format(retryAt))",
                ])
                rateLimitWaits += 1
                continue
            default:
                let retryable = answer.status >= 500 || apple?.errorCode.map(AppStoreAPIError.retryableAppleCodes.contains) == true
                if retryable && mayRetry() {
                    Self.count(call.endpoint, "retried")
                    logger.warning("app store server api failed; retrying", metadata: metadata(
                        call, attempt: failures + 1, error: "HTTP \(answer.status) \(apple?.errorCode.map(String.init) ?? "")"))
                    try await Task.sleep(for: settings.retryDelays[failures])
                    failures += 1
                    continue
                }
                let kind: AppStoreAPIError.Kind = retryable ? .unavailable : answer.status == 404 ? .notFound : .rejected
                Self.count(call.endpoint, retryable ? "unavailable" : "refused")
                throw AppStoreAPIError(kind, endpoint: call.endpoint, status: answer.status, appleErrorCode: apple?.errorCode,
                                       message: apple?.errorMessage.map { String($0.prefix(300)) } ?? "Apple answered HTTP \(answer.status)")
            }
        }
    }

    private func execute(_ call: Call) async throws -> (status: Int, headers: HTTPHeaders, body: Data) {
        var url = (baseURLs[call.environment] ?? "") + call.path
        if !call.query.isEmpty {
            var components = URLComponents()
            components.queryItems = call.query.map { URLQueryItem(name: $0.0, value: $0.1) }
            // URLComponents leaves '+' alone; Apple's tokens are base64 and may hold one.
            url += "?" + (components.percentEncodedQuery ?? "").replacingOccurrences(of: "+", with: "%2B")
        }
        return try await StoreRequest.send(url: url, method: call.method, bearer: try await tokens.token(), body: call.body,
                                           timeout: settings.requestTimeout, http: http)
    }

    /// `Retry-After` as Apple sends it (UNIX time in milliseconds), or the
    /// HTTP forms: seconds to wait, or an HTTP date.
    public static func retryAfterDate(_ value: String?, now: Date) -> Date? {
        guard let text = value?.trimmingCharacters(in: .whitespaces), !text.isEmpty else { return nil }
        if let number = Int64(text), number >= 0 {
            if number >= 100_000_000_000 { return Date(timeIntervalSince1970: Double(number) / 1000) }
            if number >= 1_000_000_000 { return Date(timeIntervalSince1970: Double(number)) }
            return now.addingTimeInterval(Double(number))
        }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: text)
    }

    private func metadata(_ call: Call, attempt: Int, error: String) -> Logger.Metadata {
        ["appstore.api.endpoint": "\(call.endpoint.rawValue)", "appstore.environment": "\(call.environment.rawValue)",
         "appstore.api.attempt": "\(attempt)", "error": "\(error)"]
    }

    // MARK: Metrics

    /// `subledger_appstore_api_requests_total{endpoint, outcome}`.
    static func count(_ endpoint: AppStoreAPIEndpoint, _ outcome: String) {
        Counter(label: "subledger_appstore_api_requests_total", dimensions: [("endpoint", endpoint.rawValue), ("outcome", outcome)])
            .increment()
    }

    static func latency(_ endpoint: AppStoreAPIEndpoint) -> Metrics.Timer {
        Metrics.Timer(label: "subledger_appstore_api_request_duration_seconds", dimensions: [("endpoint", endpoint.rawValue)],
                      preferredDisplayUnit: .seconds)
    }
}
