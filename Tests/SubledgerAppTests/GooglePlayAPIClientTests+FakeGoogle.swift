import Foundation
import GooglePlay
import GooglePlayTesting
import Hummingbird
import HummingbirdTesting
import JSON
import NIOCore
import SubledgerApp
import SubledgerAppTesting
import Testing

/// The fake itself refuses what Google refuses, in Google's shapes, so the
/// app's tests that rely on it test something.
extension GooglePlayAPIClientTests {
    /// A request to the fake at `path`; its answer's status, JSON and headers.
    static func raw(_ http: any TestClientProtocol, _ path: String, method: HTTPRequest.Method = .get, headers: HTTPFields = [:],
                    body: String? = nil) async throws -> (status: Int, json: JSONValue?, headers: HTTPFields) {
        let response = try await http.execute(uri: path, method: method, headers: headers, body: body.map { ByteBuffer(string: $0) })
        return (Int(response.status.code), try? JSONValue.parse(Data(response.body.readableBytesView)).get(), response.headers)
    }

    static func field(_ json: JSONValue?, _ path: String...) -> JSONValue? {
        var value = json
        for key in path {
            guard case .object(let fields)? = value else { return nil }
            value = fields[key]
        }
        return value
    }

    /// https://cloud.google.com/apis/design/errors#http_mapping
    @Test func theFakeRefusesAPlayCallWithoutALiveToken() async throws {
        try await withGooglePlayAPI { api in
            await Self.putSubscription(api)
            let path = Self.application + "/purchases/subscriptionsv2/tokens/" + Self.token
            let refused: [HTTPFields] = [[:], [.authorization: "Bearer ya29.made-up"], [.authorization: "Basic eDp5"]]
            for headers in refused {
                let answer = try await Self.raw(api.http, path, headers: headers)
                #expect(answer.status == 401)
                #expect(Self.field(answer.json, "error", "code") == .integer(401))
                #expect(Self.field(answer.json, "error", "status") == .string("UNAUTHENTICATED"))
                #expect(answer.headers[.wwwAuthenticate]?.hasPrefix("Bearer") == true)
            }
            // An issued token works until its expires_in runs out.
            await api.fake.setAccessTokenLifetime(1)
            let issued = try await Self.raw(api.http, "/token", method: .post, headers: Self.form,
                                            body: try api.key.tokenRequestBody(now: Date()))
            #expect(issued.status == 200)
            #expect(Self.field(issued.json, "expires_in") == .integer(1))
            #expect(Self.field(issued.json, "token_type") == .string("Bearer"))
            guard case .string(let token)? = Self.field(issued.json, "access_token") else { Issue.record("no access_token"); return }
            #expect(try await Self.raw(api.http, path, headers: [.authorization: "Bearer " + token]).status == 200)
            try await Task.sleep(for: .milliseconds(1100))
            #expect(try await Self.raw(api.http, path, headers: [.authorization: "Bearer " + token]).status == 401)
        }
    }

    static let form: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]

    /// https://developers.google.com/identity/protocols/oauth2/service-account#error-codes
    @Test func theFakeTokenEndpointTakesOnlyTheAccountsAssertion() async throws {
        try await withGooglePlayAPI { api in
            let tokenURI = await api.fake.tokenURI
            let wrongGrant = try await Self.raw(api.http, "/token", method: .post, headers: Self.form,
                                                body: "grant_type=client_credentials&assertion=x")
            #expect(wrongGrant.status == 400)
            #expect(Self.field(wrongGrant.json, "error") == .string("unsupported_grant_type"))

            let stranger = try ServiceAccountKey(json: GooglePlayAPITest.stranger.json(tokenURI: tokenURI))
            let forged = try await Self.raw(api.http, "/token", method: .post, headers: Self.form,
                                            body: try stranger.tokenRequestBody(now: Date()))
            #expect(forged.status == 400)
            #expect(Self.field(forged.json, "error") == .string("invalid_grant"))

            // An assertion for another audience (a key file naming another token_uri).
            let elsewhere = try ServiceAccountKey(json: GooglePlayAPITest.account.json(tokenURI: "https://oauth2.googleapis.com/token"))
            let misdirected = try await Self.raw(api.http, "/token", method: .post, headers: Self.form,
                                                 body: try elsewhere.tokenRequestBody(now: Date()))
            #expect(misdirected.status == 400)

            // An assertion from an hour and a half ago has expired.
            let stale = try await Self.raw(api.http, "/token", method: .post, headers: Self.form,
                                           body: try api.key.tokenRequestBody(now: Date() - 5400))
            #expect(Self.field(stale.json, "error") == .string("invalid_grant"))

            let json = try await Self.raw(api.http, "/token", method: .post, headers: [.contentType: "application/json"], body: "{}")
            #expect(json.status == 400)
            #expect(await api.fake.issuedTokens == 0)
        }
    }

    @Test func theFakeServesTheIdentitysKeys() async throws {
        let identity = try FakeGoogleIdentity()
        let fake = FakeGoogle(serviceAccount: GooglePlayAPITest.account, identity: identity)
        try await fake.serve { _, http in
            let answer = try await Self.raw(http, "/certs")
            #expect(answer.status == 200)
            #expect(answer.headers[.cacheControl]?.contains("max-age=") == true)
            guard case .array(let keys)? = Self.field(answer.json, "keys") else { Issue.record("no keys"); return }
            #expect(keys.count == 1)
            #expect(Self.field(keys.first, "kid") == .string("fake-google-key-1"))
        }
    }
}
