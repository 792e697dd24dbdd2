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
        // By hand, not `UUID(uuid:).uuidString.lowercased()`: 131 ns a key
        // against 422 (release, 500,000 keys), on every event appended.
        let hex: [UInt8] = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(36)
        for (index, byte) in digest.enumerated() {
            if index == 4 || index == 6 || index == 8 || index == 10 { text.append(UInt8(ascii: "-")) }
            text.append(hex[Int(byte >> 4)])
            text.append(hex[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
