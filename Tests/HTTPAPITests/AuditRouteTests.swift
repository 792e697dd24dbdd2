import Foundation
import Hummingbird
import HummingbirdTesting
import JSON
import Ledger
import Postgres
import HTTPAPI
@testable import SubledgerApp
import SubledgerAppTesting
import Testing

@Suite("Audit of reads and actions through the router")
struct AuditRouteTests {
    static let actorHeader = HTTPFields.Element.Name("Subledger-Actor")!

    @Test func readsAndActionsAreListedWithTheirActorAndNeverAKey() async throws {
        try await withApp { client, dependencies in
            _ = try await client.post("/v1/subscribers/hana/events", purchaseJSON("h1"))
            _ = try await client.get("/v1/subscribers/hana", key: Keys.support, headers: [Self.actorHeader: "Sam\tForged"])
            _ = try await client.get("/v1/subscribers/hana/history", key: Keys.support, headers: [Self.actorHeader: "Sam"])
            _ = try await client.get("/v1/subscribers/hana/explain", key: Keys.admin)
            _ = try await client.get("/v1/subscribers/other", key: Keys.support)
            let granted = try await client.grant("hana", #"{"entitlement": "pro", "duration": "P7D", "reason": "sorry"}"#, actor: "Ann")
            let id = try #require(granted.json["id"]?.string)
            _ = try await client.grant("hana", #"{"entitlement": "pro", "duration": "P7D", "reason": "sorry"}"#, key: Keys.support, actor: "Sam")
            _ = try await client.revoke("hana", grant: id, actor: "Ann")

            let listed = try await client.get("/v1/audit?subscriberId=hana", key: Keys.admin, headers: [Self.actorHeader: "Ann"])
            #expect(listed.status == .ok)
            let entries = listed.json["entries"]?.array ?? []
            let rows = entries.map { entry in
                [entry["method"]?.string ?? "", entry["path"]?.string ?? "", entry["action"]?.string ?? "",
                 entry["role"]?.string ?? "", entry["actor"]?.string ?? "-", String(entry["status"]?.int ?? 0)]
            }
            #expect(rows == [
                ["POST", "/v1/subscribers/{id}/events", "record_fact", "ingest", "-", "201"],
                ["GET", "/v1/subscribers/{id}", "state", "support", "Sam\\tForged", "200"],
                ["GET", "/v1/subscribers/{id}/history", "history", "support", "Sam", "200"],
                ["GET", "/v1/subscribers/{id}/explain", "explain", "admin", "-", "200"],
                ["POST", "/v1/subscribers/{id}/grants", "grant", "admin", "Ann", "201"],
                ["POST", "/v1/subscribers/{id}/grants", "grant", "support", "Sam", "403"],
                ["DELETE", "/v1/subscribers/{id}/grants/{grantId}", "revoke_grant", "admin", "Ann", "200"],
            ])
            #expect(entries.allSatisfy { $0["subscriberId"]?.string == "hana" })
            let fingerprints = Set(entries.compactMap { $0["keyFingerprint"]?.string })
            #expect(fingerprints == Set([Keys.ingest, Keys.support, Keys.admin].map { APIKeys.fingerprint(of: Array($0.utf8)) }))
            #expect(fingerprints.allSatisfy { $0.count == 12 })
            #expect(listed.json["nextCursor"] == .null)

            // The listing itself is audited, under the subscriber it named.
            let again = try await client.get("/v1/audit?subscriberId=hana&after=\(entries.last?["position"]?.int ?? 0)", key: Keys.admin)
            #expect(again.json["entries"]?.array.map { $0["action"]?.string } == ["read_audit"])
            #expect(again.json["entries"]?.array.first?["actor"]?.string == "Ann")

            // No key appears anywhere in the table, in any column.
            let dump = try await dependencies.pool.query("SELECT string_agg(a::text, ' ') FROM audit_entries a")
            let text = try dump.first?.decode(String?.self, at: 0) ?? ""
            #expect(text.contains("hana"))
            for key in [Keys.ingest, Keys.support, Keys.admin] { #expect(!text.contains(key)) }
            // Nor the raw id in a path.
            let paths = try await dependencies.pool.query("SELECT count(*) FROM audit_entries WHERE path LIKE '%hana%' OR path LIKE '%other%'")
            #expect(try paths.first?.decode(Int.self, at: 0) == 0)
        }
    }

    @Test func theAuditPagesByCursorAndOnlyAdminsReadIt() async throws {
        try await withApp { client, _ in
            for _ in 0..<5 { _ = try await client.get("/v1/subscribers/ivy", key: Keys.support) }
            #expect(try await client.get("/v1/audit", key: Keys.support).status == .forbidden)
            #expect(try await client.get("/v1/audit", key: Keys.ingest).status == .forbidden)
            #expect(try await client.get("/v1/audit", key: nil).status == .unauthorized)
            var seen: [Int64] = []
            var actions: [String] = []
            var after: String? = nil
            repeat {
                let page = try await client.get("/v1/audit?subscriberId=ivy&limit=2" + (after.map { "&after=\($0)" } ?? ""), key: Keys.admin)
                #expect(page.status == .ok)
                #expect((page.json["entries"]?.array.count ?? 0) <= 2)
                seen += page.json["entries"]?.array.compactMap { $0["position"]?.int } ?? []
                actions += page.json["entries"]?.array.compactMap { $0["action"]?.string } ?? []
                after = page.json["nextCursor"]?.string
            } while after != nil
            // The five reads (404s: ivy has no facts), then the listing's own
            // pages, each recorded once it is answered; each entry once, in order.
            #expect(actions.prefix(5) == ["state", "state", "state", "state", "state"])
            #expect(actions.dropFirst(5).allSatisfy { $0 == "read_audit" })
            #expect(seen == seen.sorted() && Set(seen).count == seen.count)
            let bad = try await client.get("/v1/audit?after=-3", key: Keys.admin)
            #expect(bad.status == .badRequest)
            #expect(bad.error.field == "after")
            #expect(try await client.get("/v1/audit?limit=0", key: Keys.admin).error.field == "limit")
        }
    }

    @Test func pruningDeletesWhatIsPastTheRetentionOnly() async throws {
        let dependencies = try await makeDependencies()
        defer { Task { await dependencies.pool.close() } }
        let trail = AuditTrail()
        let old = Date() - 86_400 * 500, recent = Date() - 86_400
        for at in [old, old + 1, recent] {
            trail.record(AuditTrail.Entry(at: at, role: "support", keyFingerprint: "abc", actor: nil, method: "GET",
                                          path: "/v1/subscribers/{id}", subscriberID: "jo", action: "state", status: 200))
        }
        #expect(try await trail.flush(to: dependencies.pool) == 3)
        let service = AuditService(trail: trail, pool: dependencies.pool, retention: AuditRetention(ISODuration(days: 400)),
                                   logger: dependencies.logger)
        #expect(await service.prune() == 2)
        let left = try await AuditStore(pool: dependencies.pool).list(subscriberID: "jo", after: 0, limit: 10)
        #expect(left.rows.count == 1)
        #expect(abs((left.rows.first?.at ?? .distantPast).timeIntervalSince(recent)) < 0.001)
        #expect(await service.prune() == 0)
    }

    @Test func anIdHoldingANullCharacterIsStoredWithoutStoppingItsBatch() async throws {
        try await withApp { client, dependencies in
            _ = try await client.get("/v1/subscribers/kim", key: Keys.support)
            _ = try await client.get("/v1/subscribers/a%00b", key: Keys.support)
            _ = try await client.get("/v1/subscribers/lee", key: Keys.support)
            let listed = try await client.get("/v1/audit", key: Keys.admin)
            #expect(listed.status == .ok)
            let ids = listed.json["entries"]?.array.compactMap { $0["subscriberId"]?.string } ?? []
            #expect(ids == ["kim", "a\u{FFFD}b", "lee"])
            // The listing wrote all three in one batch, then recorded itself:
            // at most that one entry left, nothing back in the buffer from a
            // failed batch (a background flush may have written it already).
            #expect(try await dependencies.auditTrail.flush(to: dependencies.pool) <= 1)
            #expect(dependencies.auditTrail.pendingCount == 0)
            let stored = try await dependencies.pool.query("SELECT count(*) FROM audit_entries")
            #expect(try stored.first?.decode(Int64.self, at: 0) == 4)
        }
    }
}
