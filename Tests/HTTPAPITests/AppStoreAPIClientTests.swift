import AppStore
import AppStoreTesting
@preconcurrency import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import Ledger
import SubledgerApp
import SubledgerAppTesting
import Testing

/// The App Store Server API client against the fake: its JWT, pacing,
/// retries, rate limits, and verification of every signed answer.
struct AppStoreAPIClientTests {
    /// Look Up Order ID, the simplest call, made with the client itself.
    static func lookUp(_ api: AppStoreAPIApp) async throws -> [TransactionInfo]? {
        try await api.appStore.requireAPI().lookUpOrder(orderID: "MK5TTTVWJH", environment: .production)
    }

    static func failure(_ api: AppStoreAPIApp) async -> AppStoreAPIError? {
        do {
            _ = try await lookUp(api)
            return nil
        } catch {
            return error as? AppStoreAPIError
        }
    }

    static func answer(_ signed: [String], status: Int = 0) -> FakeAppStoreServerAPI.Answer {
        FakeAppStoreServerAPI.json(["status": status, "signedTransactions": signed])
    }

    @Test func theJWTIsSignedES256WithTheKeyAndNamesTheApp() async throws {
        try await withAppStoreAPI { api in
            await api.fake.script(.lookUpOrder, [Self.answer([try api.store.sign(productionTransaction("7000000000000001"))])])
            let before = Date()
            _ = try await Self.lookUp(api)
            _ = try await Self.lookUp(api)
            let calls = await api.fake.calls(.lookUpOrder)
            #expect(calls.count == 2)
            #expect(calls[0].id == "MK5TTTVWJH")
            let authorization = try #require(calls[0].authorization)
            #expect(authorization.hasPrefix("Bearer "))
            let token = String(authorization.dropFirst("Bearer ".count))
            // Cached: the second call carries the same token.
            #expect(calls[1].authorization == authorization)

            let parts = token.split(separator: ".", omittingEmptySubsequences: false)
            try #require(parts.count == 3)
            let signature = try P256.Signing.ECDSASignature(rawRepresentation: TestAppStore.decodeBase64URL(parts[2]))
            #expect(api.key.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8)))
            let header = try #require(try JSONSerialization.jsonObject(with: TestAppStore.decodeBase64URL(parts[0])) as? [String: Any])
            #expect(header["alg"] as? String == "ES256")
            #expect(header["kid"] as? String == AppStoreAPIApp.keyID)
            #expect(header["typ"] as? String == "JWT")
            let claims = try JSONDecoder().decode(AppStoreAPICredentials.Claims.self, from: TestAppStore.decodeBase64URL(parts[1]))
            #expect(claims.iss == AppStoreAPIApp.issuerID)
            #expect(claims.aud == "appstoreconnect-v1")
            #expect(claims.bid == TestAppStore.bundleID)
            #expect(abs(Double(claims.iat) - before.timeIntervalSince1970) < 5)
            #expect(claims.exp > claims.iat && claims.exp - claims.iat <= 3600)
            // A token signed by another key does not verify.
            #expect(!P256.Signing.PrivateKey().publicKey.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8)))
        }
    }

    @Test func aRateLimitedCallWaitsForRetryAfter() async throws {
        try await withAppStoreAPI { api in
            let retryAt = Date().addingTimeInterval(0.4)
            await api.fake.script(.lookUpOrder, [FakeAppStoreServerAPI.rateLimited(retryAt: retryAt),
                                                 Self.answer([try api.store.sign(productionTransaction("7000000000000001"))])])
            #expect(try await Self.lookUp(api)?.count == 1)
            let calls = await api.fake.calls(.lookUpOrder)
            #expect(calls.count == 2)
            // Retry-After is Apple's UNIX time in milliseconds; the retry came no sooner.
            #expect(calls[1].at.timeIntervalSince(retryAt) > -0.01, "retried \(calls[1].at.timeIntervalSince(retryAt)) s after Retry-After")
        }
    }

    @Test func aRateLimitBeyondTheWaitIsReportedWithItsTime() async throws {
        try await withAppStoreAPI { api in
            await api.fake.script(.lookUpOrder, [FakeAppStoreServerAPI.rateLimited(retryAt: Date().addingTimeInterval(3600))])
            let error = await Self.failure(api)
            guard case .rateLimited(let retryAt)? = error?.kind else { Issue.record("\(String(describing: error))"); return }
            #expect(retryAt > Date().addingTimeInterval(3000))
            #expect(error?.serviceError.kind == .upstreamUnavailable)
            #expect(await api.fake.calls(.lookUpOrder).count == 1)
        }
    }

