import Crypto
import Foundation

/// Names a subscriber in the event log without its id: a keyed digest
/// (HMAC-SHA256 with the installation's secret) of the id. It is the same
/// every time, so the write path names a stream without a lookup, and after
/// erasure the stream still answers for the id — an `erased` event at its
/// end is what refuses the id's new facts with 410 — while nobody without
/// the secret can tell which id it was, and nobody with it can list the ids
/// (docs/decisions/0004-erasure-by-crypto-shredding.md).
public struct SubscriberPseudonyms: Sendable {
    /// At least 256 bits.
    public static let minimumSecretCount = 32

    private let secret: Data

    /// Fewer than 32 bytes of secret is refused.
    public init(secret: Data) throws(SealError) {
        guard secret.count >= Self.minimumSecretCount else { throw SealError.keyLength(secret.count) }
        self.secret = secret
    }

    /// `ps-` and 64 hexadecimal digits.
    public func pseudonym(for subscriberID: String) -> String {
        let code = HMAC<SHA256>.authenticationCode(for: Data(("subscriber\u{1F}" + subscriberID).utf8), using: SymmetricKey(data: secret))
        return "ps-" + code.map { byte in
            let digits = Array("0123456789abcdef".utf8)
            return String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]], as: UTF8.self)
        }.joined()
    }
}
