import Foundation
import Hummingbird
import HummingbirdTesting
import JSON
import Ledger
@testable import SubledgerApp
import SubledgerAppTesting
@testable import HTTPAPI
import Testing

@Suite("GET /v1/reminders")
struct ReminderRouteTests {
    @Test func listsRemindersAcrossSubscribersByDueTimeWithFilters() async throws {
        try await ReminderFixture.with { fixture in
            let now = Date()
            try await fixture.append("ann", [ReminderFixture.pass("a1", at: now - 25 * 86_400)])
            try await fixture.append("ben", [ReminderFixture.pass("b1", at: now - 86_400)])
            try await fixture.project()
            try await buildApplication(fixture.dependencies).test(.router) { client in
                func reminders(_ query: String, key: String = Keys.support) async throws -> [[String: Any]] {
                    let response = try await client.execute(uri: "/v1/reminders" + query, method: .get, headers: [.authorization: "Bearer \(key)"])
                    #expect(response.status == .ok)
                    let body = try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any]
                    return body?["reminders"] as? [[String: Any]] ?? []
                }
                let all = try await reminders("")
                #expect(all.count == 6)
                let due = all.map { $0["dueAt"] as? String ?? "" }
                #expect(due == due.sorted())
                #expect(Set(all.map { $0["subscriberId"] as? String ?? "" }) == ["ann", "ben"])
                #expect(Set(all[0].keys).isSuperset(of: ["id", "dueAt", "lead", "status", "subscriberId"]))

                #expect(try await reminders("?status=skipped").map { $0["subscriberId"] as? String } == ["ann"])
                let soon = RFC3339.format(now + 10 * 86_400)
                #expect(try await reminders("?status=pending&dueBefore=\(soon)", key: Keys.admin).count == 2)
                // One subscriber's, and a window of due times (dueAfter inclusive).
                let bens = try await reminders("?subscriberId=ben")
                #expect(bens.count == 3 && bens.allSatisfy { $0["subscriberId"] as? String == "ben" })
                #expect(Set(bens[0].keys).isSuperset(of: ["attempts", "lastError", "type", "group", "productId", "expiresAt"]))
                #expect(try await reminders("?dueAfter=\(soon)").map { $0["subscriberId"] as? String } == ["ben", "ben", "ben"])
                #expect(try await reminders("?subscriberId=ann&dueAfter=\(RFC3339.format(now))").count == 2)
                let first = all[0]["dueAt"] as? String ?? ""
                #expect(try await reminders("?dueAfter=\(first)&dueBefore=\(first)").isEmpty)
                #expect(try await reminders("?dueAfter=\(first)").count == 6)
                #expect(try await reminders("?subscriberId=nobody").isEmpty)

                for (query, field) in [("?status=late", "status"), ("?dueBefore=tomorrow", "dueBefore"), ("?limit=0", "limit"),
                                       ("?dueAfter=soon", "dueAfter"), ("?subscriberId=", "subscriberId")] {
                    let response = try await client.execute(uri: "/v1/reminders" + query, method: .get, headers: [.authorization: "Bearer \(Keys.support)"])
                    #expect(response.status == .badRequest)
                    let body = try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: [String: String]]
                    #expect(body?["error"]?["field"] == field)
                }
                #expect(try await client.execute(uri: "/v1/reminders", method: .get).status == .unauthorized)
                #expect(try await client.execute(uri: "/v1/reminders", method: .get, headers: [.authorization: "Bearer \(Keys.ingest)"]).status == .forbidden)
            }
        }
    }

    @Test func healthShowsTheProjectionLagAndTheStateShowsTheSubscribersReminders() async throws {
        try await ReminderFixture.with { fixture in
            try await fixture.append("cid", [ReminderFixture.pass("c1", at: Date() - 25 * 86_400)])
            try await buildApplication(fixture.dependencies).test(.router) { client in
                func lag(of consumer: String = "reminders") async throws -> Int? {
                    // A loaded machine can miss the health check's 3 s deadline (503): ask again.
                    for _ in 0..<3 {
                        let response = try await client.execute(uri: "/health", method: .get)
                        guard response.status == .ok else { continue }
                        let body = try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any]
                        return (body?["projections"] as? [String: Any])?[consumer] as? Int
                    }
                    return nil
                }
                #expect(try await lag() == 1)
                #expect(try await lag(of: "changes") == 1, "the change feed's consumer is reported like the projections")
                try await fixture.project()
                #expect(try await lag() == 0)
                try await fixture.feed()
                #expect(try await lag(of: "changes") == 0)

                let response = try await client.execute(uri: "/v1/subscribers/cid", method: .get, headers: [.authorization: "Bearer \(Keys.support)"])
                #expect(response.status == .ok)
                let state = try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any]
                let reminders = state?["reminders"] as? [[String: Any]] ?? []
                #expect(reminders.map { "\($0["lead"] ?? ""):\($0["status"] ?? "")" } == ["P7D:skipped", "P1D:pending", "P0D:pending"])
                #expect(Set(reminders.first?.keys.map { $0 } ?? []) == ["id", "dueAt", "lead", "status"])
            }
        }
    }
}

@Suite("Health under load")
struct HealthLoadTests {
    /// Callers that come while a probe runs share it: with the only
    /// connection busy, a hundred health checks make one probe, not a
    /// hundred that would each take a connection from the writes.
    @Test func concurrentHealthChecksShareOneProbe() async throws {
        let dependencies = try await makeDependencies(poolSize: 1)
        let health = HealthStore(dependencies)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                try await dependencies.pool.withConnection { _ in try await Task.sleep(for: .milliseconds(300)) }
            }
            try await Task.sleep(for: .milliseconds(50))
            for _ in 0..<100 {
                group.addTask { _ = try await health.projectionLags() }
            }
            try await group.waitForAll()
        }
        let probes = await health.probes
        #expect(probes <= 2, "\(probes) probes for 100 checks")
        await dependencies.pool.close()
    }
}
