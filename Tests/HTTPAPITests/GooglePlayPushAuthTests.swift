import Foundation
import GooglePlay
import GooglePlayTesting
import HummingbirdTesting
import JSON
import Ledger
@testable import SubledgerApp
import SubledgerAppTesting
import Testing

/// `POST /v1/googleplay/notifications` is authenticated by the push's OIDC
/// token alone: signed by one of Google's keys (by `kid`), issued by Google,
/// for the configured audience and service account (verified email), not
/// expired. Anything else is 401 and nothing is stored.
/// https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions
/// https://developer.android.com/google/play/billing/rtdn-reference
@Suite(.serialized) struct GooglePlayPushAuthTests {
    static let identity = try! FakeGoogleIdentity(keyIDs: ["google-key-a", "google-key-b"])
    static let push = GooglePlaySamples.push(.test, messageID: "9000000001")

    func stored(_ dependencies: AppDependencies) async throws -> Int64 {
        try await dependencies.pool.query("SELECT count(*) FROM googleplay_notifications").first!.decode(Int64.self, at: 0)
    }

    @Test func eachBadTokenIsRefusedWith401AndNothingIsStored() async throws {
        let identity = Self.identity
        let now = Date()
        // Another key pair claiming Google's kid: a signature Google's keys do not verify.
        let forger = try FakeGoogleIdentity(keyIDs: ["google-key-a"])
        let bad: [(String, String?)] = [
            ("no token", nil),
            ("not a bearer token", "Basic dXNlcjpwYXNz"),
            ("malformed", "Bearer not.a.jwt"),
            ("bad signature", "Bearer " + (try forger.idToken(issuedAt: now))),
            ("wrong audience", "Bearer " + (try identity.idToken(issuedAt: now) { $0.audience = .string("https://elsewhere.example.com") })),
            ("wrong issuer", "Bearer " + (try identity.idToken(issuedAt: now) { $0.issuer = "https://evil.example.com" })),
            ("wrong email", "Bearer " + (try identity.idToken(issuedAt: now) { $0.email = "someone@example-project.iam.gserviceaccount.com" })),
            ("email not verified", "Bearer " + (try identity.idToken(issuedAt: now) { $0.emailVerified = .bool(false) })),
            ("expired", "Bearer " + (try identity.idToken(issuedAt: now - 7200) { $0.expiresAt = now - 3600 })),
            ("unknown kid", "Bearer " + (try FakeGoogleIdentity(keyIDs: ["google-key-z"]).idToken(issuedAt: now))),
        ]
        try await withPlayApp(source: UnaskedGooglePlay(), identity: identity) { client, dependencies in
            for (what, authorization) in bad {
                let response = try await client.push(Self.push, authorization: authorization)
                #expect(response.status == .unauthorized, "\(what): \(response.text)")
                #expect(response.error.code == "googleplay_push_unauthorized", "\(what)")
            }
            #expect(try await stored(dependencies) == 0, "a refused push stores nothing")
            // The same push with a good token from either key is taken.
            for kid in ["google-key-a", "google-key-b"] {
                let response = try await client.push(GooglePlaySamples.push(.test, messageID: "9000000002-\(kid)"),
                                                     authorization: "Bearer " + (try identity.idToken(issuedAt: now, kid: kid)))
                #expect(response.status == .ok, "\(kid): \(response.text)")
                #expect(response.json["status"]?.string == "acknowledged")
            }
            #expect(try await stored(dependencies) == 2)
        }
    }

    @Test func anotherPackageIsStoredRejectedAndATestNotificationOnceByMessageID() async throws {
        let identity = Self.identity
        try await withPlayApp(source: UnaskedGooglePlay(), identity: identity) { client, dependencies in
            let token = "Bearer " + (try identity.idToken(issuedAt: Date()))
            let other = GooglePlaySamples.push(.subscription(.purchased), messageID: "9000000003", packageName: "com.other.app")
            let refused = try await client.push(other, authorization: token)
            #expect(refused.status == .ok, "Pub/Sub's retries would not change it: \(refused.text)")
            #expect(refused.json["status"]?.string == "rejected")
            let again = try await client.push(other, authorization: token)
            #expect(again.json["duplicate"]?.bool == true)
            let test = try await client.push(Self.push, authorization: token)
            #expect(test.json["status"]?.string == "acknowledged" && test.json["duplicate"]?.bool == false)
            let repeated = try await client.push(Self.push, authorization: token)
            #expect(repeated.json["duplicate"]?.bool == true, "a repeated messageId records nothing new")
            #expect(try await stored(dependencies) == 2)
        }
    }

    @Test func aMalformedPushIs400WithTheField() async throws {
        let identity = Self.identity
        try await withPlayApp(source: UnaskedGooglePlay(), identity: identity) { client, _ in
            let token = "Bearer " + (try identity.idToken(issuedAt: Date()))
            let response = try await client.push(Data(#"{"message": {"messageId": "1", "data": "%%%"}}"#.utf8), authorization: token)
            #expect(response.status == .badRequest)
            #expect(response.error.field?.hasPrefix("message.data") == true, "\(response.text)")
        }
    }

    @Test func withoutConfigurationThePlayRoutesAnswer503() async throws {
        try await withApp { client, _ in
            let push = try await client.push(Self.push, authorization: "Bearer x")
            #expect(push.status == .serviceUnavailable)
            #expect(push.error.code == "googleplay_not_configured")
            let link = try await client.post("/v1/subscribers/ann/googleplay/purchases",
                                             #"{"purchaseToken": "tok", "productId": "pro_monthly", "type": "subscription"}"#)
            #expect(link.status == .serviceUnavailable && link.error.code == "googleplay_not_configured")
        }
    }

    @Test func aPartConfigurationStopsServeNamingTheVariable() async throws {
        var dependencies = try await makeDependencies()
        dependencies.configuration.googlePlay.packageName = "com.example.app"
        #expect(throws: ConfigurationError.self) { _ = try GooglePlayIntegration.check(dependencies) }
        do {
            _ = try GooglePlayIntegration.check(dependencies)
        } catch {
            #expect(error.variable == "SUBLEDGER_GOOGLEPLAY_PUSH_AUDIENCE")
        }
        dependencies.configuration.googlePlay.pushAudience = "aud"
        dependencies.configuration.googlePlay.pushServiceAccount = "push@example.iam.gserviceaccount.com"
        dependencies.configuration.googlePlay.serviceAccountFile = "/nonexistent/key.json"
        do {
            _ = try GooglePlayIntegration.check(dependencies)
            Issue.record("an unreadable key file must stop serve")
        } catch {
            #expect(error.variable == "SUBLEDGER_GOOGLEPLAY_SERVICE_ACCOUNT_FILE")
        }
        dependencies.configuration.googlePlay = try GooglePlayConfiguration(environment: [:])
        #expect(try GooglePlayIntegration.check(dependencies) == nil, "nothing set: off, one notice")
        await dependencies.pool.close()
    }
}
