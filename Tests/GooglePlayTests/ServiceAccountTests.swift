import Foundation
import GooglePlay
import GooglePlayTesting
import JSON
import Testing

private let account = Fixtures.serviceAccount
private let now = Fixtures.now
private let tokenURI = "https://oauth2.googleapis.com/token"

private func key(_ fields: [String: JSONValue]) throws(ServiceAccountKeyError) -> ServiceAccountKey {
    try ServiceAccountKey(json: JSONValue.object(fields).data)
}

/// The parts of a compact JWS, decoded.
private func decodedParts(_ jwt: String) throws -> (header: JSONValue, claims: JSONValue) {
    let parts = jwt.split(separator: ".").map(String.init)
    return (try #require(Base64URL.decode(parts[0]).flatMap(JSONValue.init(json:))),
            try #require(Base64URL.decode(parts[1]).flatMap(JSONValue.init(json:))))
}

@Suite struct ServiceAccountTests {
    // https://developers.google.com/identity/protocols/oauth2/service-account#creatinganaccount — the key file's fields.
    @Test func theKeyFileIsRead() throws {
        let key = try ServiceAccountKey(json: account.json(tokenURI: tokenURI))
        #expect(key.clientEmail == account.clientEmail)
        #expect(key.privateKeyID == account.privateKeyID)
        #expect(key.tokenURI.absoluteString == tokenURI)
        // Its description never shows the key.
        #expect(!"\(key)".contains("PRIVATE KEY"))
        #expect(!String(reflecting: key).contains("PRIVATE KEY"))
        // The tests' fake endpoint listens on loopback, over http.
        #expect(try ServiceAccountKey(json: account.json(tokenURI: "http://127.0.0.1:8080/token")).tokenURI.port == 8080)
    }

    // https://developers.google.com/identity/protocols/oauth2/service-account#jwt-auth — header and claim set of the assertion.
    @Test func theAssertionIsShapedAsGoogleDocuments() throws {
        let key = try ServiceAccountKey(json: account.json(tokenURI: tokenURI))
        let (header, claims) = try decodedParts(try key.assertion(now: now))
        #expect(header == .object(["alg": .string("RS256"), "typ": .string("JWT"), "kid": .string(account.privateKeyID)]))
        let issuedAt = Int64(now.timeIntervalSince1970)
        #expect(claims == .object([
            "iss": .string(account.clientEmail), "scope": .string("https://www.googleapis.com/auth/androidpublisher"),
            "aud": .string(tokenURI), "iat": .integer(issuedAt), "exp": .integer(issuedAt + 3600),
        ]))
    }

    // https://developers.google.com/identity/protocols/oauth2/service-account#authorizingrequests — the token endpoint accepts it.
    @Test func theAssertionVerifiesAsGooglesEndpointChecksIt() throws {
        let key = try ServiceAccountKey(json: account.json(tokenURI: tokenURI))
        let assertion = try key.assertion(now: now)
        let claims = try account.verifyAssertion(assertion, expectedAudience: tokenURI, now: now + 5)
        #expect(claims.issuer == account.clientEmail)
        #expect(claims.expiresAt.timeIntervalSince(claims.issuedAt) == 3600)
        // The whole form body, as it is posted.
        let body = try key.tokenRequestBody(now: now)
        #expect(body.hasPrefix("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion="))
        #expect(try account.verifyTokenRequest(formBody: body, expectedAudience: tokenURI, now: now) == claims)
    }

    // https://developers.google.com/identity/protocols/oauth2/service-account#error-codes — what the endpoint refuses.
    @Test func aTamperedOrStaleAssertionIsRefused() throws {
        let key = try ServiceAccountKey(json: account.json(tokenURI: tokenURI))
        let assertion = try key.assertion(now: now)
        let parts = assertion.split(separator: ".").map(String.init)
        let (_, claims) = try decodedParts(assertion)

        func rejection(_ jwt: String, audience: String = tokenURI, at time: Date = now) -> AssertionRejection? {
            #expect(throws: AssertionRejection.self) { _ = try account.verifyAssertion(jwt, expectedAudience: audience, now: time) }
        }
        // Claims changed after signing: a broader scope, another issuer.
        for (name, value) in [("scope", "https://www.googleapis.com/auth/cloud-platform"), ("iss", "intruder@example.com")] {
            let forged = Base64URL.encode(CanonicalJSON.encode(claims.setting(name, .string(value))))
            #expect(rejection([parts[0], forged, parts[2]].joined(separator: ".")) == .badSignature)
        }
        #expect(rejection([parts[0], parts[1], Base64URL.encode(Data(repeating: 9, count: 256))].joined(separator: ".")) == .badSignature)
        // Signed with another account's key.
        let intruder = try ServiceAccountKey(json: Fixtures.otherServiceAccount.json(tokenURI: tokenURI))
        #expect(rejection(try intruder.assertion(now: now)) == .wrongKeyID(Fixtures.otherServiceAccount.privateKeyID))
        // For another endpoint, expired, or from the future.
        #expect(rejection(assertion, audience: "https://example.com/token") == .wrongAudience(tokenURI))
        #expect(rejection(assertion, at: now + 3600) == .expired)
        #expect(rejection(assertion, at: now - 120) == .issuedInFuture)
        #expect(throws: AssertionRejection.self) {
            _ = try account.verifyAssertion(assertion, expectedAudience: tokenURI, now: now, scope: "https://www.googleapis.com/auth/drive")
        }
        let wrongGrant = #expect(throws: AssertionRejection.self) {
            _ = try account.verifyTokenRequest(formBody: "grant_type=password&assertion=\(assertion)", expectedAudience: tokenURI, now: now)
        }
        #expect(wrongGrant?.oauthError == "unsupported_grant_type")
        #expect(rejection(assertion, at: now + 3600)?.oauthError == "invalid_grant")
    }

    // https://developers.google.com/identity/protocols/oauth2/service-account#creatinganaccount — each field the file must have.
    @Test("A missing or unusable field of the key file is named",
          arguments: ["client_email", "private_key", "private_key_id", "token_uri"])
    func aMissingFieldIsNamed(field: String) throws {
        var fields = account.jsonFields(tokenURI: tokenURI).fields
        fields[field] = nil
        #expect(#expect(throws: ServiceAccountKeyError.self) { _ = try key(fields) }?.field == field)
        fields[field] = .integer(7)
        #expect(#expect(throws: ServiceAccountKeyError.self) { _ = try key(fields) }?.field == field)
    }

    // https://developers.google.com/identity/protocols/oauth2/service-account#creatinganaccount — invalid values, and the key never echoed.
    @Test func invalidFieldsAreRefusedWithoutEchoingTheKey() throws {
        let fields = account.jsonFields(tokenURI: tokenURI).fields
        guard case .string(let pem) = fields["private_key"] else { Issue.record("no private_key"); return }
        // A real key's PEM with a line missing: what it holds must not appear in the message.
        var lines = pem.split(separator: "\n").map(String.init)
        lines.remove(at: 3)
        let broken = lines.joined(separator: "\n")
        let error = #expect(throws: ServiceAccountKeyError.self) { _ = try key(fields.merging(["private_key": .string(broken)]) { $1 }) }
        #expect(error?.field == "private_key")
        for line in lines.dropFirst().dropLast() { #expect(!(error?.description.contains(line) ?? true)) }

        func field(_ change: [String: JSONValue]) -> String? {
            (#expect(throws: ServiceAccountKeyError.self) { _ = try key(fields.merging(change) { $1 }) })?.field
        }
        #expect(field(["type": .string("authorized_user")]) == "type")
        #expect(field(["token_uri": .string("http://oauth2.example.com/token")]) == "token_uri")
        #expect(field(["token_uri": .string("not a url")]) == "token_uri")
        #expect(field(["client_email": .string("no-at-sign")]) == "client_email")
        #expect(#expect(throws: ServiceAccountKeyError.self) { _ = try ServiceAccountKey(json: Data("[1]".utf8)) }?.field == "")
    }

    // https://developers.google.com/identity/protocols/oauth2/service-account#callinganapi — the token endpoint's answer.
    @Test func theTokenAnswerIsRead() throws {
        let token = try GoogleAccessToken.parse(json: FakeServiceAccount.tokenAnswer(accessToken: "ya29.abc", expiresIn: 3599),
                                                receivedAt: now)
        #expect(token == GoogleAccessToken(accessToken: "ya29.abc", expiresAt: now + 3599))
        #expect(token.authorization == "Bearer ya29.abc")
        #expect(!"\(token)".contains("ya29"))
        #expect(token.isUsable(at: now + 3000))
        #expect(!token.isUsable(at: now + 3400))

        func refusal(_ json: String) -> GooglePlayParseError? {
            #expect(throws: GooglePlayParseError.self) { _ = try GoogleAccessToken.parse(json: Data(json.utf8), receivedAt: now) }
        }
        let refused = refusal(#"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#)
        #expect(refused?.field == "error")
        #expect(refused?.message.contains("invalid_grant") == true)
        #expect(refusal(#"{"expires_in":3599,"token_type":"Bearer"}"#)?.field == "access_token")
        #expect(refusal(#"{"access_token":"x","expires_in":3599,"token_type":"mac"}"#)?.field == "token_type")
        #expect(refusal(#"{"access_token":"x","expires_in":0,"token_type":"Bearer"}"#)?.field == "expires_in")
        #expect(refusal(#"{"access_token":"x","token_type":"Bearer"}"#)?.field == "expires_in")
    }
}
