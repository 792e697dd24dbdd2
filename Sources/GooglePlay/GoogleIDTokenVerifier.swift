import Foundation
import JSON

/// Why a Pub/Sub push's OIDC token was refused. Every case but
/// `keysUnavailable` is the sender's: 401, and nothing is stored.
/// `unknownKey` may only mean Google rotated its keys since they were
/// fetched: refetch the JWKS once and verify again (`JWKSCache` does).
public enum GoogleIDTokenError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Not a compact JWS of a JSON header and claims; what was wrong.
    case malformed(String)
    /// The header's `alg` is not `RS256` (`none`, `HS256`, ...).
    case unsupportedAlgorithm(String)
    /// No key of the JWKS has the header's `kid`.
    case unknownKey(String)
    /// The signature does not verify with the key the header names.
    case badSignature
    /// `iss` is not Google's.
    case wrongIssuer(String)
    /// `aud` is not the configured push audience.
    case wrongAudience(String)
    /// `email` is not the configured push service account.
    case wrongEmail(String)
    /// `email_verified` is not `true`.
    case emailNotVerified
    /// `exp` passed (more than the allowed clock skew ago).
    case expired(Date)
    /// `iat` lies ahead of the clock by more than the allowed skew.
    case issuedInFuture(Date)
    /// Google's keys could not be fetched or read: not the token's fault
    /// (503, so Pub/Sub retries).
    case keysUnavailable(String)

    public var description: String {
        switch self {
        case .malformed(let reason): "The push token is malformed: \(reason)."
        case .unsupportedAlgorithm(let alg): "The push token's alg \"\(alg)\" is not RS256."
        case .unknownKey(let kid): "The push token's kid \"\(kid)\" is not one of Google's keys."
        case .badSignature: "The push token's signature does not verify with Google's key."
        case .wrongIssuer(let issuer): "The push token's iss \"\(issuer)\" is not Google's."
        case .wrongAudience(let audience): "The push token's aud \"\(audience)\" is not the push subscription's configured audience."
        case .wrongEmail(let email): "The push token's email \"\(email)\" is not the configured push service account."
        case .emailNotVerified: "The push token's email is not verified (email_verified is not true)."
        case .expired(let date): "The push token expired at \(date.timeIntervalSince1970) s since 1970."
        case .issuedInFuture(let date): "The push token is issued in the future (\(date.timeIntervalSince1970) s since 1970)."
        case .keysUnavailable(let reason): "Google's signing keys are unavailable: \(reason)."
        }
    }

    /// Whether the token is at fault (401) rather than the key fetch (503).
    public var isTokenRefused: Bool {
        if case .keysUnavailable = self { return false }
        return true
    }

    /// Text from the token, cut so it cannot flood a log line.
    static func quoted(_ text: String) -> String { UntrustedText.capped(text, limit: 200) }
}

/// What a verified push token says.
public struct GoogleIDTokenClaims: Sendable, Hashable {
    public var issuer: String
    public var audience: String
    /// The service account Pub/Sub signed as.
    public var email: String
    public var subject: String?
    public var issuedAt: Date
    public var expiresAt: Date
    /// The `kid` of the key that signed it.
    public var keyID: String
}

/// Verifies the OIDC token Pub/Sub sends with an authenticated push
/// (`Authorization: Bearer <JWT>`), as Google's page says to: signed RS256
/// by one of Google's keys (checked first: nothing the token claims is read
/// before its signature verifies), issued by Google, for this audience, by
/// the configured service account with a verified email, and current.
/// https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions
public struct GoogleIDTokenVerifier: Sendable {
    /// The issuers Google's ID tokens carry.
    public static let issuers: Set<String> = ["accounts.google.com", "https://accounts.google.com"]
    /// The most a clock may be off, either way: 60 s, the skew Google's own
    /// client libraries allow, so a token is taken up to a minute after
    /// `exp` and up to a minute before `iat`.
    public static let maximumClockSkew: TimeInterval = 60

    /// The push subscription's audience (its endpoint URL unless set otherwise).
    public var audience: String
    /// The service account the push subscription has Pub/Sub sign as.
    public var serviceAccountEmail: String
    /// At most `maximumClockSkew`.
    public let clockSkew: TimeInterval

    public init(audience: String, serviceAccountEmail: String, clockSkew: TimeInterval = maximumClockSkew) {
        self.audience = audience
        self.serviceAccountEmail = serviceAccountEmail
        self.clockSkew = min(max(clockSkew, 0), Self.maximumClockSkew)
    }

    /// Verifies `token` against `keys` at `now`.
    public func verify(_ token: String, keys: GoogleJWKS, now: Date) throws(GoogleIDTokenError) -> GoogleIDTokenClaims {
        let jwt: CompactJWT
        do {
            jwt = try CompactJWT(token)
        } catch {
            throw .malformed(error.reason)
        }
        guard let alg = jwt.headerString("alg") else { throw .malformed("the header has no alg") }
        guard alg == "RS256" else { throw .unsupportedAlgorithm(GoogleIDTokenError.quoted(alg)) }
        guard let kid = jwt.headerString("kid"), !kid.isEmpty else { throw .malformed("the header has no kid") }
        guard let key = keys[kid] else { throw .unknownKey(GoogleIDTokenError.quoted(kid)) }
        guard jwt.isSigned(by: key) else { throw .badSignature }

        guard case .success(.object(let claims)) = JSONValue.parse(jwt.payload) else {
            throw .malformed("the claims are not a JSON object")
        }
        func string(_ name: String) -> String? {
            if case .string(let value) = claims[name] { return value }
            return nil
        }
        func instant(_ name: String) throws(GoogleIDTokenError) -> Date {
            // A NumericDate: seconds since 1970, possibly fractional (RFC 7519 §2).
            let seconds: Double? = switch claims[name] {
            case .integer(let value): Double(value)
            case .number(let value): value
            default: nil
            }
            guard let seconds, seconds.isFinite, (0...253_402_300_799).contains(seconds) else {
                throw .malformed("\(name) is not a NumericDate")
            }
            return Date(timeIntervalSince1970: seconds)
        }

        let issuer = string("iss") ?? ""
        guard Self.issuers.contains(issuer) else { throw .wrongIssuer(GoogleIDTokenError.quoted(issuer)) }
        // Pub/Sub sends a single audience string; an array is not Google's.
        let audience = string("aud") ?? ""
        guard audience == self.audience else { throw .wrongAudience(GoogleIDTokenError.quoted(audience)) }
        // Email addresses are compared without case: Google writes them in
        // lowercase, a configuration may not.
        let email = string("email") ?? ""
        guard email.lowercased() == serviceAccountEmail.lowercased() else { throw .wrongEmail(GoogleIDTokenError.quoted(email)) }
        guard claims["email_verified"] == .bool(true) else { throw .emailNotVerified }
        let expiresAt = try instant("exp")
        guard now < expiresAt + clockSkew else { throw .expired(expiresAt) }
        let issuedAt = try instant("iat")
        guard issuedAt <= now + clockSkew else { throw .issuedInFuture(issuedAt) }
        return GoogleIDTokenClaims(issuer: issuer, audience: audience, email: email, subject: string("sub"),
                                   issuedAt: issuedAt, expiresAt: expiresAt, keyID: kid)
    }
}
