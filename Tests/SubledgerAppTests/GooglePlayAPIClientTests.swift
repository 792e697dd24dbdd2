import Foundation
import GooglePlay
import GooglePlayTesting
import JSON
import Ledger
import SubledgerApp
import SubledgerAppTesting
import Testing

/// The Google Play Developer API client against the fake Google: its access
/// token, each endpoint's request, retries, quota and concurrency.
/// https://developers.google.com/identity/protocols/oauth2/service-account
/// https://developers.google.com/android-publisher/api-ref/rest
@Suite struct GooglePlayAPIClientTests {
    static let token = GooglePlaySamples.purchaseToken(1)

    static func putSubscription(_ api: GooglePlayAPITest, token: String = token, state: GooglePlayPurchase.State = .active,
                                acknowledgement: String = "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED") async {
        api.fake.putSubscription(GooglePlaySamples.subscriptionPurchaseV2(state: state, acknowledgementState: acknowledgement),
                                       token: token)
    }

    static func fetch(_ client: GooglePlayAPIClient, token: String = token) async throws(GooglePlayAPIError) {
        _ = try await client.fetchSubscription(token: token, observedAt: Date())
    }

    // MARK: The access token
    // https://developers.google.com/identity/protocols/oauth2/service-account#authorizingrequests

