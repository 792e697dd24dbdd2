import Foundation
import Hummingbird
import HummingbirdTesting
import JSON
import Ledger
import HTTPAPI
@testable import SubledgerApp
import SubledgerAppTesting
import Testing

extension TestClientProtocol {
    /// POSTs a grant as `key`, naming `actor` in `Subledger-Actor`.
    func grant(_ subscriber: String, _ json: String, key: String = Keys.admin, actor: String? = "Ann Support") async throws -> TestResponse {
        var headers = Keys.bearer(key)
        headers[.contentType] = "application/json"
        if let actor { headers[HTTPFields.Element.Name("Subledger-Actor")!] = actor }
        return try await execute(uri: "/v1/subscribers/\(subscriber)/grants", method: .post, headers: headers, body: ByteBuffer(string: json))
    }

    func revoke(_ subscriber: String, grant: String, reason: String? = "mistake", key: String = Keys.admin,
                actor: String? = "Ann Support") async throws -> TestResponse {
        var headers = Keys.bearer(key)
        headers[.contentType] = "application/json"
        if let actor { headers[HTTPFields.Element.Name("Subledger-Actor")!] = actor }
        let body = reason.map { #"{"reason": "\#($0)"}"# } ?? ""
        return try await execute(uri: "/v1/subscribers/\(subscriber)/grants/\(grant)", method: .delete, headers: headers,
                                 body: ByteBuffer(string: body))
    }

    /// The `pro` entitlement of `subscriber` at `at` (nil: not listed).
    func proEntitlement(_ subscriber: String, at: Date) async throws -> JSONValue? {
        let state = try await get("/v1/subscribers/\(subscriber)?at=\(RFC3339.format(at))", key: Keys.support)
        return state.json["entitlements"]?.array.first { $0["id"]?.string == "pro" }
    }
}

@Suite("Support grants through the router")
struct GrantRouteTests {
    @Test func aGrantIsActiveFromItsStartUntilItsEndAsOfAnyInstant() async throws {
        try await withApp { client, _ in
            let created = try await client.grant("carol", #"{"entitlement": "pro", "duration": "P30D", "reason": "outage apology"}"#)
            #expect(created.status == .created)
            let id = try #require(created.json["id"]?.string)
            let startsAt = try #require(created.json["startsAt"]?.string.flatMap(RFC3339.parse))
            let endsAt = try #require(created.json["endsAt"]?.string.flatMap(RFC3339.parse))
            #expect(endsAt == ISODuration(days: 30).added(to: startsAt))
            let now = created.json["subscriber"]?["entitlements"]?.array.first { $0["id"]?.string == "pro" }
            #expect(now?["active"]?.bool == true)
            #expect(now?["source"]?.string == "grant:\(id)")

            // Before the grant: nothing; from its start to just before its end: active; from its end: not.
            #expect(try await client.proEntitlement("carol", at: startsAt - 1) == nil)
            for instant in [startsAt, startsAt + 86_400, endsAt - 0.001] {
                let pro = try await client.proEntitlement("carol", at: instant)
                #expect(pro?["active"]?.bool == true, "active at \(RFC3339.format(instant))")
                #expect(pro?["expiresAt"]?.string == RFC3339.format(endsAt))
                #expect(pro?["source"]?.string == "grant:\(id)")
            }
            for instant in [endsAt, endsAt + 86_400] {
                #expect(try await client.proEntitlement("carol", at: instant)?["active"]?.bool == false)
            }

            let explain = try await client.get("/v1/subscribers/carol/explain", key: Keys.support)
            let reason = explain.json["entitlements"]?.array.first?["reasons"]?.array.first?.string ?? ""
            #expect(reason.contains("Ann Support (admin, key \(APIKeys.fingerprint(of: Array(Keys.admin.utf8))))"), "\(reason)")
            #expect(reason.contains("outage apology"))
            #expect(!reason.contains(Keys.admin))

            let history = try await client.get("/v1/subscribers/carol/history", key: Keys.support)
            #expect(history.json["events"]?.array.map { $0["type"]?.string } == ["granted"])
        }
    }

    @Test func aRevocationEndsTheGrantFromItsInstantOnly() async throws {
        try await withApp { client, _ in
            let endsAt = RFC3339.format(Date() + 200 * 86_400)
            let created = try await client.grant("dave", #"{"entitlement": "level2", "endsAt": "\#(endsAt)", "reason": "test account"}"#)
            #expect(created.status == .created)
            let id = try #require(created.json["id"]?.string)
            let startsAt = try #require(created.json["startsAt"]?.string.flatMap(RFC3339.parse))

            let revoked = try await client.revoke("dave", grant: id)
            #expect(revoked.status == .ok)
            #expect(revoked.json["duplicate"]?.bool == false)
            let revokedAt = try #require(revoked.json["revokedAt"]?.string.flatMap(RFC3339.parse))
            func level2(_ at: Date) async throws -> JSONValue? {
                try await client.get("/v1/subscribers/dave?at=\(RFC3339.format(at))", key: Keys.support)
                    .json["entitlements"]?.array.first { $0["id"]?.string == "level2" }
            }
            if revokedAt > startsAt {
                #expect(try await level2(startsAt)?["active"]?.bool == true)
            }
            #expect(try await level2(revokedAt)?["active"]?.bool == false)
            #expect(try await level2(revokedAt)?["expiresAt"]?.string == RFC3339.format(revokedAt))
            #expect(try await level2(revokedAt + 3600)?["active"]?.bool == false)

            let again = try await client.revoke("dave", grant: id)
            #expect(again.status == .ok)
            #expect(again.json["duplicate"]?.bool == true)
            #expect(again.json["revokedAt"]?.string == RFC3339.format(revokedAt))

            let history = try await client.get("/v1/subscribers/dave/history", key: Keys.support)
            #expect(history.json["events"]?.array.map { $0["type"]?.string } == ["granted", "grant_revoked"])
        }
    }

    @Test func badGrantsAreRefusedWithTheField() async throws {
        try await withApp { client, _ in
            let unknown = try await client.grant("erin", #"{"entitlement": "platinum", "duration": "P30D", "reason": "x"}"#)
            #expect(unknown.status == .unprocessableContent)
            #expect(unknown.error.code == "unknown_entitlement")
            #expect(unknown.error.field == "entitlement")
            let cases: [(String, String)] = [
                (#"{"entitlement": "pro", "duration": "30 days", "reason": "x"}"#, "duration"),
                (#"{"entitlement": "pro", "duration": "PT1H", "reason": "x"}"#, "duration"),
                (#"{"entitlement": "pro", "duration": "P0D", "reason": "x"}"#, "duration"),
                (#"{"entitlement": "pro", "duration": 30, "reason": "x"}"#, "duration"),
                (#"{"entitlement": "pro", "endsAt": "yesterday", "reason": "x"}"#, "endsAt"),
                (#"{"entitlement": "pro", "endsAt": "2001-01-01T00:00:00Z", "reason": "x"}"#, "endsAt"),
                (#"{"entitlement": "pro", "duration": "P1D", "endsAt": "2999-01-01T00:00:00Z", "reason": "x"}"#, "endsAt"),
                (#"{"entitlement": "pro", "reason": "x"}"#, "duration"),
                (#"{"entitlement": "pro", "duration": "P1D"}"#, "reason"),
                (#"{"entitlement": "pro", "duration": "P1D", "reason": "  "}"#, "reason"),
                (#"{"duration": "P1D", "reason": "x"}"#, "entitlement"),
            ]
            for (body, field) in cases {
                let response = try await client.grant("erin", body)
                #expect(response.status == .badRequest, "\(body)")
                #expect(response.error.field == field, "\(body)")
            }
            let notJSON = try await client.grant("erin", "{")
            #expect(notJSON.status == .badRequest)
            #expect(notJSON.error.code == "invalid_json")

            let missing = try await client.revoke("erin", grant: "no-such-grant")
            #expect(missing.status == .notFound)
            #expect(missing.error.code == "grant_not_found")
        }
    }

    @Test func onlyAdminKeysGrantAndRevoke() async throws {
        try await withApp { client, _ in
            let body = #"{"entitlement": "pro", "duration": "P7D", "reason": "x"}"#
            #expect(try await client.grant("frank", body, key: Keys.support).status == .forbidden)
            #expect(try await client.grant("frank", body, key: Keys.ingest).status == .forbidden)
            let created = try await client.grant("frank", body)
            let id = try #require(created.json["id"]?.string)
            #expect(try await client.revoke("frank", grant: id, key: Keys.support).status == .forbidden)
            #expect(try await client.revoke("frank", grant: id, key: Keys.ingest).status == .forbidden)
            #expect(try await client.proEntitlement("frank", at: Date())?["active"]?.bool == true)
        }
    }

    @Test func aGrantStandsBesideAPurchaseAndSchedulesNoReminder() async throws {
        try await withApp { client, dependencies in
            _ = try await client.post("/v1/subscribers/gina/events", purchaseJSON("p1", at: RFC3339.format(Date() - 86_400 * 20)))
            let created = try await client.grant("gina", #"{"entitlement": "pro", "duration": "P1Y", "reason": "goodwill"}"#)
            let id = try #require(created.json["id"]?.string)
            // The grant lasts longer than the 30-day pass: it speaks for the entitlement.
            let pro = try await client.proEntitlement("gina", at: Date())
            #expect(pro?["source"]?.string == "grant:\(id)")
            let explain = try await client.get("/v1/subscribers/gina/explain", key: Keys.support)
            let entitlement = explain.json["entitlements"]?.array.first { $0["id"]?.string == "pro" }
            #expect(entitlement?["reasons"]?.array.count == 2)
            #expect(entitlement?["transactionIds"]?.array.map(\.string) == ["p1"])
            // Reminders follow the pass alone.
            let ledger = try await SubscriberReader(dependencies).ledger(of: "gina")
            #expect(Coverage.ends(of: ledger, catalog: dependencies.catalog.catalog, now: Date()).allSatisfy { $0.productID == "com.example.pass.30d" })
        }
    }

    /// `SUBLEDGER_GRANT_MAX_DURATION` (default P1Y) bounds a grant given as a
    /// duration and as an end: beyond it, 400 naming the field and the maximum.
    @Test func aGrantLongerThanTheMaximumIsRefusedNamingTheFieldAndTheMaximum() async throws {
        try await withApp { client, _ in
            let now = Date()
            let refused: [(String, String)] = [
                (#"{"entitlement": "pro", "duration": "P1000Y", "reason": "x"}"#, "duration"),
                (#"{"entitlement": "pro", "duration": "P13M", "reason": "x"}"#, "duration"),
                (#"{"entitlement": "pro", "duration": "P367D", "reason": "x"}"#, "duration"),
                (#"{"entitlement": "pro", "endsAt": "\#(RFC3339.format(now + 367 * 86_400))", "reason": "x"}"#, "endsAt"),
                (#"{"entitlement": "pro", "endsAt": "2999-01-01T00:00:00Z", "reason": "x"}"#, "endsAt"),
            ]
            for (body, field) in refused {
                let response = try await client.grant("hank", body)
                #expect(response.status == .badRequest, "\(body): \(response.text)")
                #expect(response.error.code == "invalid_field" && response.error.field == field, "\(body): \(response.text)")
                #expect(response.json["error"]?["message"]?.string?.contains("P1Y") == true, "\(body): \(response.text)")
            }
            for body in [#"{"entitlement": "pro", "duration": "P1Y", "reason": "x"}"#, #"{"entitlement": "pro", "duration": "P12M", "reason": "x"}"#,
                         #"{"entitlement": "pro", "endsAt": "\#(RFC3339.format(now + 360 * 86_400))", "reason": "x"}"#] {
                let response = try await client.grant("hank", body)
                #expect(response.status == .created, "\(body): \(response.text)")
            }
            let history = try await client.get("/v1/subscribers/hank/history", key: Keys.support)
            #expect(history.json["events"]?.array.count == 3, "only the grants within the maximum were recorded")
        }
    }

    @Test func theMaximumIsConfigured() async throws {
        var configuration = SubledgerConfiguration()
        #expect(configuration.grantMaximumDuration == ISODuration(years: 1))
        configuration = try SubledgerConfiguration(environment: ["SUBLEDGER_GRANT_MAX_DURATION": "P30D"])
        #expect(configuration.grantMaximumDuration == ISODuration(days: 30))
        for bad in ["P0D", "forever", "PT1H", "P-1D"] {
            #expect(throws: ConfigurationError.self, "\(bad)") {
                try SubledgerConfiguration(environment: ["SUBLEDGER_GRANT_MAX_DURATION": bad])
            }
        }
    }
}
