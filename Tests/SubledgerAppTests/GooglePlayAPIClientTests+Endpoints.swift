import Foundation
import GooglePlay
import GooglePlayTesting
import JSON
import Ledger
@testable import SubledgerApp
import SubledgerAppTesting
import Testing

/// Each endpoint's method, path, query and body as Google's reference page
/// documents it, and what its answers become.
extension GooglePlayAPIClientTests {
    static let application = "/androidpublisher/v3/applications/com.example.subledger"

    /// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.subscriptionsv2/get
    @Test func subscriptionsV2GetEncodesTheTokenAsOneSegment() async throws {
        try await withGooglePlayAPI { api in
            api.fake.putSubscription(GooglePlaySamples.subscriptionPurchaseV2(acknowledgementState: "ACKNOWLEDGEMENT_STATE_PENDING",
                                                                                    obfuscatedExternalAccountID: "subscriber-42"),
                                           token: PlayTokens.awkward)
            let fetched = try await api.client.fetchSubscription(token: PlayTokens.awkward, observedAt: GooglePlaySamples.eventTime)
            #expect(fetched.purchase.purchaseToken == PlayTokens.awkward)
            #expect(fetched.purchase.productID == GooglePlaySamples.productID)
            #expect(fetched.obfuscatedAccountID == "subscriber-42")
            #expect(fetched.acknowledgementPending)
            let call = try #require(await api.fake.calls(.subscriptionsV2Get).first)
            #expect(call.method == "GET")
            #expect(call.rawPath == Self.application + "/purchases/subscriptionsv2/tokens/" + PlayTokens.encodedAwkward)
            #expect(call.parameters["token"] == PlayTokens.awkward)
            #expect(call.body.isEmpty)
        }
    }

    /// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.products/get
    @Test func productsGetNamesTheProductAndTheToken() async throws {
        try await withGooglePlayAPI { api in
            await api.fake.putProduct(GooglePlaySamples.productPurchase(acknowledgementState: 0), productID: "coins_100",
                                      token: PlayTokens.awkward)
            let fetched = try await api.client.fetchProduct(productID: "coins_100", token: PlayTokens.awkward, observedAt: Date())
            #expect(fetched.purchase.productID == "coins_100")
            #expect(fetched.acknowledgementPending)
            let call = try #require(await api.fake.calls(.productsGet).first)
            #expect(call.method == "GET")
            #expect(call.rawPath == Self.application + "/purchases/products/coins_100/tokens/" + PlayTokens.encodedAwkward)
        }
    }

    /// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.subscriptions/acknowledge
    @Test func acknowledgingASubscriptionPostsAnEmptyRequestToItsVerb() async throws {
        try await withGooglePlayAPI { api in
            await Self.putSubscription(api, token: PlayTokens.awkward, acknowledgement: "ACKNOWLEDGEMENT_STATE_PENDING")
            try await api.client.acknowledgeSubscription(subscriptionID: GooglePlaySamples.productID, token: PlayTokens.awkward)
            let call = try #require(await api.fake.calls(.subscriptionsAcknowledge).first)
            #expect(call.method == "POST")
            #expect(call.rawPath == Self.application + "/purchases/subscriptions/pro_monthly/tokens/" + PlayTokens.encodedAwkward + ":acknowledge")
            #expect(call.body == Data("{}".utf8))
            #expect(call.contentType == "application/json")
            let fetched = try await api.client.fetchSubscription(token: PlayTokens.awkward, observedAt: Date())
            #expect(!fetched.acknowledgementPending)
            #expect(fetched.purchase.acknowledged)
            // Again: harmless, as a retry after a lost answer must be.
            try await api.client.acknowledgeSubscription(subscriptionID: GooglePlaySamples.productID, token: PlayTokens.awkward)
            #expect(await api.fake.acknowledgementCount(token: PlayTokens.awkward) == 2)

            // A purchase whose payment is pending cannot be acknowledged yet.
            await Self.putSubscription(api, token: "pending-token", state: .pending, acknowledgement: "ACKNOWLEDGEMENT_STATE_PENDING")
            let error = await googlePlayFailure { () async throws(GooglePlayAPIError) in
                try await api.client.acknowledgeSubscription(subscriptionID: GooglePlaySamples.productID, token: "pending-token")
            }
            #expect(error?.kind == .rejected)
            #expect(error?.status == 400)
            #expect(error?.reason == "invalidPurchaseState")
            #expect(error?.serviceError.kind == .upstreamUnreachable)
        }
    }

    /// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.products/acknowledge
    @Test func acknowledgingAProductPostsAnEmptyRequestToItsVerb() async throws {
        try await withGooglePlayAPI { api in
            await api.fake.putProduct(GooglePlaySamples.productPurchase(acknowledgementState: 0), productID: "coins_100", token: Self.token)
            try await api.client.acknowledgeProduct(productID: "coins_100", token: Self.token)
            let call = try #require(await api.fake.calls(.productsAcknowledge).first)
            #expect(call.method == "POST")
            #expect(call.rawPath == Self.application + "/purchases/products/coins_100/tokens/\(Self.token):acknowledge")
            #expect(call.body == Data("{}".utf8))
            guard case .object(let fields)? = await api.fake.product(productID: "coins_100", token: Self.token) else {
                Issue.record("the product is gone")
                return
            }
            #expect(fields["acknowledgementState"] == .integer(1))
            #expect(await api.fake.callCount(.token) == 1)
        }
    }

