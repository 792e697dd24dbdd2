import Crypto
import _CryptoExtras
import Foundation
import JSON

/// The service account key file could not be used: which field of it, and
/// what it should be (the configuration that reads the file names the file).
/// The message never holds the private key, nor any part of it.
public struct ServiceAccountKeyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `client_email`, `private_key`, `private_key_id`, `token_uri`, `type`,
    /// or "" for the file as a whole.
    public var field: String
    public var message: String

    public init(field: String, message: String) {
        self.field = field
        self.message = message
    }

    public var description: String {
        "The service account key file: " + (field.isEmpty ? "" : "field '\(field)': ") + message
    }
}

/// A Google service account's JSON key, the credential the service calls
/// the Play Developer API with: it signs a short-lived assertion and
/// exchanges it at `token_uri` for an access token.
/// https://developers.google.com/identity/protocols/oauth2/service-account#authorizingrequests
public struct ServiceAccountKey: Sendable, CustomStringConvertible {
    /// The scope of the Play Developer API.
    public static let androidPublisherScope = "https://www.googleapis.com/auth/androidpublisher"
    /// The `grant_type` the token endpoint takes an assertion under.
    public static let grantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    /// How long an assertion is valid: Google's maximum, one hour.
    public static let assertionLifetime: TimeInterval = 3600

    public let clientEmail: String
    /// Names the key in the assertion's header (`kid`), so Google checks
    /// the signature with that key of the account's.
    public let privateKeyID: String
    public let tokenURI: URL
    private let privateKey: _RSA.Signing.PrivateKey

    /// Reads the key file Google's console downloads. Each missing or
    /// unusable field is its own error, naming it.
    public init(json data: Data) throws(ServiceAccountKeyError) {
        guard case .success(.object(let fields)) = JSONValue.parse(data) else {
            throw ServiceAccountKeyError(field: "", message: "The file is not a JSON object (a service account key downloaded from Google Cloud).")
        }
        func text(_ name: String, _ expected: String) throws(ServiceAccountKeyError) -> String {
            guard let value = fields[name], value != .null else {
                throw ServiceAccountKeyError(field: name, message: "Missing: \(expected).")
            }
            guard case .string(let text) = value, !text.isEmpty else {
                throw ServiceAccountKeyError(field: name, message: "Must be a non-empty string: \(expected).")
            }
            return text
        }
        if let type = fields["type"], type != .string("service_account") {
            throw ServiceAccountKeyError(field: "type", message: "Must be \"service_account\"; this is another kind of Google credential.")
        }
        let email = try text("client_email", "the service account's email")
        guard email.contains("@"), email.utf8.count <= 320, !email.contains(where: { $0.isWhitespace }) else {
            throw ServiceAccountKeyError(field: "client_email", message: "Must be an email address.")
        }
        clientEmail = email
        privateKeyID = try text("private_key_id", "the id of the key, sent as the assertion's kid")
        guard privateKeyID.utf8.count <= 256 else {
            throw ServiceAccountKeyError(field: "private_key_id", message: "Must be at most 256 bytes.")
        }
        let uri = try text("token_uri", "Google's token endpoint, such as https://oauth2.googleapis.com/token")
        guard let url = URL(string: uri), Self.isAllowedTokenEndpoint(url) else {
            throw ServiceAccountKeyError(field: "token_uri",
                                         message: "Must be an https URL (http only to a loopback host), such as https://oauth2.googleapis.com/token.")
        }
        tokenURI = url
        // The PEM is never quoted: an error says only what it is not.
        let pem = try text("private_key", "the PEM of the account's RSA private key")
        do {
            privateKey = try _RSA.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw ServiceAccountKeyError(field: "private_key", message: "Is not a PEM RSA private key of 2048 bits or more.")
        }
    }

    /// A loopback host may be spoken to over http: the tests' fake endpoint.
    static func isAllowedTokenEndpoint(_ url: URL) -> Bool {
        guard let host = url.host, !host.isEmpty else { return false }
        switch url.scheme?.lowercased() {
        case "https": return true
        case "http": return ["localhost", "127.0.0.1", "::1", "[::1]"].contains(host.lowercased())
        default: return false
        }
    }

