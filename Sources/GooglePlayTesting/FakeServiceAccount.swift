// Test support: a Google service account and what Google's token endpoint
// does with its assertions, for unit tests and for the app's fake token
// endpoint. Not used by the product.
import Crypto
import _CryptoExtras
import Foundation
import GooglePlay
import JSON

/// Why Google's token endpoint would refuse an assertion. Google answers
/// 400 `{"error": "invalid_grant", "error_description": ...}` for a bad
/// assertion (`oauthError`, `errorDescription`), as the fake endpoint should.
/// https://developers.google.com/identity/protocols/oauth2/service-account#error-codes
public enum AssertionRejection: Error, Sendable, Equatable, CustomStringConvertible {
    case malformed(String)
    case unsupportedAlgorithm(String)
    /// The header's `kid` is not the account's key.
    case wrongKeyID(String)
    case badSignature
    case wrongIssuer(String)
    case wrongAudience(String)
    case wrongScope(String)
    /// `exp` is more than an hour after `iat`.
    case lifetimeTooLong(TimeInterval)
    case expired
    case issuedInFuture
    /// The form's `grant_type` is not the JWT bearer grant.
    case wrongGrantType(String)

    /// The OAuth error code Google answers with.
    public var oauthError: String {
        switch self {
        case .wrongGrantType: "unsupported_grant_type"
        case .malformed: "invalid_request"
        default: "invalid_grant"
        }
    }

    public var errorDescription: String {
        switch self {
        case .malformed(let reason): "Invalid JWT: \(reason)"
        case .unsupportedAlgorithm(let alg): "Invalid JWT: unsupported alg \(alg)"
        case .wrongKeyID: "Invalid JWT Signature."
        case .badSignature: "Invalid JWT Signature."
        case .wrongIssuer: "Invalid issuer: unknown service account."
        case .wrongAudience: "Invalid JWT: audience is not the token endpoint."
        case .wrongScope(let scope): "Invalid OAuth scope or ID token audience provided: \(scope)"
        case .lifetimeTooLong, .expired, .issuedInFuture:
            "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim."
        case .wrongGrantType(let grant): "Unsupported grant type: \(grant)"
        }
    }

    public var description: String { "\(oauthError): \(errorDescription)" }

    /// The endpoint's answer body for this refusal (status 400).
    public var answer: Data {
        CanonicalJSON.encode(.object(["error": .string(oauthError), "error_description": .string(errorDescription)]))
    }
}

/// A service account with a fresh RSA-2048 key: its JSON key file, shaped as
/// Google's console downloads it, and the token endpoint's check of what it
/// signs with that key.
/// https://developers.google.com/identity/protocols/oauth2/service-account
public struct FakeServiceAccount: Sendable {
    public let clientEmail: String
    public let privateKeyID: String
    public let privateKey: _RSA.Signing.PrivateKey
    public var publicKey: _RSA.Signing.PublicKey { privateKey.publicKey }

    /// Google's clock allowance for `iat`, so a caller's slightly fast
    /// clock is not refused.
    public static let clockSkew: TimeInterval = 60

    public init(clientEmail: String = "subledger-play@example-project.iam.gserviceaccount.com",
                privateKeyID: String = "0123456789abcdef0123456789abcdef01234567") throws {
        self.clientEmail = clientEmail
        self.privateKeyID = privateKeyID
        privateKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
    }

    /// The key file: `private_key` is PKCS#8 PEM as Google writes it.
    public func json(tokenURI: String = "https://oauth2.googleapis.com/token", projectID: String = "example-project") -> Data {
        jsonFields(tokenURI: tokenURI, projectID: projectID).data
    }

    /// The key file's fields, for a test to remove or bend one.
    public func jsonFields(tokenURI: String = "https://oauth2.googleapis.com/token", projectID: String = "example-project")
        -> (fields: [String: JSONValue], data: Data) {
        let fields: [String: JSONValue] = [
            "type": .string("service_account"),
            "project_id": .string(projectID),
            "private_key_id": .string(privateKeyID),
            "private_key": .string(privateKey.pkcs8PEMRepresentation + "\n"),
            "client_email": .string(clientEmail),
            "client_id": .string("104802937810293847561"),
            "auth_uri": .string("https://accounts.google.com/o/oauth2/auth"),
            "token_uri": .string(tokenURI),
            "auth_provider_x509_cert_url": .string("https://www.googleapis.com/oauth2/v1/certs"),
            "client_x509_cert_url": .string("https://www.googleapis.com/robot/v1/metadata/x509/"
                + (clientEmail.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? clientEmail)),
            "universe_domain": .string("googleapis.com"),
        ]
        return (fields, CanonicalJSON.encode(.object(fields)))
    }

