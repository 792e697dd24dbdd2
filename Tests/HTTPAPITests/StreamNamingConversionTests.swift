import EventStore
import Foundation
import Hummingbird
import HummingbirdTesting
import Ledger
@testable import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
import TestSupport
import Testing

/// `SUBLEDGER_SECRET` keys the streams' pseudonyms, and a database named
/// under another scheme is renamed when it is prepared
/// (docs/decisions/0004-erasure-by-crypto-shredding.md, "The installation
/// secret"): every live subscriber reads as before, retried facts are still
/// duplicates, no live id's unkeyed pseudonym is left in a dump (so whoever
/// has the dump and a guessed id cannot confirm it), a transfer still names
/// its other party, and an id erased before the renaming is still refused.
///
/// It installs the process's secret, which names every stream, so it runs in
/// a process of its own (scripts/test, the `keyed` group).
@Suite(.serialized) struct StreamNamingConversionTests {
    static let secretA = "stream-naming-test-secret-a-0123456789abcdef"
    static let secretB = "stream-naming-test-secret-b-0123456789abcdef"

    @Test func aDatabaseIsRenamedUnderTheSecretAndErasedIdsStayRefused() async throws {
        defer { InstallationSecret.install(.none) }
        InstallationSecret.install(.none)
        try await withApp { client, dependencies in
            let conninfo = dependencies.pool.configuration.conninfo
            let subscribers = (0..<6).map { "named-\($0)-" + UUID().uuidString.lowercased() }
            let run = UInt32.random(in: 0...UInt32.max)
            try await client.writePasses(subscribers, run: run)
            // Transfers: 1 takes a purchase of 0 (both live), 3 takes one of 2 (2 is erased next).
            try await client.restorePass(of: 0, to: subscribers[1], run: run)
            try await client.restorePass(of: 2, to: subscribers[3], run: run)
            let erased = subscribers[2]
            #expect(try await Self.erase(erased, client) == .ok)
            let live = subscribers.filter { $0 != erased }
            func reads() async throws -> [String] { try await client.statesAndHistories(live) }
            let before = try await reads()
            #expect(before.contains { $0.contains(SubscriberPseudonyms.pseudonym(for: erased)) },
                    "3's history names the erased party of its transfer by its pseudonym")
            let unkeyed = subscribers.map { PseudonymScheme.unkeyed.pseudonym(for: $0) }
            let positions = try await logPositions(dependencies)

            // The first start with a secret renames every live stream, once.
            InstallationSecret.install(try InstallationSecret(Self.secretA))
            dependencies.ledgers.forget(subscribers)
            #expect(try await StreamNamingConversion.run(conninfo: conninfo, batch: 2, logger: dependencies.logger) == live.count)
            #expect(try await StreamNamingConversion.run(conninfo: conninfo, logger: dependencies.logger) == 0)
            #expect(try await reads() == before, "every live subscriber reads as before")
            #expect(try await logPositions(dependencies) == positions, "positions, versions and event ids stay")
            let schemeA = PseudonymScheme.current
            #expect(schemeA != .unkeyed)
            // A time transition's change id is keyed too: the feed of an erased subscriber cannot confirm a guessed id.
            let transition = ["sub-1", "Production", "pro", "entitlement_lost", "2025-03-01T00:00:00Z"]
            #expect(ChangeFold.digest(transition) == "d012b2b6ff7117cf30da647afb503d73", "HMAC-SHA256, computed apart")
            #expect(try await Self.naming(dependencies) == ["sha256 erased", schemeA.name + " in force"])

            // A dump holds no live id's unkeyed pseudonym; the erased one's stream keeps its name.
            let dump = try ChildProcess.run(["/usr/lib/postgresql/15/bin/pg_dump", "--data-only", "-d", conninfo])
            #expect(dump.status == 0, "pg_dump: \(dump.output.prefix(500))")
            for (subscriber, name) in zip(subscribers, unkeyed) where subscriber != erased {
                #expect(!dump.output.contains(name), "the dump still names \(subscriber) by its unkeyed pseudonym")
                #expect(dump.output.contains(schemeA.pseudonym(for: subscriber)))
            }
            #expect(dump.output.contains(unkeyed[2]), "the erased subscriber's stream keeps its name")

            // Retried facts are duplicates; the erased id is still refused, and still erased to admins only.
            let retried = try await client.post("/v1/subscribers/\(subscribers[4])/events", purchaseJSON(
                "t-\(run)-4-1", product: "com.example.pass.30d", at: "2025-02-01T00:00:00Z", device: "device-1-\(subscribers[4])"))
            #expect(retried.status == .ok && retried.json["duplicate"]?.bool == true, "\(retried.text)")
            try await Self.expectRefused(erased, client, run: run)
            // A new subscriber is named under the secret; a live one can still be erased.
            let newcomer = "named-new-" + UUID().uuidString.lowercased()
            #expect(try await client.post("/v1/subscribers/\(newcomer)/events", purchaseJSON("t-\(run)-new")).status == .created)
            #expect(try await dependencies.pool.query(
                "SELECT 1 FROM streams WHERE stream_id = \(SubscriberStreams.prefix + schemeA.pseudonym(for: newcomer))").count == 1)
            #expect(try await Self.erase(subscribers[5], client) == .ok)
            #expect(try await client.get("/v1/subscribers/\(subscribers[5])", key: Keys.admin).error.code == "erased")

            // Back without a secret, asked for: renamed again; the id erased under the secret is then unknown
            // (its name needs that secret), the one erased before it is still refused.
            InstallationSecret.install(.none)
            dependencies.ledgers.forget(subscribers + [newcomer])
            await #expect(throws: ConfigurationError.self, "a start without the secret does not rename the streams on its own") {
                try await StreamNamingConversion.run(conninfo: conninfo, logger: dependencies.logger)
            }
            #expect(try await StreamNamingConversion.run(conninfo: conninfo, batch: 3, fromAnotherSecret: true,
                                                         logger: dependencies.logger) == live.count)
            #expect(try await reads().enumerated().allSatisfy { index, text in index / 2 == 4 || text == before[index] })
            try await Self.expectRefused(erased, client, run: run)
            #expect(try await Self.naming(dependencies) == [schemeA.name + " erased", "sha256 in force"])
            #expect(ChangeFold.digest(transition) == "426b640d3c59767eaf7537eb657e5134", "SHA-256 without a secret, as before")
        }
    }

    static func erase(_ subscriber: String, _ client: any TestClientProtocol) async throws -> HTTPResponse.Status {
        var headers: HTTPFields = Keys.bearer(Keys.admin)
        headers[.contentType] = "application/json"
        return try await client.execute(uri: "/v1/subscribers/\(subscriber)", method: .delete, headers: headers,
                                        body: ByteBuffer(string: #"{"reason": "asked to be forgotten"}"#)).status
    }

    static func expectRefused(_ subscriber: String, _ client: any TestClientProtocol, run: UInt32,
                              sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let fact = try await client.post("/v1/subscribers/\(subscriber)/events", purchaseJSON("t-\(run)-after-erasure"), key: Keys.admin)
        #expect(fact.status == .gone && fact.error.code == "erased", "\(fact.text)", sourceLocation: sourceLocation)
        let masked = try await client.post("/v1/subscribers/\(subscriber)/events", purchaseJSON("t-\(run)-after-erasure"))
        #expect(masked.status == .notFound && masked.error.code == "subscriber_not_found", "\(masked.text)", sourceLocation: sourceLocation)
        #expect(try await client.get("/v1/subscribers/\(subscriber)", key: Keys.admin).error.code == "erased", sourceLocation: sourceLocation)
        #expect(try await client.get("/v1/subscribers/\(subscriber)/history", key: Keys.admin).error.code == "erased",
                sourceLocation: sourceLocation)
        #expect(try await client.get("/v1/subscribers/\(subscriber)", key: Keys.support).error.code == "subscriber_not_found",
                sourceLocation: sourceLocation)
    }

    static func naming(_ dependencies: AppDependencies) async throws -> [String] {
        try await dependencies.pool.query("""
            SELECT scheme || CASE WHEN in_force THEN ' in force' WHEN holds_erased THEN ' erased' ELSE '' END
            FROM stream_naming ORDER BY in_force, scheme
            """).map { try $0.decode(String.self, at: 0) }
    }
}
