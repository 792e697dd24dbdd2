import Foundation
import Hummingbird
import HummingbirdTesting
import JSON
import Ledger
import Postgres
@testable import HTTPAPI
@testable import SubledgerApp
import SubledgerAppTesting
import Testing

/// Reads across subscribers narrowed to one are audited under it, and a
/// full audit buffer makes requests wait rather than lose their entries.
@Suite("Audit of reads across subscribers and of a full buffer", .timeLimit(.minutes(3)))
struct AuditCoverageTests {
    @Test func readsAcrossSubscribersAreAuditedUnderTheSubscriberTheyNameOrFind() async throws {
        try await withApp { client, _ in
            #expect(try await client.post("/v1/subscribers/mia/events", purchaseJSON("t-mia")).status == .created)
            for uri in ["/v1/changes?subscriberId=mia", "/v1/transactions/t-mia", "/v1/reminders?subscriberId=mia",
                        "/v1/appstore/notifications?subscriberId=mia"] {
                let response = try await client.get(uri, key: Keys.support)
                #expect(response.status == .ok, "\(uri): \(response.text)")
            }
            // Neither a lookup that finds nobody nor an unfiltered read is under mia.
            #expect(try await client.get("/v1/transactions/t-nobody", key: Keys.support).status == .notFound)
            #expect(try await client.get("/v1/changes", key: Keys.support).status == .ok)

            let listed = try await client.get("/v1/audit?subscriberId=mia", key: Keys.admin)
            let rows = (listed.json["entries"]?.array ?? []).map {
                [$0["method"]?.string ?? "", $0["path"]?.string ?? "", $0["action"]?.string ?? "", $0["role"]?.string ?? "",
                 String($0["status"]?.int ?? 0), $0["subscriberId"]?.string ?? ""]
            }
            #expect(rows == [
                ["POST", "/v1/subscribers/{id}/events", "record_fact", "ingest", "201", "mia"],
                ["GET", "/v1/changes", "read_changes", "support", "200", "mia"],
                ["GET", "/v1/transactions/{transactionId}", "lookup_transaction", "support", "200", "mia"],
                ["GET", "/v1/reminders", "list_reminders", "support", "200", "mia"],
                ["GET", "/v1/appstore/notifications", "list_notifications", "support", "200", "mia"],
            ])
            // The lookup that found nobody is recorded under no subscriber.
            let all = try await client.get("/v1/audit", key: Keys.admin)
            let lookups = (all.json["entries"]?.array ?? []).filter { $0["action"]?.string == "lookup_transaction" }
            #expect(lookups.map { $0["status"]?.int } == [200, 404])
            #expect(lookups.last?["subscriberId"] == .null)
            #expect(!(all.json["entries"]?.array ?? []).contains { $0["path"]?.string == "/v1/changes" && $0["subscriberId"] == .null },
                    "an unfiltered feed read names no subscriber: not audited")
        }
    }

    /// A buffer of 3 places while `audit_entries` is away (renamed): the
    /// entries stay in the buffer, the 4th request waits (counted) until the
    /// table is back and a flush makes room, then runs; 40 concurrent
    /// requests through a 3-place buffer all end up listed. None is lost.
    @Test func aFullBufferMakesRequestsWaitAndLosesNoEntry() async throws {
        let registry = SharedMetrics.registry
        func waitsCounted() -> Double {
            String(decoding: registry.emitToBuffer(), as: UTF8.self).split(separator: "\n")
                .first { $0.hasPrefix("subledger_audit_waits_total") }.flatMap { $0.split(separator: " ").last }.flatMap { Double($0) } ?? 0
        }
        let waitsBefore = waitsCounted()
        var dependencies = try await makeDependencies()
        let trail = AuditTrail(capacity: 3, admissionWait: .seconds(20))
        dependencies.auditTrail = trail
        let app = buildApplication(dependencies)
        let pool = dependencies.pool
        defer { Task { await pool.close() } }
        try await app.test(.router) { client in
            try await pool.query("ALTER TABLE audit_entries RENAME TO audit_entries_away")
            for _ in 0..<3 { #expect(try await client.get("/v1/subscribers/noor", key: Keys.support).status == .notFound) }
            let fourth = Task { try await client.get("/v1/subscribers/noor/history", key: Keys.support).status }
            try await waitUntil { trail.waitingCount == 1 }
            try await Task.sleep(for: .milliseconds(600))
            #expect(trail.waitingCount == 1, "the request still waits: the buffer is full and cannot be written")
            try await pool.query("ALTER TABLE audit_entries_away RENAME TO audit_entries")
            #expect(try await fourth.value == .notFound)

            // Many at once, a writer emptying the buffer meanwhile.
            let writer = Task {
                while !Task.isCancelled {
                    _ = try? await trail.flush(to: pool)
                    try? await Task.sleep(for: .milliseconds(30))
                }
            }
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for index in 0..<40 {
                    group.addTask {
                        try await client.get(index % 2 == 0 ? "/v1/changes?subscriberId=noor" : "/v1/subscribers/noor",
                                             key: Keys.support).status
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            writer.cancel()
            #expect(statuses.allSatisfy { $0 == .ok || $0 == .notFound })
            let listed = try await client.get("/v1/audit?subscriberId=noor&limit=1000", key: Keys.admin)
            let actions = listed.json["entries"]?.array.compactMap { $0["action"]?.string } ?? []
            #expect(actions.count == 3 + 1 + 40, "every request listed once: \(actions.count)")
            #expect(actions.filter { $0 == "read_changes" }.count == 20)
        }
        #expect(waitsCounted() > waitsBefore, "waits are counted on /metrics")
    }

    /// No room within the wait: 503 with Retry-After before the request
    /// ran (the fact is not recorded); nothing already buffered is lost.
    @Test func aBufferThatStaysFullRefusesWith503BeforeRunning() async throws {
        _ = SharedMetrics.registry
        var dependencies = try await makeDependencies()
        let trail = AuditTrail(capacity: 2, admissionWait: .milliseconds(300))
        dependencies.auditTrail = trail
        let app = buildApplication(dependencies)
        let pool = dependencies.pool
        defer { Task { await pool.close() } }
        try await app.test(.router) { client in
            try await pool.query("ALTER TABLE audit_entries RENAME TO audit_entries_away")
            #expect(try await client.get("/v1/subscribers/omar", key: Keys.support).status == .notFound)
            #expect(try await client.get("/v1/subscribers/omar", key: Keys.support).status == .notFound)
            let refused = try await client.post("/v1/subscribers/omar/events", purchaseJSON("t-omar"))
            #expect(refused.status == .serviceUnavailable)
            #expect(refused.headers[.retryAfter] == "2")
            #expect(refused.error.code == "database_unavailable")
            try await pool.query("ALTER TABLE audit_entries_away RENAME TO audit_entries")
            let listed = try await client.get("/v1/audit?subscriberId=omar", key: Keys.admin)
            #expect(listed.json["entries"]?.array.compactMap { $0["action"]?.string } == ["state", "state"])
            // Not recorded: the subscriber still has no facts.
            #expect(try await client.get("/v1/subscribers/omar/history", key: Keys.support).status == .notFound)
        }
    }

    @Test func reservationsAndRecordsOutsideTheRouter() async throws {
        _ = SharedMetrics.registry
        let trail = AuditTrail(capacity: 3, admissionWait: .milliseconds(100))
        for _ in 0..<3 { #expect(await trail.reserve()) }
        #expect(await trail.reserve() == false, "a 4th place is refused after the wait")
        for index in 0..<3 {
            trail.record(AuditTrail.Entry(at: Date(), role: "admin", keyFingerprint: "f", actor: nil, method: "GET",
                                          path: "/v1/subscribers/{id}", subscriberID: "s\(index)", action: "state", status: 200))
        }
        #expect(trail.pendingCount == 3)
        let off = AuditTrail(isEnabled: false)
        #expect(await off.reserve())
        off.record(AuditTrail.Entry(at: Date(), role: "admin", keyFingerprint: "f", actor: nil, method: "GET",
                                    path: "/v1/subscribers/{id}", subscriberID: "s", action: "state", status: 200))
        #expect(off.pendingCount == 0)
    }
}

/// Polls `condition` every 10 ms for up to 10 s.
func waitUntil(_ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(10)
    while try await !condition() {
        guard ContinuousClock.now < deadline else {
            Issue.record("the condition did not hold in time")
            return
        }
        try await Task.sleep(for: .milliseconds(10))
    }
}
