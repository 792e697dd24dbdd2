import AppStore
import AppStoreTesting
@preconcurrency import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import Ledger
import NIOCore
import SubledgerApp
import SubledgerAppTesting
import Testing

/// The App Store Server API routes the fake serves.
enum APIRoute: String, CaseIterable, Sendable {
    case notificationHistory, transactionHistory, subscriptionStatuses, lookUpOrder, requestTestNotification, testNotificationStatus

    var method: HTTPRequest.Method {
        self == .notificationHistory || self == .requestTestNotification ? .post : .get
    }

    var path: String {
        switch self {
        case .notificationHistory: "inApps/v1/notifications/history"
        case .transactionHistory: "inApps/v2/history/:id"
        case .subscriptionStatuses: "inApps/v1/subscriptions/:id"
        case .lookUpOrder: "inApps/v1/lookup/:id"
        case .requestTestNotification: "inApps/v1/notifications/test"
        case .testNotificationStatus: "inApps/v1/notifications/test/:id"
        }
    }
}

/// A stand-in for Apple's App Store Server API on loopback, under
/// `/production` and `/sandbox`: each route answers from its script in turn
/// (the last answer repeats; none: Apple's 404), remembers what it was sent,
/// and may run a hook before answering (to make something happen "during" a call).
actor FakeAppStoreServerAPI {
    struct Answer: Sendable {
        var status = 200
        var headers: [String: String] = [:]
        var body: String
    }

    struct Received: Sendable {
        var environment: String
        /// The path parameter (transaction id, order id, token).
        var id: String?
        var query: String
        var paginationToken: String?
        var authorization: String?
        var body: Data
        var at: Date
    }

    private var scripts: [String: [Answer]] = [:]
    private var received: [String: [Received]] = [:]
    private var hooks: [String: [@Sendable () async throws -> Void]] = [:]

    private static func key(_ route: APIRoute, _ environment: String) -> String { "\(environment) \(route.rawValue)" }

    func script(_ route: APIRoute, environment: String = "production", _ answers: [Answer]) {
        scripts[Self.key(route, environment)] = answers
    }

    /// Runs `hook` before answering the next call of `route`.
    func beforeNext(_ route: APIRoute, environment: String = "production", _ hook: @escaping @Sendable () async throws -> Void) {
        hooks[Self.key(route, environment), default: []].append(hook)
    }

    func calls(_ route: APIRoute, environment: String = "production") -> [Received] {
        received[Self.key(route, environment)] ?? []
    }

    func answer(_ route: APIRoute, environment: String, _ request: Received) async -> Answer {
        let key = Self.key(route, environment)
        received[key, default: []].append(request)
        if var pending = hooks[key], !pending.isEmpty {
            let hook = pending.removeFirst()
            hooks[key] = pending
            do { try await hook() } catch { Issue.record(error, "a hook before answering \(key) failed") }
        }
        guard var script = scripts[key], !script.isEmpty else {
            return Answer(status: 404, body: #"{"errorCode": 4040010, "errorMessage": "Transaction id not found."}"#)
        }
        let next = script.count > 1 ? script.removeFirst() : script[0]
        scripts[key] = script
        return next
    }

    /// Serves the fake on a free port for the duration of `body`.
    nonisolated func serve(_ body: @escaping @Sendable (_ baseURL: String) async throws -> Void) async throws {
        let router = Router(context: BasicRequestContext.self)
        for environment in ["production", "sandbox"] {
            for route in APIRoute.allCases {
                let path = RouterPath("\(environment)/\(route.path)")
                router.on(path, method: route.method) { @Sendable (request: Request, context: BasicRequestContext) async throws -> Response in
                    try await self.respond(route, environment: environment, request: request, context: context)
                }
            }
        }
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        try await app.test(.live) { client in try await body("http://127.0.0.1:\(client.port!)") }
    }

    private nonisolated func respond(_ route: APIRoute, environment: String, request: Request,
                                     context: BasicRequestContext) async throws -> Response {
        let buffer = try await request.body.collect(upTo: 1 << 20)
        let token: String? = request.uri.queryParameters.get("paginationToken").map { String($0) }
        let received = Received(environment: environment, id: context.parameters.get("id"), query: request.uri.query ?? "",
                                paginationToken: token, authorization: request.headers[.authorization],
                                body: Data(buffer.readableBytesView), at: Date())
        let answer = await self.answer(route, environment: environment, received)
        var headers: HTTPFields = [.contentType: "application/json"]
        if let retryAfter = answer.headers["Retry-After"] { headers[.retryAfter] = retryAfter }
        return Response(status: HTTPResponse.Status(code: answer.status), headers: headers,
                        body: ResponseBody(byteBuffer: ByteBuffer(string: answer.body)))
    }

    // MARK: Answers as Apple shapes them

    static func json(_ object: [String: Any]) -> Answer {
        Answer(body: String(decoding: try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self))
    }

    static func history(_ signedPayloads: [String], next token: String? = nil) -> Answer {
        var object: [String: Any] = ["notificationHistory": signedPayloads.map { ["signedPayload": $0, "sendAttempts": []] },
                                     "hasMore": token != nil]
        if let token { object["paginationToken"] = token }
        return json(object)
    }

    static func transactions(_ signed: [String], revision: String = "r1", hasMore: Bool = false) -> Answer {
        json(["signedTransactions": signed, "revision": revision, "hasMore": hasMore, "bundleId": TestAppStore.bundleID,
              "environment": "Production"])
    }

    static func rateLimited(retryAt: Date) -> Answer {
        Answer(status: 429, headers: ["Retry-After": "\(Int64(retryAt.timeIntervalSince1970 * 1000))"],
               body: #"{"errorCode": 4290000, "errorMessage": "Rate limit exceeded."}"#)
    }
}

/// What an App Store Server API test works with: the fake, the router, the
/// integration built from the same dependencies, the key the JWT is signed with.
struct AppStoreAPIApp: Sendable {
    let fake: FakeAppStoreServerAPI
    let app: AppStoreApp
    let appStore: AppStoreIntegration
    /// The public half of the `.p8` key (raw: `P256.Signing.PublicKey` is not `Sendable`).
    let keyRepresentation: Data
    let baseURL: String
    var key: P256.Signing.PublicKey { try! P256.Signing.PublicKey(rawRepresentation: keyRepresentation) }
    var client: any TestClientProtocol { app.client }
    var dependencies: AppDependencies { app.dependencies }
    var store: TestAppStore { app.store }

    static let keyID = "ABCDEF1234"
    static let issuerID = "57246542-96fe-1a63-e053-0824d011072a"
}

/// Runs `body` with the App Store Server API pointed at a fake on loopback,
/// notifications verified with the test chain, retries and pacing shortened.
func withAppStoreAPI(configure: @escaping @Sendable (inout SubledgerConfiguration) -> Void = { _ in },
                     _ body: @escaping @Sendable (AppStoreAPIApp) async throws -> Void) async throws {
    let fake = FakeAppStoreServerAPI()
    try await fake.serve { baseURL in
        var dependencies = try await makeDependencies()
        dependencies.appStoreVerifier = AppStoreNotificationTests.verifier
        let key = P256.Signing.PrivateKey()
        let publicKey = key.publicKey.rawRepresentation
        let keyFile = FileManager.default.temporaryDirectory.appendingPathComponent("AuthKey_\(UUID().uuidString).p8")
        try Data(key.pemRepresentation.utf8).write(to: keyFile)
        defer { try? FileManager.default.removeItem(at: keyFile) }
        dependencies.configuration.appStoreBundleID = TestAppStore.bundleID
        dependencies.configuration.appStoreKeyFile = keyFile.path
        dependencies.configuration.appStoreKeyID = AppStoreAPIApp.keyID
        dependencies.configuration.appStoreIssuerID = AppStoreAPIApp.issuerID
        dependencies.configuration.appStoreAPIURL = baseURL + "/production"
        dependencies.configuration.appStoreAPISandboxURL = baseURL + "/sandbox"
        var settings = AppStoreAPISettings()
        settings.rateFraction = 1000
        settings.retryDelays = [.milliseconds(1), .milliseconds(2), .milliseconds(4)]
        settings.requestTimeout = .seconds(5)
        settings.maximumRateLimitWait = .seconds(5)
        dependencies.configuration.appStoreAPISettings = settings
        configure(&dependencies.configuration)
        let ready = dependencies
        let appStore = AppStoreIntegration(ready)
        try await withRouter(ready) { client in
            try await body(AppStoreAPIApp(fake: fake, app: AppStoreApp(client: client, dependencies: ready), appStore: appStore,
                                          keyRepresentation: publicKey, baseURL: baseURL))
        }
    }
}

/// A production transaction as Apple signs it, owned by `subscriber` through `appAccountToken`.
func productionTransaction(_ id: String, original: String? = nil, product: String = "com.example.pro.monthly",
                           purchase: String = "2025-03-01T11:59:00Z", expires: String? = "2025-04-01T11:59:00Z",
                           subscriber: String? = TestAppStore.subscriberID) -> TransactionInfo {
    var transaction = TestAppStore.subscription(transactionID: id, originalTransactionID: original ?? id, productID: product,
                                                purchaseDate: TestAppStore.date(purchase),
                                                expiresDate: TestAppStore.date(expires ?? "2025-04-01T11:59:00Z"))
    if expires == nil { transaction.expiresDate = nil; transaction.type = .nonConsumable }
    transaction.appAccountToken = subscriber
    transaction.environment = .production
    return transaction
}
