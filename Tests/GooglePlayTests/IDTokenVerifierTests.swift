import _CryptoExtras
import Foundation
import GooglePlay
import GooglePlayTesting
import JSON
import Testing

private let identity = Fixtures.identity
private let now = Fixtures.now

/// The verifier's refusal of `token` (nil: it was accepted).
private func refusal(_ token: String, keys: GoogleJWKS = Fixtures.publishedKeys, at time: Date = now) -> GoogleIDTokenError? {
    do {
        _ = try identity.verifier.verify(token, keys: keys, now: time)
        return nil
    } catch {
        return error
    }
}

/// `token` with one of its three parts replaced.
private func replacing(_ index: Int, of token: String, with part: String) -> String {
    var parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
    parts[index] = part
    return parts.joined(separator: ".")
}

/// A token of any header and payload bytes, signed RS256 with key 1.
private func signed(header: String, payload: String) throws -> String {
    let input = Base64URL.encode(Data(header.utf8)) + "." + Base64URL.encode(Data(payload.utf8))
    let signature = try identity.keys[0].privateKey.signature(for: Data(input.utf8), padding: .insecurePKCS1v1_5)
    return input + "." + Base64URL.encode(signature.rawRepresentation)
}

@Suite struct IDTokenVerifierTests {
    // https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions — the claims Pub/Sub's token carries.
    @Test func aGoodTokenIsAccepted() throws {
        let token = try identity.idToken(issuedAt: now - 10)
        let claims = try identity.verifier.verify(token, keys: Fixtures.publishedKeys, now: now)
        #expect(claims.issuer == "https://accounts.google.com")
        #expect(claims.audience == FakeGoogleIdentity.defaultAudience)
        #expect(claims.email == FakeGoogleIdentity.defaultServiceAccountEmail)
        #expect(claims.keyID == "google-key-1")
        #expect(claims.issuedAt == now - 10)
        #expect(claims.expiresAt == now + 3590)
        // Signed with the second published key, and the bare issuer, as Google also writes it.
        let second = try identity.idToken(issuedAt: now, kid: "google-key-2") { $0.issuer = "accounts.google.com" }
        #expect(refusal(second) == nil)
        // The email's case does not matter.
        let shouting = try identity.idToken(issuedAt: now) { $0.email = FakeGoogleIdentity.defaultServiceAccountEmail.uppercased() }
        #expect(refusal(shouting) == nil)
    }

    // https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions — iss is Google's.
    @Test func aWrongIssuerIsRefused() throws {
        #expect(refusal(try identity.idToken(issuedAt: now) { $0.issuer = "https://evil.example.com" }) == .wrongIssuer("https://evil.example.com"))
        #expect(refusal(try identity.idToken(issuedAt: now) { $0.issuer = nil }) == .wrongIssuer(""))
    }

