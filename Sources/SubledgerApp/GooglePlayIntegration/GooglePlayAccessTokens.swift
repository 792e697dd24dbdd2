import AsyncHTTPClient
import Foundation
import GooglePlay
import JSON
import Logging
import NIOCore
import NIOHTTP1

/// The access token every call to the Play Developer API carries: the
/// service account's signed assertion exchanged at its key's `token_uri`
/// (`grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`), shared by
/// every call until shortly before `expires_in` runs out.
///
/// Callers that find no usable token while an exchange is under way join it:
/// a burst of calls, or of 401s, costs one exchange. A token the API refused
/// is dropped, but only that one (a caller late with its 401 never drops the
/// token another caller has just obtained).
/// https://developers.google.com/identity/protocols/oauth2/service-account#authorizingrequests
actor GooglePlayAccessTokens {
    /// A token and when to stop handing it out.
    struct Issued: Sendable {
        var token: GoogleAccessToken
        var renewAt: Date
    }

    private let serviceAccount: ServiceAccountKey
    private let settings: GooglePlayAPISettings
    private let http: HTTPClient
    private let logger: Logger
    private let now: @Sendable () -> Date
    private var current: Issued?
    private var exchange: Task<Result<Issued, GooglePlayAPIError>, Never>?
    /// Exchanges started.
    private(set) var exchanges = 0

    init(serviceAccount: ServiceAccountKey, settings: GooglePlayAPISettings, http: HTTPClient, logger: Logger,
         now: @escaping @Sendable () -> Date = { Date() }) {
        self.serviceAccount = serviceAccount
        self.settings = settings
        self.http = http
        self.logger = logger
        self.now = now
    }

    /// The token to send now: the cached one, or a fresh one.
    func token() async throws(GooglePlayAPIError) -> String {
        if let current, now() < current.renewAt { return current.token.accessToken }
        let task: Task<Result<Issued, GooglePlayAPIError>, Never>
        if let exchange {
            task = exchange
        } else {
            exchanges += 1
            let (serviceAccount, settings, http, logger, now) = (serviceAccount, settings, http, logger, now)
            task = Task { await Self.exchange(serviceAccount, settings: settings, http: http, logger: logger, now: now) }
            exchange = task
        }
        // Not cancelled with the caller: others may be waiting for it, and the request is bounded by its timeout.
        let result = await task.value
        if exchange == task {
            exchange = nil
            if case .success(let issued) = result { current = issued }
        }
        return try result.get().token.accessToken
    }

    /// Drops `accessToken` if it is still the one handed out: the API refused it.
    func invalidate(_ accessToken: String) {
        if current?.token.accessToken == accessToken { current = nil }
    }

    // MARK: The exchange

    /// The token endpoint's refusal, `{"error", "error_description"}`.
    /// https://developers.google.com/identity/protocols/oauth2/service-account#error-codes
    private struct OAuthError: Decodable {
        var error: String?
        var error_description: String?
    }

    private static func exchange(_ serviceAccount: ServiceAccountKey, settings: GooglePlayAPISettings, http: HTTPClient,
                                 logger: Logger, now: @Sendable () -> Date) async -> Result<Issued, GooglePlayAPIError> {
        func failure(_ kind: GooglePlayAPIError.Kind, _ outcome: String, status: Int? = nil, reason: String? = nil,
                     _ message: String) -> Result<Issued, GooglePlayAPIError> {
            GooglePlayAPIClient.count(.token, outcome)
            let error = GooglePlayAPIError(kind, endpoint: .token, status: status, reason: reason, message: message)
            logger.warning("google access token exchange failed", metadata: [
                "googleplay.api.endpoint": "\(GooglePlayAPIEndpoint.token.rawValue)", "googleplay.service_account": "\(serviceAccount.clientEmail)",
                "error.code": "\(error.code)", "error": "\(error.description)",
            ])
            return .failure(error)
        }
        let host = serviceAccount.tokenURI.host ?? serviceAccount.tokenURI.absoluteString
        let form: String
        do {
            form = try serviceAccount.tokenRequestBody(now: now())
        } catch {
            return failure(.unauthorized, "unauthorized", "the service account's key could not sign an assertion (\(error.message)); check \(settings.credentialsHint)")
        }
        var request = HTTPClientRequest(url: serviceAccount.tokenURI.absoluteString)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.headers.add(name: "Accept", value: "application/json")
        request.headers.add(name: "User-Agent", value: "subledger")
        request.body = .bytes(ByteBuffer(string: form))
        let started = ContinuousClock.now
        let status: Int
        let body: Data
        do {
            let response = try await http.execute(request, timeout: .nanoseconds(Int64(settings.requestTimeout / .nanoseconds(1))))
            status = Int(response.status.code)
            body = Data(try await response.body.collect(upTo: 1 << 20).readableBytesView)
        } catch {
            return failure(.unavailable, "unreachable", "Google's token endpoint at \(host) could not be reached (\(error))")
        }
        GooglePlayAPIClient.latency(.token).recordNanoseconds(Int64((ContinuousClock.now - started) / .nanoseconds(1)))
        let receivedAt = now()
        switch status {
        case 200..<300:
            let token: GoogleAccessToken
            do {
                token = try GoogleAccessToken.parse(json: body, receivedAt: receivedAt)
            } catch {
                return failure(.invalidAnswer, "invalid_answer", status: status,
                               "the token endpoint's answer is not the JSON Google documents (\(error.field): \(error.message))")
            }
            GooglePlayAPIClient.count(.token, "success")
            // The margin is at most half the lifetime, so a short-lived token is still reused.
            let lifetime = token.expiresAt.timeIntervalSince(receivedAt)
            let renewAt = receivedAt + max(lifetime - settings.tokenRenewalMargin.timeInterval, lifetime / 2)
            logger.debug("google access token obtained", metadata: [
                "googleplay.service_account": "\(serviceAccount.clientEmail)", "googleplay.token.expires": "\(RFC3339.format(token.expiresAt))",
            ])
            return .success(Issued(token: token, renewAt: renewAt))
        case 408, 429, 500...:
            return failure(.unavailable, "unavailable", status: status, "Google's token endpoint at \(host) answered HTTP \(status)")
        default:
            // 400 invalid_grant (a wrong, deleted or disabled key, a skewed clock), 401 invalid_client...
            let refusal = try? JSONDecoder().decode(OAuthError.self, from: body)
            let said = [refusal?.error, refusal?.error_description].compactMap { $0 }.joined(separator: ": ")
            return failure(.unauthorized, "unauthorized", status: status, reason: refusal?.error.map { String($0.prefix(64)) },
                           "Google's token endpoint refused the assertion of \(serviceAccount.clientEmail)"
                               + (said.isEmpty ? "" : " (\(UntrustedText.escaped(said, limit: 300)))")
                               + "; check \(settings.credentialsHint), and that the key is not deleted or disabled and the clock is right")
        }
    }
}
