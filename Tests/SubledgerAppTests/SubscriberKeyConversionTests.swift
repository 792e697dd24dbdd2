import Crypto
import Foundation
import Logging
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
import TestSupport
import Testing

/// Keys of version 1 rewritten as their two keys when the database is
/// prepared (sql/0038, `SubscriberKeyConversion`): every value they sealed
/// still opens and every digest still matches; other forms stay as they are.
@Suite struct SubscriberKeyConversionTests {
    @Test func derivedKeysBecomeTheirTwoKeysAndKeepOpeningWhatTheySealed() async throws {
        let conninfo = try await TestDatabase.make()
        let connection = try await Connection.connect(to: conninfo)
        defer { connection.close() }
        // 5,001 keys of version 1 (more than two batches of 2,000), 50 made
        // before derivation and 50 of version 2; distinct material each.
        try await connection.query(PostgresQuery(unsafeSQL: """
            INSERT INTO subscriber_keys (pseudonym, subscriber_id, key)
            SELECT 'ps-' || i, 's' || i,
                   CASE WHEN i <= 5001 THEN '\\x01'::bytea || decode(md5(i::text) || md5('b' || i), 'hex')
                        WHEN i <= 5051 THEN decode(md5(i::text) || md5('b' || i), 'hex')
                        ELSE '\\x02'::bytea || decode(md5(i::text) || md5('b' || i) || md5('c' || i) || md5('d' || i), 'hex') END
            FROM generate_series(1, 5101) AS i
            """))
        try await connection.query(PostgresQuery(unsafeSQL: "INSERT INTO subscriber_key_conversion DEFAULT VALUES"))
        func keys() async throws -> [String: Data] {
            var keys: [String: Data] = [:]
            for row in try await connection.query("SELECT subscriber_id, key FROM subscriber_keys") {
                keys[try row.decode(String.self, at: 0)] = try row.decode(Data.self, at: 1)
            }
            return keys
        }
        let before = try await keys()
        var sealed: [String: (value: String, digest: String)] = [:]
        for (id, stored) in before {
            let key = try SubscriberKey(rawValue: stored)
            sealed[id] = (try key.seal("device-of-\(id)", pseudonym: "ps-\(id)"), key.digest(ofLedgerKey: "device:\(id)"))
        }

        let converted = try await SubscriberKeyConversion.run(conninfo: conninfo, logger: Logger(label: "test"))
        #expect(converted == 5001)
        let after = try await keys()
        #expect(after.count == 5101)
        for (id, stored) in after {
            let number = Int(id.dropFirst())!
            if number <= 5001 {
                #expect(stored.count == 65 && stored.first == 2, "\(id)")
            } else {
                #expect(stored == before[id], "\(id): only keys of version 1 change")
            }
            let key = try SubscriberKey(rawValue: stored)
            #expect(try key.open(sealed[id]!.value, pseudonym: "ps-\(id)") == "device-of-\(id)")
            #expect(key.digest(ofLedgerKey: "device:\(id)") == sealed[id]!.digest)
        }
        #expect(try await connection.query("SELECT 1 FROM subscriber_key_conversion").isEmpty, "done, and said so")
        // Once done, a start converts nothing, even a key of version 1
        // an older instance wrote since (still read as it is).
        try await connection.query(PostgresQuery(unsafeSQL: """
            INSERT INTO subscriber_keys VALUES ('ps-late', 'late', '\\x01'::bytea || decode(md5('late') || md5('late2'), 'hex'))
            """))
        #expect(try await SubscriberKeyConversion.run(conninfo: conninfo, logger: Logger(label: "test")) == 0)
    }
}