    // https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions — aud is the push subscription's audience.
    @Test func aWrongAudienceIsRefused() throws {
        #expect(refusal(try identity.idToken(issuedAt: now) { $0.audience = .string("https://other.example.com") })
            == .wrongAudience("https://other.example.com"))
        // Pub/Sub sends a single string; an array is not its token.
        #expect(refusal(try identity.idToken(issuedAt: now) { $0.audience = .array([.string(FakeGoogleIdentity.defaultAudience)]) })
            == .wrongAudience(""))
    }

    // https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions — email is the push's service account, verified.
    @Test func aWrongOrUnverifiedEmailIsRefused() throws {
        #expect(refusal(try identity.idToken(issuedAt: now) { $0.email = "someone@example.com" }) == .wrongEmail("someone@example.com"))
        #expect(refusal(try identity.idToken(issuedAt: now) { $0.emailVerified = .bool(false) }) == .emailNotVerified)
        #expect(refusal(try identity.idToken(issuedAt: now) { $0.emailVerified = nil }) == .emailNotVerified)
        #expect(refusal(try identity.idToken(issuedAt: now) { $0.emailVerified = .string("true") }) == .emailNotVerified)
    }

    // https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions — exp, with at most 60 s of clock skew.
    @Test func anExpiredTokenIsRefusedBeyondTheSkew() throws {
        let token = try identity.idToken(issuedAt: now - 3600)  // exp == now
        #expect(refusal(token, at: now + 59) == nil)
        #expect(refusal(token, at: now + 60) == .expired(now))
        #expect(refusal(token, at: now + 86_400) == .expired(now))
        // A smaller skew may be configured, never a larger one.
        #expect(GoogleIDTokenVerifier(audience: "a", serviceAccountEmail: "b", clockSkew: 600).clockSkew == 60)
    }

    // https://www.rfc-editor.org/rfc/rfc7519#section-4.1.6 — iat not in the future beyond the skew.
    @Test func aTokenIssuedInTheFutureIsRefused() throws {
        #expect(refusal(try identity.idToken(issuedAt: now + 30)) == nil)
        #expect(refusal(try identity.idToken(issuedAt: now + 120)) == .issuedInFuture(now + 120))
    }

    // https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions — the signature is Google's.
    @Test func aBadSignatureIsRefused() throws {
        let token = try identity.idToken(issuedAt: now)
        let forgedClaims = identity.claims(issuedAt: now).json.setting("email", .string("attacker@example.com"))
        #expect(refusal(replacing(1, of: token, with: Base64URL.encode(CanonicalJSON.encode(forgedClaims)))) == .badSignature)
        #expect(refusal(replacing(2, of: token, with: Base64URL.encode(Data(repeating: 7, count: 256)))) == .badSignature)
        // Signed by key 2, claiming key 1.
        let byKey2 = try identity.idToken(issuedAt: now, kid: "google-key-2")
        let claimingKey1 = replacing(0, of: byKey2, with: token.split(separator: ".")[0].description)
        #expect(refusal(claimingKey1) == .badSignature)
    }

    // https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions — nothing is believed before the signature verifies.
    @Test func theSignatureIsCheckedFirst() throws {
        let token = try identity.idToken(issuedAt: now - 7200) { claims in
            claims.issuer = "https://evil.example.com"
            claims.audience = .string("elsewhere")
            claims.emailVerified = .bool(false)
        }
        #expect(refusal(token) == .wrongIssuer("https://evil.example.com"))
        #expect(refusal(replacing(2, of: token, with: Base64URL.encode(Data(repeating: 1, count: 256)))) == .badSignature)
    }

    // https://www.rfc-editor.org/rfc/rfc7518#section-3.1 — only RS256, Google's algorithm; never "none" nor HMAC.
    @Test("Another alg is refused", arguments: ["none", "HS256", "ES256", "RS512", "PS256", "rs256"])
    func anotherAlgorithmIsRefused(alg: String) throws {
        let token = try identity.idToken(identity.claims(issuedAt: now), alg: alg)
        #expect(refusal(token) == .unsupportedAlgorithm(alg))
        #expect(refusal(replacing(2, of: token, with: "")) == .unsupportedAlgorithm(alg))
    }

    // https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions — the kid names a key of Google's JWKS.
    @Test func anUnknownKeyIsNamed() throws {
        #expect(refusal(try identity.idToken(issuedAt: now, kid: "google-key-3")) == .unknownKey("google-key-3"))
        #expect(refusal(try identity.idToken(issuedAt: now), keys: GoogleJWKS(keys: [:])) == .unknownKey("google-key-1"))
    }

    // https://www.rfc-editor.org/rfc/rfc7515#section-7.1 — a compact JWS is three base64url parts of a JSON header and claims.
    @Test func malformedTokensAreRefused() throws {
        func isMalformed(_ token: String) -> Bool {
            if case .malformed = refusal(token) { return true }
            return false
        }
        #expect(isMalformed(""))
        #expect(isMalformed("abc"))
        #expect(isMalformed("a.b"))
        #expect(isMalformed("a.b.c.d"))
        #expect(isMalformed("!!.e30.e30"))
        #expect(isMalformed(Base64URL.encode(Data("not json".utf8)) + ".e30.AAAA"))
        #expect(isMalformed(String(repeating: "a", count: 20_000)))
        #expect(isMalformed(try identity.idToken(identity.claims(issuedAt: now), includeKeyID: false)))
        #expect(isMalformed(try signed(header: #"{"alg":"RS256","kid":"google-key-1"}"#, payload: "not json")))
        #expect(isMalformed(try identity.idToken(issuedAt: now) { $0.expiresAt = nil }))
        #expect(isMalformed(try identity.idToken(issuedAt: now) { $0.extra["exp"] = .string("tomorrow") }))
    }

    // https://www.rfc-editor.org/rfc/rfc7517#section-5 — a JWKS's keys; ones that cannot be used are skipped, not fatal.
    @Test func theKeySetKeepsWhatItCanUse() throws {
        let small = try _RSA.Signing.PrivateKey(unsafeKeySize: .init(bitCount: 1024))
        let primitives = try small.publicKey.getKeyPrimitives()
        let good = FakeGoogleIdentity.jwk(identity.keys[0])
        let document = JSONValue.object(["keys": .array([
            good,
            .object(["kty": .string("EC"), "kid": .string("ec-key"), "crv": .string("P-256")]),
            good.setting("kid", .string("enc-key")).setting("use", .string("enc")),
            good.setting("kid", .string("bad-n")).setting("n", .string("***")),
            .object(["kty": .string("RSA"), "kid": .string("small"), "alg": .string("RS256"),
                     "n": .string(Base64URL.encode(primitives.modulus)), "e": .string(Base64URL.encode(primitives.publicExponent))]),
            .string("junk"),
        ])])
        let keys = try GoogleJWKS(json: document.data)
        #expect(keys.keyIDs == ["google-key-1"])
        #expect(keys.skipped.count == 5)
        #expect(keys.skipped.contains { $0.contains("small") && $0.contains("1024") })
        #expect(throws: GooglePlayParseError.self) { _ = try GoogleJWKS(json: Data(#"{"keys": "none"}"#.utf8)) }
        #expect(throws: GooglePlayParseError.self) { _ = try GoogleJWKS(json: Data("<html>".utf8)) }
    }
}
