import Foundation
import Postgres
import SubledgerApp
import SubledgerAppTesting
import TestSupport
import Testing

/// The notice at start-up about a database that sorts text linguistically,
/// on databases made for it (the test server's own default may be either).
struct DatabaseCollationTests {
    @Test func aLinguisticCollationIsToldAndTheCCollationIsNot() async throws {
        let conninfo = try await TestDatabase.make()
        let admin = try await Connection.connect(to: conninfo)
        defer { admin.close() }
        let suffix = UInt32.random(in: 0...UInt32.max)
        let created = [
            ("collation_c_\(suffix)", "LOCALE_PROVIDER libc LOCALE 'C'", nil),
            ("collation_icu_\(suffix)", "LOCALE_PROVIDER icu ICU_LOCALE 'en-US'", "icu"),
        ]
        for (name, locale, told) in created {
            try await admin.execute(unsafeSQL: "CREATE DATABASE \(name) \(locale) TEMPLATE template0")
            let answer = await PreparedDatabase.linguisticCollation(conninfo: Conninfo.replacingDatabase(in: conninfo, with: name))
            #expect(answer == told, "\(name)")
            try await admin.execute(unsafeSQL: "DROP DATABASE \(name)")
        }
    }
}
