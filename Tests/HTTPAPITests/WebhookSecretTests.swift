import Foundation
import Hummingbird
import JSON
import HummingbirdTesting
import Ledger
import Logging
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
@testable import HTTPAPI
import Testing

/// Endpoint secrets are stored sealed, and can be rotated with an overlap.
@Suite("Webhook secrets", .timeLimit(.minutes(3)))
struct WebhookSecretTests {
    /// The stored column never holds the secret's bytes; deliveries are
    /// still signed with it.
    @Test func theStoredSecretIsSealedAndDeliveriesStillVerify() async throws {
        try await ChangeFixture.with { client, fixture in
            let receiver = ChangeReceiver()
            try await withChangeReceiver(receiver) { url in
                let created = try await client.post("/v1/webhooks", #"{"url": "\#(url)"}"#, key: Keys.admin)
                let id = try #require(created.json["id"]?.string)
                let secret = try #require(created.json["secret"]?.string)
                let stored = try await fixture.storedSecret(of: id)
                #expect(stored.hasPrefix("whseal1:d:"), "\(stored)")
                #expect(!stored.contains(secret) && !stored.contains(String(secret.dropFirst(6))))
                #expect(!stored.contains(Data(secret.utf8).base64EncodedString()))
                #expect(try await fixture.pool.query("SELECT count(*) FROM webhook_sealing_keys").first!.decode(Int.self, at: 0) == 1)

                #expect(try await client.post("/v1/subscribers/se/events", purchaseJSON("se1", product: "com.example.level2")).status == .created)
                try await fixture.project()
                let total = try await fixture.changes().count
                try await fixture.dispatch(fixture.dispatcher()) { await receiver.accepted.count == total }
                for request in await receiver.accepted {
                    #expect(WebhookSignature.isValid(header: request.signature ?? "", body: request.body, secret: secret))
                }
            }
        }
    }

    /// A secret stored plain (an earlier version) is sealed when the database
    /// is prepared, and one sealed with the database key is sealed again with
    /// the installation secret's once one is configured; the secret itself
    /// does not change.
    @Test func plainSecretsAreSealedWhenTheDatabaseIsPrepared() async throws {
        try await ChangeFixture.with { client, fixture in
            let receiver = ChangeReceiver()
            try await withChangeReceiver(receiver) { url in
                let created = try await client.post("/v1/webhooks", #"{"url": "\#(url)"}"#, key: Keys.admin)
                let id = try #require(created.json["id"]?.string)
                try await fixture.pool.query("UPDATE webhook_endpoints SET secret = 'whsec_plain_from_before' WHERE id = \(id)")
                let conninfo = fixture.pool.configuration.conninfo
                let logger = Logger(label: "sealing-tests")
                #expect(try await WebhookSecretSealing.sealStoredSecrets(secret: nil, conninfo: conninfo, logger: logger) == 1)
                let sealed = try await fixture.storedSecret(of: id)
                #expect(sealed.hasPrefix("whseal1:d:") && !sealed.contains("plain_from_before"))
                #expect(try await WebhookSecretSealing.sealStoredSecrets(secret: nil, conninfo: conninfo, logger: logger) == 0)

                let installation = try InstallationSecret(String(repeating: "k", count: 40))
                let source = WebhookSealingSource(installation)
                #expect(try await WebhookSecretSealing.sealStoredSecrets(secret: source.secret, conninfo: conninfo, logger: logger) == 1)
                #expect(try await fixture.storedSecret(of: id).hasPrefix("whseal1:s:"))

                #expect(try await client.post("/v1/subscribers/pl/events", purchaseJSON("pl1", product: "com.example.level2")).status == .created)
                try await fixture.project()
                var settings = fixture.dispatcher().settings
                settings.sealing = source
                let dispatcher = ChangeDispatcher(pool: fixture.pool, conninfo: conninfo, settings: settings)
                let total = try await fixture.changes().count
                try await fixture.dispatch(dispatcher) { await receiver.accepted.count == total }
                for request in await receiver.accepted {
                    #expect(WebhookSignature.isValid(header: request.signature ?? "", body: request.body, secret: "whsec_plain_from_before"))
                }
            }
        }
    }

    /// `POST /v1/webhooks/{id}/rotate-secret`: a new secret shown once; for
    /// 24 hours both signatures are sent (`t=…,v1=NEW,v1=OLD`), so a
    /// receiver verifying with either accepts; after that only the new one.
    @Test func aRotatedSecretSignsBesideTheOldOneForADay() async throws {
        try await ChangeFixture.with { client, fixture in
            let receiver = ChangeReceiver()
            try await withChangeReceiver(receiver) { url in
                let created = try await client.post("/v1/webhooks", #"{"url": "\#(url)"}"#, key: Keys.admin)
                let id = try #require(created.json["id"]?.string)
                let old = try #require(created.json["secret"]?.string)
                #expect(try await client.post("/v1/webhooks/\(id)/rotate-secret", "", key: Keys.support).status == .forbidden)
                let missing = try await client.post("/v1/webhooks/whk_nothing/rotate-secret", "", key: Keys.admin)
                #expect(missing.status == .notFound && missing.error.code == ErrorCode.webhookNotFound.rawValue)
                let reminders = try await client.post("/v1/webhooks/\(ReminderWebhook.endpointID)/rotate-secret", "", key: Keys.admin)
                #expect(reminders.status == .badRequest && reminders.error.field == "webhookId")

                let rotated = try await client.post("/v1/webhooks/\(id)/rotate-secret", "", key: Keys.admin)
                #expect(rotated.status == .ok, "\(rotated.text)")
                let new = try #require(rotated.json["secret"]?.string)
                #expect(new != old && new.hasPrefix("whsec_"))
                let until = try #require(rotated.json["previousSecretExpiresAt"]?.string.flatMap(RFC3339.parse))
                #expect(abs(until.timeIntervalSinceNow - 86_400) < 120)
                let listed = try await client.get("/v1/webhooks", key: Keys.admin)
                #expect(listed.json["webhooks"]?.array.first?["secret"] == nil)
                #expect(listed.json["webhooks"]?.array.first?["previousSecretExpiresAt"]?.string != nil)

                #expect(try await client.post("/v1/subscribers/ro/events", purchaseJSON("ro1", product: "com.example.level2")).status == .created)
                try await fixture.project()
                let first = try await fixture.changes().count
                try await fixture.dispatch(fixture.dispatcher()) { await receiver.accepted.count == first }
                for request in await receiver.accepted {
                    let header = request.signature ?? ""
                    #expect(header.components(separatedBy: "v1=").count == 3, "\(header)")
                    #expect(WebhookSignature.isValid(header: header, body: request.body, secret: new))
                    #expect(WebhookSignature.isValid(header: header, body: request.body, secret: old))
                }

                // A day later.
                try await fixture.pool.query("""
                    UPDATE webhook_endpoints SET previous_secret_expires_at = now() - interval '1 second' WHERE id = \(id)
                    """)
                #expect(try await client.post("/v1/subscribers/ro2/events", purchaseJSON("ro2", product: "com.example.level2")).status == .created)
                try await fixture.project()
                let all = try await fixture.changes().count
                try await fixture.dispatch(fixture.dispatcher()) { await receiver.accepted.count == all }
                for request in await receiver.accepted.filter({ $0.subscriberID == "ro2" }) {
                    let header = request.signature ?? ""
                    #expect(header.components(separatedBy: "v1=").count == 2, "\(header)")
                    #expect(WebhookSignature.isValid(header: header, body: request.body, secret: new))
                    #expect(!WebhookSignature.isValid(header: header, body: request.body, secret: old))
                }
            }
        }
    }
}

extension ChangeFixture {
    func storedSecret(of id: String) async throws -> String {
        try await pool.query("SELECT secret FROM webhook_endpoints WHERE id = \(id)").first!.decode(String.self, at: 0)
    }
}
