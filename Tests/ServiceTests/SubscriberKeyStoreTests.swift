import Foundation
import Logging
@testable import Postgres
@testable import SubledgerApp
import TestSupport
import Testing

/// sql/0025 and `SubscriberKeyStore` on real databases: each installation
/// gets its own random secret, a subscriber gets one key however many
/// instances make it at once, and a destroyed key is gone for every reader.
@Suite struct SubscriberKeyStoreTests {
    /// Two databases migrated from empty (test databases are copies of one
    /// migrated template, so they share its secret; installations do not).
    @Test func eachInstallationHasItsOwnSecret() async throws {
        let template = try await TestDatabase.make()
        let admin = try await Connection.connect(to: template)
        var secrets: [Data] = []
        var pseudonyms: [String] = []
        let id = UUID().uuidString.lowercased()
        for _ in 0..<2 {
            let name = "secret_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
            try await admin.execute(unsafeSQL: "CREATE DATABASE \(name)")
            let conninfo = Conninfo.replacingDatabase(in: template, with: name)
            try await Migrator(migrations: try TestDatabase.migrations()).migrate(conninfo: conninfo)
            let pool = ConnectionPool(configuration: PoolConfiguration(conninfo: conninfo, maximumConnections: 2),
                                      logger: Logger(label: "subscriber-key-store-tests"))
            let rows = try await pool.query("SELECT secret FROM installation_secrets WHERE name = 'subscriber_pseudonyms'")
            #expect(rows.count == 1)
            secrets.append(try rows.first!.decode(Data.self, at: 0))
            let store = try await SubscriberKeyStore.load(pool: pool)
            pseudonyms.append(store.pseudonym(for: id))
            // The same installation names the same id the same way, whoever loads it.
            #expect(try await SubscriberKeyStore.load(pool: pool).pseudonym(for: id) == pseudonyms.last)
            await pool.close()
        }
        admin.close()
        #expect(secrets.allSatisfy { $0.count == 32 })
        #expect(secrets[0] != secrets[1])
        #expect(pseudonyms[0] != pseudonyms[1])
        #expect(pseudonyms.allSatisfy { !$0.contains(id) && $0.hasPrefix("ps-") })
    }

    @Test func oneKeyPerSubscriberMadeAtOnceAndDestroyedForAll() async throws {
        let dependencies = try await makeDependencies(poolSize: 8)
        // Separate stores stand for separate instances (separate caches).
        let stores = try await (0..<4).asyncMap { _ in try await SubscriberKeyStore.load(pool: dependencies.pool) }
        for round in 0..<20 {
            let id = "sub-\(round)-" + UUID().uuidString.lowercased()
            let pseudonym = stores[0].pseudonym(for: id)
            #expect(try await stores[0].existingKey(for: id) == nil)
            #expect(try await stores[0].subscriberID(forPseudonym: pseudonym) == nil)
            let keys = try await withThrowingTaskGroup(of: Data.self) { group in
                for store in stores { group.addTask { try await store.key(for: id).rawValue } }
                return try await group.reduce(into: [Data]()) { $0.append($1) }
            }
            #expect(Set(keys).count == 1, "round \(round): \(Set(keys).count) keys")
            #expect(try await stores[1].existingKey(for: id)?.rawValue == keys[0])
            #expect(try await stores[2].subscriberID(forPseudonym: pseudonym) == id)
            let stored = try await dependencies.pool.withConnection { connection in
                try await connection.query("SELECT count(*) FROM subscriber_keys WHERE subscriber_id = \(id)").first!.decode(Int64.self, at: 0)
            }
            #expect(stored == 1)

            let destroyed = try await dependencies.pool.withConnection { connection in
                try await SubscriberKeyStore.destroyKey(pseudonym: pseudonym, on: connection)
            }
            #expect(destroyed)
            for store in stores { store.forget(pseudonym: pseudonym) }
            #expect(try await stores[3].existingKey(for: id) == nil)
            #expect(try await stores[3].subscriberID(forPseudonym: pseudonym) == nil)
            // A fresh instance (empty cache) finds nothing either.
            let fresh = try await SubscriberKeyStore.load(pool: dependencies.pool)
            #expect(try await fresh.existingKey(for: id) == nil)
        }
        await dependencies.pool.close()
    }

    @Test func aStoredKeyOfTheWrongLengthIsRefused() async throws {
        let dependencies = try await makeDependencies(poolSize: 2)
        let refused = await #expect(throws: PostgresError.self) {
            try await dependencies.pool.withConnection { connection in
                try await connection.query("INSERT INTO subscriber_keys (pseudonym, subscriber_id, key) VALUES ('ps-x', 'x', \(Data(repeating: 1, count: 16)))")
            }
        }
        #expect(refused != nil)
        await dependencies.pool.close()
    }
}

extension Sequence {
    fileprivate func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}
