import Crypto
import Foundation

/// The `Subledger-Signature` header: `t=UNIX,v1=HEX(HMAC-SHA256(secret, "t.body"))`.
/// The timestamp is signed with the body so a receiver can refuse old replays.
public enum WebhookSignature {
    public static let headerName = "Subledger-Signature"

    public static func header(body: Data, secret: String, timestamp: Int) -> String {
        header(body: body, secrets: [secret], timestamp: timestamp)
    }

    /// One `v1` per secret, in order: after a rotation the new secret's and
    /// the old one's (`t=…,v1=NEW,v1=OLD`), so a receiver that knows either
    /// verifies the request.
    public static func header(body: Data, secrets: [String], timestamp: Int) -> String {
        (["t=\(timestamp)"] + secrets.map { "v1=" + hex(body: body, secret: $0, timestamp: timestamp) }).joined(separator: ",")
    }

    /// The hex HMAC of `"<timestamp>.<body>"`.
    public static func hex(body: Data, secret: String, timestamp: Int) -> String {
        var message = Data("\(timestamp).".utf8)
        message.append(body)
        let code = HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: Data(secret.utf8)))
        return code.map { String(format: "%02x", $0) }.joined()
    }

    /// Checks a header as a receiver would: the `v1` HMAC matches, compared in
    /// constant time, and `t` is within `tolerance` seconds of `now`.
    public static func isValid(header: String, body: Data, secret: String, now: Date = Date(), tolerance: TimeInterval = 300) -> Bool {
        var timestamp: Int?
        var signatures: [String] = []
        for part in header.split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1).map(String.init)
            guard pair.count == 2 else { continue }
            if pair[0] == "t" { timestamp = Int(pair[1]) }
            if pair[0] == "v1" { signatures.append(pair[1]) }
        }
        guard let timestamp, abs(now.timeIntervalSince1970 - Double(timestamp)) <= tolerance else { return false }
        let expected = Array(hex(body: body, secret: secret, timestamp: timestamp).utf8)
        return signatures.contains { constantTimeEquals(Array($0.utf8), expected) }
    }
}