    @Test func theTokenIsExchangedOnceAndReusedByEveryCall() async throws {
        try await withGooglePlayAPI { api in
            await Self.putSubscription(api)
            // A burst before any token: one exchange, which every caller joins.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<12 { group.addTask { try await Self.fetch(api.client) } }
                try await group.waitForAll()
            }
            for _ in 0..<8 { try await Self.fetch(api.client) }
            #expect(await api.fake.callCount(.token) == 1)
            let calls = await api.fake.calls(.subscriptionsV2Get)
            #expect(calls.count == 20)
            #expect(Set(calls.map(\.authorization)).count == 1)
            #expect(calls[0].authorization?.hasPrefix("Bearer ya29.") == true)

            // The exchange: a form POSTed to the key's token_uri, with the JWT-bearer grant and an assertion
            // for the androidpublisher scope whose audience is that token_uri.
            let exchange = try #require(await api.fake.calls(.token).first)
            #expect(exchange.method == "POST")
            #expect(exchange.contentType == "application/x-www-form-urlencoded")
            let form = String(decoding: exchange.body, as: UTF8.self)
            #expect(form.hasPrefix("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion="))
            let claims = try GooglePlayAPITest.account.verifyTokenRequest(formBody: form, expectedAudience: await api.fake.tokenURI)
            #expect(claims.scope == ServiceAccountKey.androidPublisherScope)
            #expect(claims.issuer == GooglePlayAPITest.account.clientEmail)
            #expect(claims.expiresAt.timeIntervalSince(claims.issuedAt) <= 3600)
        }
    }

    @Test func theTokenIsRenewedWhenItNearsItsEnd() async throws {
        var settings = GooglePlayAPITest.settings
        settings.tokenRenewalMargin = .seconds(2)
        try await withGooglePlayAPI(settings: settings) { api in
            await Self.putSubscription(api)
            await api.fake.setAccessTokenLifetime(4)
            try await Self.fetch(api.client)
            try await Self.fetch(api.client)
            #expect(await api.fake.callCount(.token) == 1)
            // Two seconds before its end (half its life, for so short a token) it is replaced.
            try await Task.sleep(for: .milliseconds(2100))
            try await Self.fetch(api.client)
            #expect(await api.fake.callCount(.token) == 2)
            let calls = await api.fake.calls(.subscriptionsV2Get)
            #expect(calls[2].authorization != calls[0].authorization)
        }
    }

    @Test func aRefusedTokenIsRenewedOnceThenTheAccountIsUnauthorized() async throws {
        try await withGooglePlayAPI { api in
            await Self.putSubscription(api)
            try await Self.fetch(api.client)
            // Google no longer takes the token (revoked): the call renews it and goes through.
            await api.fake.revokeAccessTokens()
            try await Self.fetch(api.client)
            #expect(await api.fake.callCount(.token) == 2)
            #expect(await api.fake.callCount(.subscriptionsV2Get) == 3)

            // A fresh token refused too: the account is at fault, said once, with what to check.
            await api.fake.failNext(.subscriptionsV2Get, 2, status: 401)
            let error = try #require(await googlePlayFailure { () async throws(GooglePlayAPIError) in try await Self.fetch(api.client) })
            #expect(error.kind == .unauthorized)
            #expect(error.status == 401)
            #expect(error.description.contains("SUBLEDGER_GOOGLEPLAY_SERVICE_ACCOUNT_FILE"))
            #expect(error.description.contains("SUBLEDGER_GOOGLEPLAY_PACKAGE_NAME"))
            #expect(error.serviceError.kind == .notConfigured)
            #expect(error.code == .googlePlayAPIUnauthorized)
            #expect(await api.fake.callCount(.token) == 3)
            #expect(await api.fake.callCount(.subscriptionsV2Get) == 5)
            // Neither the access token nor the purchase token is in what an operator reads.
            let sent = try #require(await api.fake.calls(.subscriptionsV2Get).last?.authorization)
            #expect(!error.description.contains(String(sent.dropFirst("Bearer ".count))))
            #expect(!error.description.contains(Self.token))
        }
    }

    @Test func aPermissionRefusalIsUnauthorizedWithoutAnotherToken() async throws {
        try await withGooglePlayAPI { api in
            await Self.putSubscription(api)
            await api.fake.failNext(.subscriptionsV2Get, status: 403)
            let error = await googlePlayFailure { () async throws(GooglePlayAPIError) in try await Self.fetch(api.client) }
            #expect(error?.kind == .unauthorized)
            #expect(error?.reason == "permissionDenied")
            #expect(error?.description.contains("Play Console") == true)
            #expect(await api.fake.callCount(.token) == 1)
            #expect(await api.fake.callCount(.subscriptionsV2Get) == 1)
        }
    }

    @Test func aKeyGoogleDoesNotKnowIsRefusedAtTheTokenEndpoint() async throws {
        try await withGooglePlayAPI { api in
            await Self.putSubscription(api)
            let strangerKey = try ServiceAccountKey(json: GooglePlayAPITest.stranger.json(tokenURI: await api.fake.tokenURI))
            let client = await api.client(key: strangerKey)
            let error = try #require(await googlePlayFailure { () async throws(GooglePlayAPIError) in try await Self.fetch(client) })
            #expect(error.kind == .unauthorized)
            #expect(error.endpoint == .token)
            #expect(error.status == 400)
            #expect(error.reason == "invalid_grant")
            #expect(error.message.contains("Invalid JWT Signature"))
            #expect(error.description.contains("SUBLEDGER_GOOGLEPLAY_SERVICE_ACCOUNT_FILE"))
            #expect(!error.description.contains("PRIVATE KEY"))
            // Refused before the Play API is asked anything, and not retried.
            #expect(await api.fake.callCount(.token) == 1)
            #expect(await api.fake.callCount(.subscriptionsV2Get) == 0)
        }
    }

    @Test func aPassingFailureOfTheTokenEndpointIsRetried() async throws {
        try await withGooglePlayAPI { api in
            await Self.putSubscription(api)
            await api.fake.failNext(.token, status: 503)
            try await Self.fetch(api.client)
            #expect(await api.fake.callCount(.token) == 2)
            #expect(await api.fake.callCount(.subscriptionsV2Get) == 1)
        }
    }

    // MARK: Retries, quota, concurrency
    // https://developers.google.com/android-publisher/quotas

    @Test func serverErrorsAreRetriedThenUnavailable() async throws {
        try await withGooglePlayAPI { api in
            await Self.putSubscription(api)
            await api.fake.failNext(.subscriptionsV2Get, status: 500)
            try await Self.fetch(api.client)
            #expect(await api.fake.callCount(.subscriptionsV2Get) == 2)

            await api.fake.failNext(.subscriptionsV2Get, 2, status: 503)
            try await Self.fetch(api.client)
            #expect(await api.fake.callCount(.subscriptionsV2Get) == 2 + 3)

            // Beyond the retries: unavailable (a 503 to Subledger's caller), after the first try and three retries.
            await api.fake.failNext(.subscriptionsV2Get, 10, status: 503)
            let error = await googlePlayFailure { () async throws(GooglePlayAPIError) in try await Self.fetch(api.client) }
            #expect(error?.kind == .unavailable)
            #expect(error?.status == 503)
            #expect(error?.serviceError.kind == .upstreamUnavailable)
            #expect(await api.fake.callCount(.subscriptionsV2Get) == 2 + 3 + 4)
        }
    }

    @Test func aRateLimitIsWaitedOut() async throws {
        try await withGooglePlayAPI { api in
            await api.fake.putProduct(GooglePlaySamples.productPurchase(), productID: "coins_100", token: Self.token)
            await api.fake.failNext(.productsGet, status: 429, retryAfter: "1")
            _ = try await api.client.fetchProduct(productID: "coins_100", token: Self.token, observedAt: Date())
            let calls = await api.fake.calls(.productsGet)
            #expect(calls.count == 2)
            #expect(calls[1].at.timeIntervalSince(calls[0].at) >= 0.95, "retried \(calls[1].at.timeIntervalSince(calls[0].at)) s later")

            // A wait longer than a caller waits is reported with its time, not waited.
            await api.fake.failNext(.productsGet, status: 429, retryAfter: "3600")
            let error = await googlePlayFailure { () async throws(GooglePlayAPIError) in
                _ = try await api.client.product(productID: "coins_100", token: Self.token)
            }
            guard case .rateLimited(let retryAt)? = error?.kind else { Issue.record("\(String(describing: error))"); return }
            #expect(retryAt > Date() + 3000)
            #expect(error?.serviceError.kind == .upstreamUnavailable)
            #expect(await api.fake.callCount(.productsGet) == 3)
        }
    }

    @Test func aBurstIsHeldToTheConcurrencyLimit() async throws {
        var settings = GooglePlayAPITest.settings
        settings.maximumConcurrentRequests = 3
        try await withGooglePlayAPI(settings: settings) { api in
            await Self.putSubscription(api)
            await api.fake.setDelay(.subscriptionsV2Get, .milliseconds(60))
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<15 { group.addTask { try await Self.fetch(api.client) } }
                try await group.waitForAll()
            }
            #expect(await api.fake.callCount(.subscriptionsV2Get) == 15)
            #expect(await api.fake.highestPlayAPIConcurrency == 3)
        }
    }

    @Test func aCallThatWouldWaitTooLongIsRefusedAtOnce() async throws {
        var settings = GooglePlayAPITest.settings
        settings.maximumConcurrentRequests = 1
        settings.maximumQueueWait = .milliseconds(100)
        try await withGooglePlayAPI(settings: settings) { api in
            await Self.putSubscription(api)
            try await Self.fetch(api.client)  // the token first, so the burst queues on the API alone
            await api.fake.setDelay(.subscriptionsV2Get, .milliseconds(600))
            let failures = await withTaskGroup(of: GooglePlayAPIError?.self) { group in
                for _ in 0..<4 {
                    group.addTask { await googlePlayFailure { () async throws(GooglePlayAPIError) in try await Self.fetch(api.client) } }
                }
                return await group.reduce(into: [GooglePlayAPIError?]()) { $0.append($1) }
            }
            let refused = failures.compactMap { $0 }
            #expect(refused.count == 3)
            #expect(refused.allSatisfy { $0.kind == .unavailable && $0.status == nil })
            // The refused never reached Google.
            #expect(await api.fake.callCount(.subscriptionsV2Get) == 2)
        }
    }

    @Test func eachBucketIsPacedAtItsRate() async throws {
        var settings = GooglePlayAPITest.settings
        settings.requestsPerSecond = 20
        #expect(GooglePlayAPISettings().requestsPerSecond < GooglePlayAPISettings.publishedQueriesPerMinute / 60)
        try await withGooglePlayAPI(settings: settings) { api in
            await Self.putSubscription(api)
            // Five calls at 20/s span at least four 50 ms gaps.
            let started = ContinuousClock.now
            for _ in 0..<5 { try await Self.fetch(api.client) }
            #expect(ContinuousClock.now - started >= .milliseconds(195))
        }
    }
}
