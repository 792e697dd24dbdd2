import Crypto
import Foundation
import Ledger

/// Names a subscriber in the event log without its id: `ps-` and the
/// SHA-256 (hexadecimal) of the id, domain-separated. It is the same every
/// time and computable in SQL (`subledger_pseudonym`, sql/0026), so the
/// write path names a stream with no lookup, and after erasure the stream
/// still answers for the id. Nobody can read an id from it; whoever holds a
/// candidate id can confirm it had a stream, which a keyed digest would not
/// prevent either, its secret being stored with the data
/// (docs/decisions/0004-erasure-by-crypto-shredding.md).
public enum SubscriberPseudonyms {
    /// What is digested before the id: a domain, so the digest of an id is
    /// no digest anything else computes.
    static let domain = Data("subscriber\u{1F}".utf8)

    /// Hexadecimal digits kept of the digest: 128 bits, far from any
    /// collision among subscriber ids, and half the length of every stream
    /// id and idempotency key in the log's indexes.
    static let digits = 32

    /// `ps-` and the first 32 hexadecimal digits of the digest.
    public static func pseudonym(for subscriberID: String) -> String {
        var hash = SHA256()
        hash.update(data: domain)
        hash.update(data: Data(subscriberID.utf8))
        let hex = Array("0123456789abcdef".utf8)
        var text = Array("ps-".utf8)
        text.reserveCapacity(3 + digits)
        for byte in hash.finalize().prefix(digits / 2) {
            text.append(hex[Int(byte >> 4)])
            text.append(hex[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// Whether `text` has the shape of a pseudonym.
    public static func isPseudonym(_ text: some StringProtocol) -> Bool {
        InputLimits.hasPseudonymShape(text)
    }
}
