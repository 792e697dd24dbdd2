import Foundation

/// A compact JWS (`header.payload.signature`) split and decoded, not yet
/// trusted: `AppStoreVerifier` decides that.
struct CompactJWS {
    struct Header: Decodable {
        var alg: String?
        var x5c: [String]?
    }

    var header: Header
    var payload: Data
    var signature: Data
    /// `header.payload` as sent: the bytes the signature covers.
    var signingInput: Data

    init(_ text: String, field: String) throws(AppStoreVerificationError) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else {
            throw AppStoreVerificationError(.invalidJWS, "Expected a compact JWS of three dot-separated parts, got \(parts.count).", field: field)
        }
        guard let headerBytes = Base64URL.decode(parts[0]) else {
            throw AppStoreVerificationError(.invalidJWS, "The JWS header is not base64url.", field: field)
        }
        guard let payload = Base64URL.decode(parts[1]) else {
            throw AppStoreVerificationError(.invalidJWS, "The JWS payload is not base64url.", field: field)
        }
        guard let signature = Base64URL.decode(parts[2]) else {
            throw AppStoreVerificationError(.invalidJWS, "The JWS signature is not base64url.", field: field)
        }
        do {
            header = try JSONDecoder().decode(Header.self, from: headerBytes)
        } catch {
            throw AppStoreVerificationError(.invalidJWS, "The JWS header is not a JSON object with string 'alg' and array 'x5c'.", field: field)
        }
        self.payload = payload
        self.signature = signature
        signingInput = Data(parts[0].utf8) + Data(".".utf8) + Data(parts[1].utf8)
    }
}

/// Base64url without padding (RFC 7515 §2), as JWS uses it.
enum Base64URL {
    static func decode(_ text: Substring) -> Data? {
        guard text.utf8.allSatisfy({ byte in
            (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
        }) else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        switch base64.count % 4 {
        case 2: base64 += "=="
        case 3: base64 += "="
        case 1: return nil
        default: break
        }
        return Data(base64Encoded: base64)
    }
}
