// Test support shared by the GooglePlay and Server tests: Google's side of a
// Pub/Sub push's authentication. Not used by the product.
import Crypto
import _CryptoExtras
import Foundation
import GooglePlay
import JSON

/// A stand-in for Google's OIDC signing: RSA-2048 keys with kids, the JWKS
/// that publishes them (as `https://www.googleapis.com/oauth2/v3/certs`
/// does), and push tokens signed RS256 with the claims Pub/Sub sends, valid
/// unless a test bends one.
/// https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions
public struct FakeGoogleIdentity: Sendable {
    public struct SigningKey: Sendable {
        public let kid: String
        public let privateKey: _RSA.Signing.PrivateKey
        public var publicKey: _RSA.Signing.PublicKey { privateKey.publicKey }
    }

    public static let defaultAudience = "https://subledger.example.com/v1/googleplay/notifications"
    public static let defaultServiceAccountEmail = "play-push@example-project.iam.gserviceaccount.com"

    /// Every key this can sign with; `jwks(keyIDs:)` publishes some or all.
    public private(set) var keys: [SigningKey]
    public var audience: String
    public var serviceAccountEmail: String

    /// Makes one RSA-2048 key per kid (a second or so each: share one
    /// identity across a suite).
    public init(keyIDs: [String] = ["fake-google-key-1"], audience: String = defaultAudience,
                serviceAccountEmail: String = defaultServiceAccountEmail) throws {
        keys = try keyIDs.map { SigningKey(kid: $0, privateKey: try _RSA.Signing.PrivateKey(keySize: .bits2048)) }
        self.audience = audience
        self.serviceAccountEmail = serviceAccountEmail
    }

    public func key(_ kid: String) -> SigningKey? { keys.first { $0.kid == kid } }

    /// A verifier configured for this identity's audience and account.
    public var verifier: GoogleIDTokenVerifier {
        GoogleIDTokenVerifier(audience: audience, serviceAccountEmail: serviceAccountEmail)
    }

    // MARK: JWKS

    /// The JWKS document of the keys named (all when nil), shaped as
    /// Google's: `{"keys": [{"kty", "alg", "use", "kid", "n", "e"}]}`.
    public func jwks(keyIDs: [String]? = nil) -> Data {
        let published = keys.filter { keyIDs?.contains($0.kid) ?? true }
        return CanonicalJSON.encode(.object(["keys": .array(published.map(Self.jwk))]))
    }

    /// One key as a JWK: its modulus and exponent in base64url.
    public static func jwk(_ key: SigningKey) -> JSONValue {
        // `getKeyPrimitives` only fails for a key the platform cannot export; BoringSSL's always can.
        let primitives = try? key.publicKey.getKeyPrimitives()
        return .object([
            "kty": .string("RSA"), "alg": .string("RS256"), "use": .string("sig"), "kid": .string(key.kid),
            "n": .string(Base64URL.encode(primitives?.modulus ?? Data())),
            "e": .string(Base64URL.encode(primitives?.publicExponent ?? Data())),
        ])
    }

    // MARK: Tokens

    /// The claims of a push token; each defaults to what a valid one has.
    public struct Claims: Sendable {
        public var issuer: String? = "https://accounts.google.com"
        public var audience: JSONValue?
        public var email: String?
        /// `true` in a valid token; a test sets `false`, `"true"` or nil.
        public var emailVerified: JSONValue? = .bool(true)
        public var issuedAt: Date?
        public var expiresAt: Date?
        public var subject: String? = "113774264463038321964"
        public var authorizedParty: String? = "113774264463038321964"
        /// Claims added as they are (or replacing one above).
        public var extra: [String: JSONValue] = [:]

        /// Only `iss`, `email_verified`, `sub` and `azp` set: `claims(issuedAt:)` gives a valid whole.
        public init() {}

        public var json: JSONValue {
            var fields = extra
            func put(_ name: String, _ value: JSONValue?) { if let value, fields[name] == nil { fields[name] = value } }
            put("iss", issuer.map(JSONValue.string))
            put("aud", audience)
            put("email", email.map(JSONValue.string))
            put("email_verified", emailVerified)
            put("iat", issuedAt.map { .integer(Int64($0.timeIntervalSince1970.rounded(.down))) })
            put("exp", expiresAt.map { .integer(Int64($0.timeIntervalSince1970.rounded(.down))) })
            put("sub", subject.map(JSONValue.string))
            put("azp", authorizedParty.map(JSONValue.string))
            return .object(fields)
        }
    }

    /// Valid claims for a token issued at `now` and good for an hour, as
    /// Pub/Sub's are.
    public func claims(issuedAt now: Date) -> Claims {
        var claims = Claims()
        claims.audience = .string(audience)
        claims.email = serviceAccountEmail
        claims.issuedAt = now
        claims.expiresAt = now + 3600
        return claims
    }

    /// A push token signed with key `kid` (the first key when nil), with
    /// header `{"alg", "kid", "typ": "JWT"}`; `alg` is only written, the
    /// signature is always RS256 (a token claiming another alg is forged).
    public func idToken(_ claims: Claims, kid: String? = nil, alg: String = "RS256", includeKeyID: Bool = true) throws -> String {
        let chosen: SigningKey? = if let kid { self.key(kid) } else { keys.first }
        guard let key = chosen else { throw FakeGoogleError.noSuchKey(kid ?? "") }
        var header: [String: JSONValue] = ["alg": .string(alg), "typ": .string("JWT")]
        if includeKeyID { header["kid"] = .string(key.kid) }
        return try CompactJWT.sign(header: .object(header), claims: claims.json, with: key.privateKey)
    }

    /// A valid token issued at `now`, after `change` bent its claims.
    public func idToken(issuedAt now: Date, kid: String? = nil, _ change: (inout Claims) -> Void = { _ in }) throws -> String {
        var claims = claims(issuedAt: now)
        change(&claims)
        return try idToken(claims, kid: kid)
    }

    /// The `Authorization` header of a push carrying `token`.
    public static func authorization(_ token: String) -> String { "Bearer " + token }
}

public enum FakeGoogleError: Error, Sendable, Equatable {
    case noSuchKey(String)
}
