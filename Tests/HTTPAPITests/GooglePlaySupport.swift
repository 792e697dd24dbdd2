import Foundation
import GooglePlay
import GooglePlayTesting
import HTTPAPI
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JSON
import Ledger
import NIOCore
@testable import SubledgerApp
import SubledgerAppTesting
import Testing

/// The test catalog with Google Play's products beside the App Store's.
let playCatalogJSON = """
{ "version": 4,
  "products": [
    {"id": "com.example.pro.monthly", "type": "auto-renewable", "group": "pro", "entitlements": ["pro"], "reminders": ["P3D"]},
    {"id": "com.example.pass.30d", "type": "non-renewing", "duration": "P30D", "group": "pass", "entitlements": ["pro"]},
    {"id": "com.example.level2", "type": "non-consumable", "entitlements": ["level2"]},
    {"id": "pro_monthly", "store": "google_play", "type": "auto-renewable", "group": "pro", "entitlements": ["pro"], "reminders": ["P3D", "P0D"]},
    {"id": "pro_monthly:yearly", "store": "google_play", "type": "auto-renewable", "group": "pro", "entitlements": ["pro"]},
    {"id": "coins_100", "store": "google_play", "type": "consumable"},
    {"id": "level_pack", "store": "google_play", "type": "non-consumable", "entitlements": ["level2"]}
  ] }
"""

/// Dependencies configured for Google Play: the package of Google's
/// samples, the fake identity's audience and push account, `source` as
/// the Play Developer API and `identity`'s keys as Google's JWKS.
func makePlayDependencies(source: any GooglePlayPurchaseSource, identity: FakeGoogleIdentity,
                          restorePolicy: RestorePolicy = .transfer,
                          configure: (inout SubledgerConfiguration) -> Void = { _ in }) async throws -> AppDependencies {
    var dependencies = try await makeDependencies(restorePolicy: restorePolicy)
    let data = Data(playCatalogJSON.utf8)
    dependencies.catalog = CatalogSource(catalog: try Catalog.decode(from: data), modified: Date(), raw: data)
    dependencies.configuration.googlePlay.packageName = GooglePlaySamples.packageName
    dependencies.configuration.googlePlay.pushAudience = identity.audience
    dependencies.configuration.googlePlay.pushServiceAccount = identity.serviceAccountEmail
    configure(&dependencies.configuration)
    dependencies.googlePlaySource = source
    let jwks = identity.jwks()
    dependencies.googlePlayKeys = { jwks }
    return dependencies
}

/// Runs `body` against the router with Google Play configured.
func withPlayApp(source: any GooglePlayPurchaseSource, identity: FakeGoogleIdentity, restorePolicy: RestorePolicy = .transfer,
                 _ body: @escaping @Sendable (any TestClientProtocol, AppDependencies) async throws -> Void) async throws {
    try await withApp(try await makePlayDependencies(source: source, identity: identity, restorePolicy: restorePolicy), body)
}

extension TestClientProtocol {
    /// POSTs a push body with `authorization` (none when nil).
    func push(_ body: Data, authorization: String?) async throws -> TestResponse {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let authorization { headers[.authorization] = authorization }
        return try await execute(uri: "/v1/googleplay/notifications", method: .post, headers: headers,
                                 body: ByteBuffer(bytes: body))
    }
}

/// A Play Developer API that must not be asked: the pushes these tests send
/// are refused or settled before anything is fetched.
struct UnaskedGooglePlay: GooglePlayPurchaseSource {
    func fetchSubscription(token: String, observedAt: Date) async throws -> FetchedPlayPurchase { throw Asked() }
    func fetchProduct(productID: String, token: String, observedAt: Date) async throws -> FetchedPlayPurchase { throw Asked() }
    func acknowledgeSubscription(subscriptionID: String, token: String) async throws { throw Asked() }
    func acknowledgeProduct(productID: String, token: String) async throws { throw Asked() }
    func voidedPage(startTime: Date?, pageToken: String?, maxResults: Int) async throws -> VoidedPurchasesPage { throw Asked() }

    struct Asked: Error {}
}
