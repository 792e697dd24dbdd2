import Foundation
import Postgres
import SubledgerApp
import TestSupport
import Testing

/// The notice at start-up about a database that sorts text linguistically.
struct DatabaseCollationTests {
    @Test func aLinguisticCollationIsToldAndTheCCollationIsNot() async throws {
        let conninfo = try await TestDatabase.make()
        #expect(await PreparedDatabase.linguisticCollation(conninfo: conninfo) == nil)

        let name = "collation_icu_\(UInt32.random(in: 0...UInt32.max))"
        let admin = try await Connection.connect(to: conninfo)
        defer { admin.close() }
        try await admin.execute(unsafeSQL: "CREATE DATABASE \(name) LOCALE_PROVIDER icu ICU_LOCALE 'en-US' TEMPLATE template0")
        #expect(await PreparedDatabase.linguisticCollation(conninfo: Conninfo.replacingDatabase(in: conninfo, with: name)) == "icu")
        try await admin.execute(unsafeSQL: "DROP DATABASE \(name)")
    }
}
