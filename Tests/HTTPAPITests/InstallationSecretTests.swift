import Foundation
import Hummingbird
import HummingbirdTesting
import Ledger
@testable import SubledgerApp
import SubledgerAppTesting
import Testing

/// `SUBLEDGER_SECRET` and the API keys (docs/operations.md, "Secrets";
/// docs/api.md, "Erasure"): keys shorter than the minimum are
/// refused at start without being echoed; the audit's fingerprint of a key
/// is keyed by the secret; only an admin learns that a subscriber was erased.
@Suite struct InstallationSecretTests {
    static let secret = "a-test-secret-of-forty-characters-000000"

    @Test func aShortAPIKeyStopsTheStartWithoutEchoingIt() throws {
        let short = "fifteen-chars-x"
        #expect(short.count == APIKeys.minimumKeyLength - 1)
        do {
            _ = try SubledgerConfiguration(environment: ["SUBLEDGER_API_KEYS": "support:\(String(repeating: "s", count: 16)),admin:\(short)"])
            Issue.record("a 15-character key was accepted")
        } catch {
            #expect(error.variable == "SUBLEDGER_API_KEYS")
            #expect(error.message.contains("key 2 (role admin)") && error.message.contains("at least 16"), "\(error)")
            #expect(!error.description.contains(short))
        }
        let accepted = try SubledgerConfiguration(environment: ["SUBLEDGER_API_KEYS": "admin:\(String(repeating: "k", count: 16))"])
        #expect(accepted.apiKeys.role(for: String(repeating: "k", count: 16)) == .admin)
    }

    /// The fingerprint the audit keeps is the HMAC of the key under the
    /// secret's fingerprint key: not the key's plain SHA-256, which a dump's
    /// reader could match against guessed keys.
    @Test func theAuditKeepsAFingerprintKeyedByTheSecret() async throws {
        var dependencies = try await makeDependencies()
        let secret = try InstallationSecret(Self.secret)
        dependencies.configuration.secret = secret
        dependencies.configuration.apiKeys = APIKeys([(.ingest, Keys.ingest), (.support, Keys.support), (.admin, Keys.admin)],
                                                     secret: secret)
        let ready = dependencies
        try await withRouter(ready) { client in
            let subscriber = "fp-\(UUID().uuidString.lowercased())"
            #expect(try await client.post("/v1/subscribers/\(subscriber)/events", purchaseJSON("fp-\(UInt32.random(in: 0...UInt32.max))")).status == .created)
            #expect(try await client.get("/v1/subscribers/\(subscriber)", key: Keys.support).status == .ok)
            _ = try await ready.auditTrail.flush(to: ready.pool)
            let entries = try await client.get("/v1/audit?subscriberId=\(subscriber)", key: Keys.admin).json["entries"]?.array ?? []
            let read = entries.first { $0["role"]?.string == "support" }
            #expect(read?["keyFingerprint"]?.string == APIKeys.fingerprint(of: Array(Keys.support.utf8), secret: secret))
            #expect(read?["keyFingerprint"]?.string != APIKeys.fingerprint(of: Array(Keys.support.utf8), secret: .none))
        }
    }

    /// An erased subscriber reads, to support and ingest keys, exactly as an
    /// id that never had a fact: 404 `subscriber_not_found`, field and
    /// message alike; a new fact from the app's backend likewise. An admin
    /// sees `erased` (404 on reads, 410 on facts).
    @Test func onlyAnAdminLearnsThatASubscriberWasErased() async throws {
        try await withApp { client, _ in
            let erased = "gone-\(UUID().uuidString.lowercased())"
            let never = "never-\(UUID().uuidString.lowercased())"
            #expect(try await client.post("/v1/subscribers/\(erased)/events", purchaseJSON("er-\(UInt32.random(in: 0...UInt32.max))")).status == .created)
            #expect(try await client.delete("/v1/subscribers/\(erased)", #"{"reason": "account deleted"}"#, key: Keys.admin).status == .ok)
            for key in [Keys.support, Keys.ingest] {
                for path in ["", "/history", "/explain"] {
                    let read = try await client.get("/v1/subscribers/\(erased)\(path)", key: key)
                    let unknown = try await client.get("/v1/subscribers/\(never)\(path)", key: key)
                    guard unknown.status != .forbidden else { continue }
                    #expect(read.status == .notFound && read.error.code == "subscriber_not_found", "\(path): \(read.text)")
                    #expect(read.text.replacingOccurrences(of: erased, with: "ID") == unknown.text.replacingOccurrences(of: never, with: "ID"),
                            "\(path): an erased id reads as one never seen")
                }
            }
            let fact = try await client.post("/v1/subscribers/\(erased)/events", purchaseJSON("late-\(UInt32.random(in: 0...UInt32.max))"))
            #expect(fact.status == .notFound && fact.error.code == "subscriber_not_found", "\(fact.text)")
            #expect(!fact.text.contains("erased"))
            let admin = try await client.get("/v1/subscribers/\(erased)", key: Keys.admin)
            #expect(admin.status == .notFound && admin.error.code == "erased")
            let adminFact = try await client.post("/v1/subscribers/\(erased)/events", purchaseJSON("late2-\(UInt32.random(in: 0...UInt32.max))"),
                                                  key: Keys.admin)
            #expect(adminFact.status == .gone && adminFact.error.code == "erased")
        }
    }
}
