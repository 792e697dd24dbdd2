import Crypto
import Foundation
import Synchronization

/// Certificate chains already validated, by the exact `x5c` text, so the
/// same Apple chain is not parsed and validated for every payload, and a
/// forged signature over a known chain costs one ECDSA check.
///
/// The notification route needs no key: anyone may post to it. Bounded, so
/// chains an attacker makes up cannot grow it; when full it starts over.
public final class VerifiedChainCache: Sendable {
    struct Entry: Sendable {
        /// The leaf's key, which signs the payload (raw: the key type is not `Sendable`).
        var key: Data
        /// When every certificate of the chain was valid.
        var validFrom: Date
        var validUntil: Date
    }

    private let entries = Mutex<[Data: Entry]>([:])
    private let counts = Mutex<(hits: Int, validations: Int)>((0, 0))
    let capacity: Int

    public init(capacity: Int = 64) {
        self.capacity = capacity
    }

    static func key(_ x5c: [String]) -> Data {
        var hasher = SHA256()
        for certificate in x5c {
            hasher.update(data: Data(certificate.utf8))
            hasher.update(data: Data([0]))
        }
        return Data(hasher.finalize())
    }

    /// The leaf key of a chain validated before, when it was valid at `date`.
    func key(for chain: Data, at date: Date) -> P256.Signing.PublicKey? {
        let entry = entries.withLock { $0[chain] }
        let key = entry.flatMap { $0.validFrom <= date && date <= $0.validUntil ? try? P256.Signing.PublicKey(rawRepresentation: $0.key) : nil }
        if key != nil { counts.withLock { $0.hits += 1 } }
        return key
    }

    /// Keeps a chain just validated in full.
    func insert(_ entry: Entry, for chain: Data) {
        counts.withLock { $0.validations += 1 }
        entries.withLock { entries in
            if entries.count >= capacity, entries[chain] == nil { entries.removeAll(keepingCapacity: true) }
            entries[chain] = entry
        }
    }

    /// Chains held now.
    public var count: Int { entries.withLock { $0.count } }

    /// Payloads whose chain was known, and chains validated in full, since it was made.
    public var statistics: (hits: Int, validations: Int) { counts.withLock { $0 } }
}