    /// The signed assertion (an RS256 JWT) to exchange at `tokenURI`:
    /// header `{alg, typ, kid}`, claims `{iss, scope, aud, iat, exp}` with
    /// `exp` one hour after `iat`, Google's maximum.
    /// https://developers.google.com/identity/protocols/oauth2/service-account#jwt-auth
    public func assertion(now: Date, scope: String = ServiceAccountKey.androidPublisherScope) throws(ServiceAccountKeyError) -> String {
        let issuedAt = Int64(now.timeIntervalSince1970.rounded(.down))
        let header: JSONValue = .object(["alg": .string("RS256"), "typ": .string("JWT"), "kid": .string(privateKeyID)])
        let claims: JSONValue = .object([
            "iss": .string(clientEmail), "scope": .string(scope), "aud": .string(tokenURI.absoluteString),
            "iat": .integer(issuedAt), "exp": .integer(issuedAt + Int64(Self.assertionLifetime)),
        ])
        do {
            return try CompactJWT.sign(header: header, claims: claims, with: privateKey)
        } catch {
            throw ServiceAccountKeyError(field: "private_key", message: "Signing the assertion failed.")
        }
    }

    /// The token request's body (`application/x-www-form-urlencoded`).
    public func tokenRequestBody(now: Date, scope: String = ServiceAccountKey.androidPublisherScope) throws(ServiceAccountKeyError) -> String {
        // Both values are URL-safe already (a URN and base64url with dots),
        // save the URN's colons, which a form may carry as they are.
        "grant_type=" + Self.grantType.replacingOccurrences(of: ":", with: "%3A") + "&assertion=" + (try assertion(now: now, scope: scope))
    }

    /// Names the account and key, never the key itself.
    public var description: String { "ServiceAccountKey(\(clientEmail), kid \(privateKeyID))" }
}

/// The token endpoint's answer: `{"access_token", "expires_in",
/// "token_type"}`; reused until shortly before it expires.
/// https://developers.google.com/identity/protocols/oauth2/service-account#callinganapi
public struct GoogleAccessToken: Sendable, Equatable, CustomStringConvertible {
    public var accessToken: String
    public var tokenType: String
    public var expiresAt: Date

    public init(accessToken: String, tokenType: String = "Bearer", expiresAt: Date) {
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.expiresAt = expiresAt
    }

    /// Reads the answer received at `receivedAt`. An OAuth error answer
    /// (`{"error": "invalid_grant", "error_description": ...}`) throws with
    /// field `error` and Google's words.
    public static func parse(json data: Data, receivedAt: Date) throws(GooglePlayParseError) -> GoogleAccessToken {
        let root = try FieldReader.document(data, expected: "the token endpoint's JSON answer")
        if let error = try root.string("error", maximumBytes: 200) {
            let detail = try root.string("error_description", maximumBytes: 400)
            throw GooglePlayParseError(.invalidField, field: "error",
                                       message: "The token endpoint refused the assertion: \(error)" + (detail.map { " (\($0))" } ?? "") + ".")
        }
        let token = try root.require(root.string("access_token", maximumBytes: 4096), "access_token", "the access token")
        guard !token.isEmpty, token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw .invalid("access_token", expected: "a non-empty token of printable ASCII")
        }
        let type = try root.require(root.string("token_type", maximumBytes: 64), "token_type", "\"Bearer\"")
        guard type.lowercased() == "bearer" else { throw .invalid("token_type", expected: "\"Bearer\"", got: "\"\(type)\"") }
        let lifetime = try root.require(root.integer("expires_in"), "expires_in", "the token's lifetime in seconds")
        guard (1...86_400).contains(lifetime) else {
            throw .invalid("expires_in", expected: "a lifetime of 1 to 86400 seconds", got: "\(lifetime)")
        }
        return GoogleAccessToken(accessToken: token, tokenType: "Bearer", expiresAt: receivedAt + TimeInterval(lifetime))
    }

    /// Whether it may still be sent at `now`: not within `margin` of its
    /// expiry, so a request never carries a token that lapses on the way.
    public func isUsable(at now: Date, margin: TimeInterval = 300) -> Bool {
        now + margin < expiresAt
    }

    /// `Authorization` header value.
    public var authorization: String { "Bearer " + accessToken }

    /// Never the token itself: it is a credential.
    public var description: String { "GoogleAccessToken(expires \(RFC3339.format(expiresAt)))" }
}
