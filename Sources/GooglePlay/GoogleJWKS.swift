import Crypto
import _CryptoExtras
import Foundation
import JSON

/// Google's signing keys as a JSON Web Key Set
/// (`https://www.googleapis.com/oauth2/v3/certs`): the RSA keys that sign
/// the OIDC tokens Pub/Sub pushes with, by `kid`. Google rotates them, so a
/// token may name a key fetched after this set was (`JWKSCache` refetches).
/// https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions
/// https://www.rfc-editor.org/rfc/rfc7517 (JWK), https://www.rfc-editor.org/rfc/rfc7518#section-6.3 (RSA)
public struct GoogleJWKS: Sendable {
    private let keys: [String: _RSA.Signing.PublicKey]
    /// Keys of the document that were left out (another key type, another
    /// algorithm or use, a bad modulus), described for the log: a key this
    /// cannot use must not make the ones it can unusable.
    public let skipped: [String]

    /// The smallest RSA modulus accepted, in bits (Google's are 2048).
    public static let minimumKeyBits = 2048

    /// Parses `{"keys": [{"kty": "RSA", "kid", "n", "e", "alg", "use"}]}`.
    /// Only a document that is not a key set at all throws.
    public init(json data: Data) throws(GooglePlayParseError) {
        let root = try FieldReader.document(data, expected: "a JSON Web Key Set {\"keys\": [...]}")
        let entries = try root.require(root.array("keys"), "keys", "an array of JSON Web Keys")
        var keys: [String: _RSA.Signing.PublicKey] = [:]
        var skipped: [String] = []
        for (index, entry) in entries.enumerated() {
            switch Self.key(entry) {
            case .success(let (kid, key)): keys[kid] = key
            case .failure(let reason): skipped.append("keys[\(index)]: \(reason.text)")
            }
        }
        self.keys = keys
        self.skipped = skipped
    }

    public init(keys: [String: _RSA.Signing.PublicKey]) {
        self.keys = keys
        skipped = []
    }

    public subscript(keyID: String) -> _RSA.Signing.PublicKey? { keys[keyID] }

    /// The key ids held, sorted.
    public var keyIDs: [String] { keys.keys.sorted() }

    struct Skip: Error { var text: String }

    private static func key(_ entry: JSONValue) -> Result<(String, _RSA.Signing.PublicKey), Skip> {
        guard case .object(let fields) = entry else { return .failure(Skip(text: "not an object")) }
        func text(_ key: String) -> String? {
            if case .string(let value) = fields[key] { return value }
            return nil
        }
        guard let kid = text("kid"), !kid.isEmpty, kid.utf8.count <= 256 else { return .failure(Skip(text: "no kid")) }
        guard text("kty") == "RSA" else { return .failure(Skip(text: "kid \(kid): kty is not RSA")) }
        if let use = text("use"), use != "sig" { return .failure(Skip(text: "kid \(kid): use is not sig")) }
        if let alg = text("alg"), alg != "RS256" { return .failure(Skip(text: "kid \(kid): alg is not RS256")) }
        guard let n = text("n").flatMap(Base64URL.decode), let e = text("e").flatMap(Base64URL.decode), !n.isEmpty, !e.isEmpty else {
            return .failure(Skip(text: "kid \(kid): n or e is not base64url"))
        }
        guard let key = try? _RSA.Signing.PublicKey(n: n, e: e) else {
            return .failure(Skip(text: "kid \(kid): not an RSA public key"))
        }
        guard key.keySizeInBits >= minimumKeyBits else {
            return .failure(Skip(text: "kid \(kid): \(key.keySizeInBits)-bit modulus, under \(minimumKeyBits)"))
        }
        return .success((kid, key))
    }
}

/// A compact JWS (`header.payload.signature`) split and decoded, not yet
/// trusted: the payload is only parsed once its signature has verified.
/// Package-wide so GooglePlayTesting signs and checks as this does.
package struct CompactJWT {
    /// The JOSE header, a JSON object (`alg`, `kid`, `typ`).
    package var header: [String: JSONValue]
    package var payload: Data
    package var signature: Data
    /// `header.payload` as sent: the bytes the signature covers.
    package var signingInput: Data

    /// The longest token read, in bytes: Google's are about 1 KB.
    package static let maximumBytes = 16 * 1024

    package struct Malformed: Error { package var reason: String }

    package init(_ text: String) throws(Malformed) {
        guard text.utf8.count <= Self.maximumBytes else {
            throw Malformed(reason: "a token of \(text.utf8.count) bytes; at most \(Self.maximumBytes) are read")
        }
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw Malformed(reason: "expected three dot-separated parts, got \(parts.count)") }
        guard let headerBytes = Base64URL.decode(parts[0]) else { throw Malformed(reason: "the header is not base64url") }
        guard let payload = Base64URL.decode(parts[1]) else { throw Malformed(reason: "the payload is not base64url") }
        guard let signature = Base64URL.decode(parts[2]) else { throw Malformed(reason: "the signature is not base64url") }
        guard case .success(.object(let header)) = JSONValue.parse(headerBytes) else {
            throw Malformed(reason: "the header is not a JSON object")
        }
        self.header = header
        self.payload = payload
        self.signature = signature
        signingInput = Data(parts[0].utf8) + Data(".".utf8) + Data(parts[1].utf8)
    }

    /// The header's string `name`, if it has one.
    package func headerString(_ name: String) -> String? {
        if case .string(let value) = header[name] { return value }
        return nil
    }

    /// Signs `claims` with `key`: RS256 (RSASSA-PKCS1-v1_5 over SHA-256,
    /// RFC 7518 §3.3), the only algorithm Google's tokens and assertions use.
    package static func sign(header: JSONValue, claims: JSONValue, with key: _RSA.Signing.PrivateKey) throws -> String {
        let input = Base64URL.encode(CanonicalJSON.encode(header)) + "." + Base64URL.encode(CanonicalJSON.encode(claims))
        let signature = try key.signature(for: Data(input.utf8), padding: .insecurePKCS1v1_5)
        return input + "." + Base64URL.encode(signature.rawRepresentation)
    }

    /// Whether the RS256 signature verifies with `key`.
    package func isSigned(by key: _RSA.Signing.PublicKey) -> Bool {
        key.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: signature), for: signingInput, padding: .insecurePKCS1v1_5)
    }
}