    /// What a verified assertion says.
    public struct AssertionClaims: Sendable, Equatable {
        public var issuer: String
        public var scope: String
        public var audience: String
        public var issuedAt: Date
        public var expiresAt: Date
    }

    /// Checks an assertion as Google's token endpoint does: RS256 signed by
    /// this account's key (named by `kid`, when the header has one), `iss`
    /// this account, `aud` the token endpoint (`expectedAudience`, the key
    /// file's `token_uri`), `scope` the one asked for, at most an hour
    /// between `iat` and `exp`, and current at `now`.
    public func verifyAssertion(_ jwt: String, expectedAudience: String, now: Date = Date(),
                                scope: String = ServiceAccountKey.androidPublisherScope) throws(AssertionRejection) -> AssertionClaims {
        let token: CompactJWT
        do {
            token = try CompactJWT(jwt)
        } catch {
            throw .malformed(error.reason)
        }
        let alg = token.headerString("alg") ?? ""
        guard alg == "RS256" else { throw .unsupportedAlgorithm(alg) }
        if let kid = token.headerString("kid"), kid != privateKeyID { throw .wrongKeyID(kid) }
        guard token.isSigned(by: publicKey) else { throw .badSignature }
        guard case .success(.object(let claims)) = JSONValue.parse(token.payload) else { throw .malformed("claims are not a JSON object") }
        func string(_ name: String) -> String {
            if case .string(let value) = claims[name] { return value }
            return ""
        }
        func instant(_ name: String) throws(AssertionRejection) -> Date {
            guard case .integer(let seconds) = claims[name] else { throw .malformed("\(name) is not a whole number of seconds") }
            return Date(timeIntervalSince1970: TimeInterval(seconds))
        }
        guard string("iss") == clientEmail else { throw .wrongIssuer(string("iss")) }
        guard string("aud") == expectedAudience else { throw .wrongAudience(string("aud")) }
        // A space-separated list; the Play Developer API's must be in it.
        guard string("scope").split(separator: " ").contains(Substring(scope)) else { throw .wrongScope(string("scope")) }
        let issuedAt = try instant("iat"), expiresAt = try instant("exp")
        guard expiresAt > issuedAt, expiresAt.timeIntervalSince(issuedAt) <= ServiceAccountKey.assertionLifetime else {
            throw .lifetimeTooLong(expiresAt.timeIntervalSince(issuedAt))
        }
        guard now < expiresAt else { throw .expired }
        guard issuedAt <= now + Self.clockSkew else { throw .issuedInFuture }
        return AssertionClaims(issuer: clientEmail, scope: string("scope"), audience: expectedAudience,
                               issuedAt: issuedAt, expiresAt: expiresAt)
    }

    /// Checks a whole token request body
    /// (`grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=…`).
    public func verifyTokenRequest(formBody: String, expectedAudience: String, now: Date = Date(),
                                   scope: String = ServiceAccountKey.androidPublisherScope) throws(AssertionRejection) -> AssertionClaims {
        var form: [String: String] = [:]
        for pair in formBody.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let decode = { (text: Substring) in text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(text) }
            form[decode(parts[0])] = parts.count > 1 ? decode(parts[1]) : ""
        }
        let grant = form["grant_type"] ?? ""
        guard grant == ServiceAccountKey.grantType else { throw .wrongGrantType(grant) }
        guard let assertion = form["assertion"] else { throw .malformed("no assertion") }
        return try verifyAssertion(assertion, expectedAudience: expectedAudience, now: now, scope: scope)
    }

    /// The endpoint's answer to a good request (status 200).
    public static func tokenAnswer(accessToken: String = "ya29.fake-access-token", expiresIn: Int = 3599) -> Data {
        CanonicalJSON.encode(.object([
            "access_token": .string(accessToken), "expires_in": .integer(Int64(expiresIn)), "token_type": .string("Bearer"),
        ]))
    }
}
