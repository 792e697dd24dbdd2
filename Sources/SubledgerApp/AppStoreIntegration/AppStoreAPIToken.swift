import Crypto
import Foundation

/// The team's in-app purchase key and what the App Store Server API JWT
/// names: key id (`kid`), issuer id (`iss`), bundle id (`bid`).
public struct AppStoreAPICredentials: Sendable {
    /// The key's raw scalar: `P256.Signing.PrivateKey` is not `Sendable` in this swift-crypto.
    private let keyRepresentation: Data
    public let keyID: String
    public let issuerID: String
    public let bundleID: String

    public init(privateKey: P256.Signing.PrivateKey, keyID: String, issuerID: String, bundleID: String) {
        self.keyRepresentation = privateKey.rawRepresentation
        self.keyID = keyID
        self.issuerID = issuerID
        self.bundleID = bundleID
    }

    /// Reads the `.p8` file App Store Connect hands out (a PKCS#8 PEM P-256 key).
    public init(keyFile path: String, keyID: String, issuerID: String, bundleID: String) throws(ConfigurationError) {
        let pem: String
        do {
            pem = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ConfigurationError(variable: "SUBLEDGER_APPSTORE_KEY_FILE", message: "\(path) cannot be read (\(error.localizedDescription))")
        }
        let key: P256.Signing.PrivateKey
        do {
            key = try P256.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            // Never echo the file: it is a secret.
            throw ConfigurationError(variable: "SUBLEDGER_APPSTORE_KEY_FILE",
                                     message: "\(path) is not a P-256 private key in PEM (the .p8 file App Store Connect offers once, 'BEGIN PRIVATE KEY')")
        }
        self.init(privateKey: key, keyID: keyID, issuerID: issuerID, bundleID: bundleID)
    }

    /// The JWT's claims (Apple's "Generating JSON Web Tokens for API requests").
    public struct Claims: Codable, Sendable, Equatable {
        public var iss: String
        public var iat: Int64
        public var exp: Int64
        public var aud: String
        public var bid: String
    }

    struct Header: Codable {
        var alg = "ES256"
        var kid: String
        var typ = "JWT"
    }

    /// A JWT signed ES256 with the key, valid from `issuedAt` for `lifetime`
    /// (at most the 60 minutes Apple accepts).
    public func makeToken(issuedAt: Date, lifetime: Duration) throws -> String {
        let iat = Int64(issuedAt.timeIntervalSince1970.rounded(.down))
        let seconds = min(max(lifetime.components.seconds, 60), 3600)
        let claims = Claims(iss: issuerID, iat: iat, exp: iat + seconds, aud: "appstoreconnect-v1", bid: bundleID)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let signingInput = Base64URLEncoding.encode(try encoder.encode(Header(kid: keyID)))
            + "." + Base64URLEncoding.encode(try encoder.encode(claims))
        // swift-crypto hashes with SHA-256 and gives r‖s, the JWS form of ES256.
        let signature = try P256.Signing.PrivateKey(rawRepresentation: keyRepresentation).signature(for: Data(signingInput.utf8))
        return signingInput + "." + Base64URLEncoding.encode(signature.rawRepresentation)
    }
}

/// Base64url without padding (RFC 7515 §2).
enum Base64URLEncoding {
    static func encode(_ data: Data) -> String {
        var text = data.base64EncodedString()
        text = text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while text.hasSuffix("=") { text.removeLast() }
        return text
    }
}

/// One JWT shared by every call until it nears its end; a 401 drops it.
actor AppStoreAPITokenCache {
    private let credentials: AppStoreAPICredentials
    private let lifetime: Duration
    private let renewalMargin: Duration
    private let now: @Sendable () -> Date
    private var cached: (token: String, expires: Date)?

    init(credentials: AppStoreAPICredentials, lifetime: Duration, renewalMargin: Duration,
         now: @escaping @Sendable () -> Date = { Date() }) {
        self.credentials = credentials
        self.lifetime = lifetime
        self.renewalMargin = renewalMargin
        self.now = now
    }

    func token() throws -> String {
        let now = self.now()
        if let cached, cached.expires.timeIntervalSince(now) > Double(renewalMargin.components.seconds) {
            return cached.token
        }
        let token = try credentials.makeToken(issuedAt: now, lifetime: lifetime)
        cached = (token, now.addingTimeInterval(Double(lifetime.components.seconds)))
        return token
    }

    func invalidate() { cached = nil }
}