    @Test func anUnknownTokenOrPackageIsNotFound() async throws {
        try await withGooglePlayAPI { api in
            let error = await googlePlayFailure { () async throws(GooglePlayAPIError) in try await Self.fetch(api.client, token: "unknown-token") }
            #expect(error?.kind == .notFound)
            #expect(error?.status == 404)
            #expect(error?.reason == "notFound")
            #expect(error?.code == .googlePlayAPINotFound)
            #expect(error?.description.contains("unknown-token") == false)
            // Not retried: Google said what it knows.
            #expect(await api.fake.callCount(.subscriptionsV2Get) == 1)

            await Self.putSubscription(api)
            let other = GooglePlayAPIClient(serviceAccount: api.key, packageName: "com.example.other", apiURL: await api.fake.baseURL,
                                            settings: GooglePlayAPITest.settings, logger: GooglePlayAPITest.logger)
            let wrongPackage = await googlePlayFailure { () async throws(GooglePlayAPIError) in try await Self.fetch(other) }
            #expect(wrongPackage?.kind == .notFound)
            #expect(wrongPackage?.reason == "applicationNotFound")
        }
    }

    @Test func anAnswerGoogleDoesNotDocumentIsInvalid() async throws {
        try await withGooglePlayAPI { api in
            api.fake.putSubscription(.object(["kind": .string("androidpublisher#subscriptionPurchaseV2")]), token: Self.token)
            let error = await googlePlayFailure { () async throws(GooglePlayAPIError) in try await Self.fetch(api.client) }
            #expect(error?.kind == .invalidAnswer)
            #expect(error?.message.contains("subscriptionState") == true)
            #expect(error?.serviceError.kind == .upstreamUnreachable)
        }
    }

    /// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.voidedpurchases/list
    /// https://developers.google.com/android-publisher/voided-purchases
    @Test func voidedPurchasesArePagedToTheEnd() async throws {
        try await withGooglePlayAPI { api in
            let now = Date()
            for n in 1...7 {
                await api.fake.addVoided(GooglePlaySamples.voidedPurchase(purchaseToken: GooglePlaySamples.purchaseToken(n), orderID: "GPA.1-\(n)",
                                                                          purchaseTime: now - 86_400, voidedTime: now - 3600),
                                         isSubscription: n % 2 == 0)
            }
            // One item that is not a VoidedPurchase: handed back apart, the rest still read.
            await api.fake.addVoided(.object(["kind": .string("androidpublisher#voidedPurchase"), "voidedTimeMillis": .string("x")]))
            // Voided before the start asked for: not listed.
            await api.fake.addVoided(GooglePlaySamples.voidedPurchase(purchaseToken: "old", purchaseTime: now - 10 * 86_400,
                                                                      voidedTime: now - 5 * 86_400))

            let start = now - 2 * 86_400
            var pages: [VoidedPurchasesPage] = []
            var next: String?
            repeat {
                let page = try await api.client.voidedPage(startTime: start, pageToken: next, maxResults: 3)
                pages.append(page)
                next = page.nextPageToken
            } while next != nil && pages.count < 10
            #expect(pages.map { $0.voids.count + $0.failures.count } == [3, 3, 2])
            #expect(pages.flatMap(\.voids).map(\.purchaseToken) == (1...7).map { GooglePlaySamples.purchaseToken($0) })
            #expect(pages.flatMap(\.failures).map(\.index) == [1])

            let calls = await api.fake.calls(.voidedPurchasesList)
            #expect(calls.count == 3)
            #expect(calls.allSatisfy { $0.method == "GET" && $0.rawPath == Self.application + "/purchases/voidedpurchases" })
            #expect(calls[0].query == ["type": "1", "startTime": String(Int64((start.timeIntervalSince1970 * 1000).rounded(.down))),
                                       "maxResults": "3"])
            #expect(calls[1].query["token"] == pages[0].nextPageToken)
            #expect(calls[2].query["token"] == pages[1].nextPageToken)

            // Google keeps 30 days: an older start is refused as Google refuses it.
            let error = await googlePlayFailure { () async throws(GooglePlayAPIError) in
                _ = try await api.client.voidedPage(startTime: now - 40 * 86_400)
            }
            #expect(error?.kind == .rejected)
            #expect(error?.status == 400)
        }
    }

    @Test func aTokenIsNeverSentUnencoded() {
        #expect(GooglePlayAPIClient.pathSegment("a/b+c=d:e f") == "a%2Fb%2Bc%3Dd%3Ae%20f")
        #expect(GooglePlayAPIClient.pathSegment("Az09-._~") == "Az09-._~")
    }
}
