import Crypto
import Foundation

extension EventStore {
    /// How the log stores an idempotency key (sql/0044): the MD5 of its
    /// text's UTF-8, as a UUID's text (what PostgreSQL's
    /// `md5(key)::uuid` gives). 16 bytes in the row and an index entry of
    /// 24, whatever the key's length; computed here, where it costs a
    /// fraction of a microsecond, rather than by the append function, where
    /// `md5` with its cast cost about one a call, a few a key.
    public static func storedKey(_ key: String) -> String {
        let digest = Insecure.MD5.hash(data: Data(key.utf8))
        return digest.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)) }.uuidString.lowercased()
    }
}
