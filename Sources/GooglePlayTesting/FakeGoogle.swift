import Foundation
import GooglePlay
import JSON
import Synchronization

/// A stand-in for Google on loopback, for the app's tests and the bench: the OAuth token
/// endpoint of a service account, the Play Developer API's purchase
/// methods over an in-memory store, and the JWKS of push tokens. It checks
/// what Google checks and answers in Google's shapes, so a test of the app
/// can rely on it:
///
/// - `POST /token` takes only the account's signed assertion
///   (`FakeServiceAccount.verifyTokenRequest`) and issues random access
///   tokens that live `accessTokenLifetime` seconds; anything else is 400
///   with the OAuth error (`invalid_grant`...).
///   https://developers.google.com/identity/protocols/oauth2/service-account
/// - every `/androidpublisher/v3/applications/{packageName}/...` path needs
///   `Authorization: Bearer` a live issued token (else 401 `UNAUTHENTICATED`),
///   the configured package (else 404), and a known purchase (else 404).
/// - acknowledging flips `acknowledgementState`, again and again without
///   complaint (Google's reference does not say otherwise); a purchase whose
///   payment is pending cannot be acknowledged (400 `invalidPurchaseState`).
/// - `voidedpurchases` pages by `maxResults` (1…1000) and `token`, filters
///   by `startTime` (at most 30 days back) and `type` (0: products only).
/// - `GET /certs` serves the identity's JWKS.
///
/// A test can make the next requests of a route fail (`failNext`), slow a
/// route down (`setDelay`), revoke every issued token, and read what each
/// route received and how many requests it held at once.
public actor FakeGoogle {
    public enum Route: String, CaseIterable, Sendable {
        case token, certs, subscriptionsV2Get, productsGet, subscriptionsAcknowledge, productsAcknowledge, voidedPurchasesList

        public var isPlayAPI: Bool { self != .token && self != .certs }
    }

    /// A request as it arrived: the raw path shows its percent-encoding.
    public struct Received: Sendable {
        public var route: Route
        public var method: String
        public var rawPath: String
        /// The path parameters, decoded (`packageName`, `productId`/`subscriptionId`, `token`).
        public var parameters: [String: String]
        public var query: [String: String]
        public var body: Data
        public var contentType: String?
        public var authorization: String?
        public var at: Date
    }

    /// An answer a test injects in place of the route's own.
    public struct Failure: Sendable {
        var status: Int
        var retryAfter: String?
    }

    public struct VoidedItem: Sendable {
        var json: JSONValue
        var isSubscription: Bool
    }

    /// A voided page's query, kept behind the page token Google hands out.
    struct PageCursor: Sendable {
        var offset: Int
        var type: Int
        var startTime: Date
    }

    public static let voidedRetention: TimeInterval = 30 * 86_400

    public let serviceAccount: FakeServiceAccount
    public let identity: FakeGoogleIdentity?
    public let packageName: String
    public private(set) var baseURL = ""
    public var tokenURI: String { baseURL + "/token" }

    /// `expires_in` of the access tokens issued from now on.
    public private(set) var accessTokenLifetime = 3599
    private var accessTokens: [String: Date] = [:]
    public private(set) var issuedTokens = 0
    /// Behind a lock rather than the actor, so a load generator on a thread
    /// of its own can put purchases without awaiting.
    private let subscriptions = Mutex<[String: JSONValue]>([:])
    /// productId → token → `ProductPurchase`.
    private var products: [String: [String: JSONValue]] = [:]
    private var voided: [VoidedItem] = []
    private var cursors: [String: PageCursor] = [:]
    private var failures: [Route: [Failure]] = [:]
    private var delays: [Route: Duration] = [:]
    private var received: [Route: [Received]] = [:]
    private var acknowledgements: [String: Int] = [:]
    private var playAPIInFlight = 0
    /// The most Play API requests held at once.
    public private(set) var highestPlayAPIConcurrency = 0

    public init(serviceAccount: FakeServiceAccount, identity: FakeGoogleIdentity? = nil, packageName: String = GooglePlaySamples.packageName) {
        self.serviceAccount = serviceAccount
        self.identity = identity
        self.packageName = packageName
    }

    // MARK: What a test sets

    public func setBaseURL(_ url: String) { baseURL = url }
    public func setAccessTokenLifetime(_ seconds: Int) { accessTokenLifetime = seconds }
    /// Every issued token stops working, as when Google revokes them.
    public func revokeAccessTokens() { accessTokens.removeAll() }
    public nonisolated func putSubscription(_ json: JSONValue, token: String) { subscriptions.withLock { $0[token] = json } }
    public func putProduct(_ json: JSONValue, productID: String, token: String) { products[productID, default: [:]][token] = json }
    /// A voided purchase (or any item, a malformed one too) at the end of the list.
    public func addVoided(_ json: JSONValue, isSubscription: Bool = false) { voided.append(VoidedItem(json: json, isSubscription: isSubscription)) }
    /// The next `count` requests of `route` are answered `status` (with `Retry-After`).
    public func failNext(_ route: Route, _ count: Int = 1, status: Int, retryAfter: String? = nil) {
        failures[route, default: []] += Array(repeating: Failure(status: status, retryAfter: retryAfter), count: count)
    }

    public func setDelay(_ route: Route, _ delay: Duration) { delays[route] = delay }

    // MARK: What a test reads

    public func calls(_ route: Route) -> [Received] { received[route] ?? [] }
    public func callCount(_ route: Route) -> Int { received[route]?.count ?? 0 }
    public nonisolated func subscription(token: String) -> JSONValue? { subscriptions.withLock { $0[token] } }
    public func product(productID: String, token: String) -> JSONValue? { products[productID]?[token] }
    /// Successful acknowledgements of `token`.
    public func acknowledgementCount(token: String) -> Int { acknowledgements[token] ?? 0 }

    // MARK: Answering

    public struct Answer: Sendable {
        public var status: Int
        public var body: Data
        public var headers: [String: String] = [:]
    }

    /// Answers one request; `rawPath` without its query.
    public func answer(method: String, rawPath: String, query: [String: String], body: Data, contentType: String?,
                authorization: String?) async -> Answer {
        guard let (route, parameters) = Self.route(method: method, rawPath: rawPath) else {
            return Self.googleError(404, "NOT_FOUND", "The requested URL \(rawPath) was not found on this server.", reason: "notFound")
        }
        received[route, default: []].append(Received(route: route, method: method, rawPath: rawPath, parameters: parameters,
                                                      query: query, body: body, contentType: contentType,
                                                      authorization: authorization, at: Date()))
        if route.isPlayAPI {
            playAPIInFlight += 1
            highestPlayAPIConcurrency = max(highestPlayAPIConcurrency, playAPIInFlight)
        }
        defer { if route.isPlayAPI { playAPIInFlight -= 1 } }
        if let delay = delays[route] { try? await Task.sleep(for: delay) }
        if var pending = failures[route], !pending.isEmpty {
            let failure = pending.removeFirst()
            failures[route] = pending
            var answer = Self.failure(failure.status)
            if let retryAfter = failure.retryAfter { answer.headers["Retry-After"] = retryAfter }
            return answer
        }
        switch route {
        case .token: return token(form: String(decoding: body, as: UTF8.self), contentType: contentType)
        case .certs:
            guard let identity else { return Self.googleError(404, "NOT_FOUND", "No keys.", reason: "notFound") }
            return Answer(status: 200, body: identity.jwks(), headers: ["Cache-Control": "public, max-age=21600, must-revalidate, no-transform"])
        default: break
        }
        if let refusal = authorize(authorization) { return refusal }
        guard parameters["packageName"] == packageName else {
            return Self.googleError(404, "NOT_FOUND", "No application was found for the given package name.", reason: "applicationNotFound")
        }
        return playAPI(route, parameters, query: query, body: body)
    }

    private func token(form: String, contentType: String?) -> Answer {
        guard contentType?.lowercased().hasPrefix("application/x-www-form-urlencoded") == true else {
            return Answer(status: 400, body: Self.json(["error": .string("invalid_request"),
                                                        "error_description": .string("Content-Type must be application/x-www-form-urlencoded")]))
        }
        do {
            _ = try serviceAccount.verifyTokenRequest(formBody: form, expectedAudience: tokenURI)
        } catch {
            return Answer(status: 400, body: error.answer)
        }
        var random = SystemRandomNumberGenerator()
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        let token = "ya29.c." + String((0..<96).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] })
        accessTokens[token] = Date() + TimeInterval(accessTokenLifetime)
        issuedTokens += 1
        return Answer(status: 200, body: FakeServiceAccount.tokenAnswer(accessToken: token, expiresIn: accessTokenLifetime))
    }

    /// Nil when `authorization` carries a live token; Google's 401 otherwise.
    private func authorize(_ authorization: String?) -> Answer? {
        let prefix = "Bearer "
        if let authorization, authorization.hasPrefix(prefix), let expiry = accessTokens[String(authorization.dropFirst(prefix.count))],
           Date() < expiry {
            return nil
        }
        var answer = Self.googleError(401, "UNAUTHENTICATED",
                                      "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.",
                                      reason: "authError")
        answer.headers["WWW-Authenticate"] = #"Bearer realm="https://accounts.google.com/", error="invalid_token""#
        return answer
    }

    private func playAPI(_ route: Route, _ parameters: [String: String], query: [String: String], body: Data) -> Answer {
        let token = parameters["token"] ?? ""
        switch route {
        case .subscriptionsV2Get:
            guard let purchase = subscription(token: token) else { return Self.purchaseNotFound }
            return Answer(status: 200, body: CanonicalJSON.encode(purchase))
        case .productsGet:
            guard let purchase = products[parameters["productId"] ?? ""]?[token] else { return Self.purchaseNotFound }
            return Answer(status: 200, body: CanonicalJSON.encode(purchase))
        case .subscriptionsAcknowledge:
            if let refusal = Self.acknowledgeRequestRefusal(body) { return refusal }
            let refusal = subscriptions.withLock { stored -> Answer? in
                guard case .object(var fields)? = stored[token], Self.lineItemProducts(fields).contains(parameters["subscriptionId"] ?? "")
                else { return Self.purchaseNotFound }
                if fields["subscriptionState"] == .string("SUBSCRIPTION_STATE_PENDING") { return Self.invalidPurchaseState }
                fields["acknowledgementState"] = .string("ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED")
                stored[token] = .object(fields)
                return nil
            }
            if let refusal { return refusal }
            acknowledgements[token, default: 0] += 1
            return Answer(status: 200, body: Data())
        case .productsAcknowledge:
            if let refusal = Self.acknowledgeRequestRefusal(body) { return refusal }
            let productID = parameters["productId"] ?? ""
            guard case .object(var fields)? = products[productID]?[token] else { return Self.purchaseNotFound }
            if fields["purchaseState"] == .integer(2) { return Self.invalidPurchaseState }
            fields["acknowledgementState"] = .integer(1)
            products[productID]?[token] = .object(fields)
            acknowledgements[token, default: 0] += 1
            return Answer(status: 200, body: Data())
        case .voidedPurchasesList:
            return voidedPage(query)
        case .token, .certs:
            return Self.purchaseNotFound
        }
    }

    private func voidedPage(_ query: [String: String]) -> Answer {
        // The reference names them `pageSelection.*`; the discovery document and client libraries send them bare.
        let maxText = query["maxResults"] ?? query["pageSelection.maxResults"]
        let pageToken = query["token"] ?? query["pageSelection.token"]
        guard let maxResults = Int(maxText ?? "1000"), (1...1000).contains(maxResults) else {
            return Self.googleError(400, "INVALID_ARGUMENT", "maxResults must be between 1 and 1000.", reason: "invalid")
        }
        let cursor: PageCursor
        if let pageToken {
            guard let stored = cursors[pageToken] else {
                return Self.googleError(400, "INVALID_ARGUMENT", "Invalid pagination token.", reason: "invalid")
            }
            cursor = stored
        } else {
            let now = Date()
            var startTime = now - Self.voidedRetention
            if let text = query["startTime"] {
                guard let millis = Int64(text) else { return Self.googleError(400, "INVALID_ARGUMENT", "Invalid value for startTime.", reason: "invalid") }
                startTime = Date(timeIntervalSince1970: Double(millis) / 1000)
                guard startTime >= now - Self.voidedRetention - 60 else {
                    return Self.googleError(400, "INVALID_ARGUMENT", "startTime cannot be older than 30 days.", reason: "invalid")
                }
            }
            guard let type = Int(query["type"] ?? "0"), type == 0 || type == 1 else {
                return Self.googleError(400, "INVALID_ARGUMENT", "Invalid value for type.", reason: "invalid")
            }
            cursor = PageCursor(offset: 0, type: type, startTime: startTime)
        }
        let matching = voided.filter { item in
            guard cursor.type == 1 || !item.isSubscription else { return false }
            guard case .object(let fields) = item.json, case .string(let millis)? = fields["voidedTimeMillis"], let value = Double(millis)
            else { return true }  // a malformed item is listed as it is
            return Date(timeIntervalSince1970: value / 1000) >= cursor.startTime
        }
        let page = Array(matching.dropFirst(cursor.offset).prefix(maxResults))
        var next: String?
        if cursor.offset + page.count < matching.count {
            let token = UUID().uuidString
            cursors[token] = PageCursor(offset: cursor.offset + page.count, type: cursor.type, startTime: cursor.startTime)
            next = token
        }
        return Answer(status: 200, body: CanonicalJSON.encode(GooglePlaySamples.voidedPurchasesPage(page.map(\.json), nextPageToken: next)))
    }
}