    @Test func serverErrorsAreRetriedWithBackoff() async throws {
        try await withAppStoreAPI { api in
            await api.fake.script(.lookUpOrder, [
                FakeAppStoreServerAPI.Answer(status: 500, body: #"{"errorCode": 5000000, "errorMessage": "An unknown error occurred."}"#),
                FakeAppStoreServerAPI.Answer(status: 503, body: "unavailable"),
                Self.answer([try api.store.sign(productionTransaction("7000000000000001"))]),
            ])
            #expect(try await Self.lookUp(api)?.count == 1)
            #expect(await api.fake.calls(.lookUpOrder).count == 3)

            // Beyond the retries: unavailable, after the first try and three retries.
            await api.fake.script(.lookUpOrder, [FakeAppStoreServerAPI.Answer(status: 502, body: "bad gateway")])
            #expect(await Self.failure(api)?.kind == .unavailable)
            #expect(await api.fake.calls(.lookUpOrder).count == 3 + 4)

            // Apple's retryable errors are retried too; the others are not.
            await api.fake.script(.lookUpOrder, [
                FakeAppStoreServerAPI.Answer(status: 404, body: #"{"errorCode": 4040004, "errorMessage": "App not found. Please try again."}"#),
                Self.answer([try api.store.sign(productionTransaction("7000000000000001"))]),
            ])
            #expect(try await Self.lookUp(api)?.count == 1)
            await api.fake.script(.lookUpOrder, [FakeAppStoreServerAPI.Answer(status: 400, body: #"{"errorCode": 4000006, "errorMessage": "Invalid transaction id."}"#)])
            let refused = await Self.failure(api)
            #expect(refused?.kind == .rejected)
            #expect(refused?.appleErrorCode == 4000006)
            #expect(await api.fake.calls(.lookUpOrder).count == 3 + 4 + 2 + 1)
        }
    }

    @Test func unauthorizedIsAConfigurationError() async throws {
        try await withAppStoreAPI { api in
            await api.fake.script(.lookUpOrder, [FakeAppStoreServerAPI.Answer(status: 401, body: "Unauthenticated")])
            let error = await Self.failure(api)
            #expect(error?.kind == .unauthorized)
            #expect(error?.description.contains("SUBLEDGER_APPSTORE_KEY_ID") == true)
            #expect(error?.serviceError.kind == .notConfigured)
            #expect(await api.fake.calls(.lookUpOrder).count == 1)
        }
    }

    @Test func aForgedAnswerIsRefused() async throws {
        try await withAppStoreAPI { api in
            let forged = try AppStoreNotificationTests.stranger.sign(productionTransaction("7000000000000001"))
            await api.fake.script(.lookUpOrder, [Self.answer([forged])])
            guard case .unverifiedAnswer(let cause)? = await Self.failure(api)?.kind else { Issue.record("not refused"); return }
            #expect(cause.code == .untrustedRoot)
            #expect(cause.field == "signedTransactions[0]")

            // A sandbox transaction in a production answer is refused too.
            var sandbox = productionTransaction("7000000000000001")
            sandbox.environment = .sandbox
            await api.fake.script(.lookUpOrder, [Self.answer([try api.store.sign(sandbox)])])
            guard case .unverifiedAnswer? = await Self.failure(api)?.kind else { Issue.record("not refused"); return }
        }
    }

    @Test func theClientPacesItselfBelowApplesRates() async throws {
        for endpoint in AppStoreAPIEndpoint.allCases {
            for environment in Ledger.Environment.allCases {
                #expect(AppStoreAPISettings().rate(endpoint, in: environment) < endpoint.publishedRate(in: environment))
            }
        }
        #expect(AppStoreAPIEndpoint.lookUpOrder.publishedRate(in: .sandbox) == 1)
        // Look Up Order ID at 10/s × 2 = 20/s here: five calls span at least four 50 ms gaps.
        try await withAppStoreAPI(configure: { $0.appStoreAPISettings.rateFraction = 2 }) { api in
            await api.fake.script(.lookUpOrder, [Self.answer([try api.store.sign(productionTransaction("7000000000000001"))])])
            let started = ContinuousClock.now
            for _ in 0..<5 { _ = try await Self.lookUp(api) }
            #expect(ContinuousClock.now - started >= .milliseconds(195))
        }
    }

    @Test func retryAfterIsReadInApplesAndHTTPsForms() {
        let now = Date(timeIntervalSince1970: 1_750_000_000)
        #expect(AppStoreAPIClient.retryAfterDate("1750000005000", now: now) == Date(timeIntervalSince1970: 1_750_000_005))
        #expect(AppStoreAPIClient.retryAfterDate("30", now: now) == now.addingTimeInterval(30))
        #expect(AppStoreAPIClient.retryAfterDate("Sun, 15 Jun 2025 15:06:40 GMT", now: now) == Date(timeIntervalSince1970: 1_750_000_000))
        #expect(AppStoreAPIClient.retryAfterDate("soon", now: now) == nil)
    }
}
