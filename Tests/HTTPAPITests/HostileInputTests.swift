import Foundation
import HTTPAPI
import Hummingbird
import HummingbirdTesting
import JSON
import Ledger
import SubledgerApp
import SubledgerAppTesting
import Testing

/// The hostile inputs found when the service was tried as an attacker would:
/// each is a 4xx naming the field, and nothing is stored.
@Suite struct HostileInputTests {
    static func purchase(_ fields: String) -> String {
        #"{"type": "purchase", "productId": "com.example.pass.30d", "#
            + fields + "}"
    }

    /// Asserts `body` posted for `subscriber` is refused with `code` on
    /// `field`, and that the subscriber has no facts afterwards.
    static func expectRefused(_ client: any TestClientProtocol, _ body: String, code: String, field: String?,
                              subscriber: String = "mallory", sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let response = try await client.post("/v1/subscribers/\(subscriber)/events", body)
        #expect(response.status == .badRequest, "\(response.text)", sourceLocation: sourceLocation)
        #expect(response.error.code == code, "\(response.text)", sourceLocation: sourceLocation)
        #expect(response.error.field == field, "\(response.text)", sourceLocation: sourceLocation)
        #expect(try await client.get("/v1/subscribers/\(subscriber)").status == .notFound, "nothing stored",
                sourceLocation: sourceLocation)
    }

    @Test func datesOutsideTheRangeOrFarInTheFutureAreRefused() async throws {
        try await withApp { client, _ in
            // The offset carries it into year 10000, which could not be read back.
            try await Self.expectRefused(client, Self.purchase(#""transactionId": "d1", "purchaseDate": "9999-12-31T23:59:59-23:59""#),
                                         code: "invalid_field", field: "purchaseDate")
            try await Self.expectRefused(client, Self.purchase(#""transactionId": "d2", "purchaseDate": "1969-12-31T23:59:59Z""#),
                                         code: "invalid_field", field: "purchaseDate")
            let nextWeek = RFC3339.format(Date() + 7 * 86_400)
            try await Self.expectRefused(client, Self.purchase(#""transactionId": "d3", "purchaseDate": "\#(nextWeek)""#),
                                         code: "date_in_future", field: "purchaseDate")
            // A period whose end leaves the range.
            try await Self.expectRefused(
                client, Self.purchase(#""transactionId": "d4", "purchaseDate": "\#(RFC3339.format(Date()))""#).replacingOccurrences(
                    of: "com.example.pass.30d", with: "com.example.pro.monthly").replacingOccurrences(
                    of: "}", with: #", "expiresDate": "10000-01-01T00:00:00Z"}"#),
                code: "invalid_field", field: "expiresDate")
            let at = try await client.get("/v1/subscribers/x?at=9999-12-31T23:59:59-23:59")
            #expect(at.status == .badRequest && at.error.field == "at")
        }
    }

    @Test func nulAndOversizedTextAreRefused() async throws {
        try await withApp { client, _ in
            try await Self.expectRefused(client, Self.purchase(#""transactionId": "t\u0000x", "purchaseDate": "2025-01-01T00:00:00Z""#),
                                         code: "invalid_field", field: "transactionId")
            try await Self.expectRefused(
                client, Self.purchase(#""transactionId": "t2", "deviceId": "phone\u0000", "purchaseDate": "2025-01-01T00:00:00Z""#),
                code: "invalid_field", field: "deviceId")
            // One character, 3 KB: limits are bytes, not characters.
            let marks = "a" + String(repeating: "\u{0301}", count: 1500)
            try await Self.expectRefused(
                client, Self.purchase(#""transactionId": "\#(marks)", "purchaseDate": "2025-01-01T00:00:00Z""#),
                code: "invalid_field", field: "transactionId")
            let refund = #"{"type": "refund", "transactionId": "t3", "reason": "x\u0000y"}"#
            try await Self.expectRefused(client, refund, code: "invalid_field", field: "reason")
            // In the path: refused, never cut at the NUL to answer about "T1".
            #expect(try await client.post("/v1/subscribers/owner/events",
                                          Self.purchase(#""transactionId": "T1", "purchaseDate": "2025-01-01T00:00:00Z""#)).status == .created)
            let cut = try await client.get("/v1/transactions/T1%00x", key: Keys.support)
            #expect(cut.status == .badRequest, "\(cut.text)")
            #expect(cut.error.field == "transactionId")
            let path = try await client.get("/v1/subscribers/own%00er", key: Keys.support)
            #expect(path.status == .badRequest && path.error.field == "subscriberId")
        }
    }

    /// "café" precomposed and decomposed are one id, as PostgreSQL will see it.
    @Test func unicodeEquivalentIdsAreOneId() async throws {
        try await withApp(restorePolicy: .keepOriginal) { client, _ in
            let composed = "caf\u{E9}", decomposed = "cafe\u{301}"
            #expect(try await client.post("/v1/subscribers/alice/events",
                                          Self.purchase(#""transactionId": "\#(composed)", "purchaseDate": "2025-01-01T00:00:00Z""#)).status == .created)
            let again = try await client.post("/v1/subscribers/alice/events",
                                              Self.purchase(#""transactionId": "\#(decomposed)", "purchaseDate": "2025-01-01T00:00:00Z""#))
            #expect(again.status == .ok && again.json["duplicate"]?.bool == true, "\(again.text)")
            let restore = #"{"transactions": [{"transactionId": "\#(decomposed)", "productId": "com.example.pass.30d", "purchaseDate": "2025-01-01T00:00:00Z"}]}"#
            let stolen = try await client.post("/v1/subscribers/bob/restore", restore)
            #expect(stolen.status == .conflict && stolen.error.code == "owned_by_other_subscriber", "\(stolen.text)")
        }
    }

    @Test func theBearerSchemeIsCaseInsensitive() async throws {
        try await withApp { client, _ in
            for scheme in ["bearer", "BEARER", "Bearer"] {
                let response = try await client.execute(uri: "/v1/subscribers/nobody", method: .get,
                                                        headers: [.authorization: "\(scheme) \(Keys.support)"])
                #expect(response.status == .notFound, "\(scheme)")
            }
        }
    }

    /// Without an effective date a retry of the same change is still a duplicate.
    @Test func changesWithoutAnEffectiveDateAreIdempotent() async throws {
        try await withApp { client, _ in
            let now = RFC3339.format(Date())
            let expires = RFC3339.format(Date() + 20 * 86_400)
            #expect(try await client.post("/v1/subscribers/ann/events", #"{"type": "purchase", "transactionId": "m1", "productId": "com.example.pro.monthly", "purchaseDate": "\#(now)", "expiresDate": "\#(expires)"}"#).status == .created)
            for body in [#"{"type": "autoRenewChange", "originalTransactionId": "m1", "autoRenew": false}"#,
                         #"{"type": "billingIssue", "originalTransactionId": "m1"}"#] {
                let first = try await client.post("/v1/subscribers/ann/events", body)
                #expect(first.status == .created, "\(first.text)")
                try await Task.sleep(for: .milliseconds(20))
                let retry = try await client.post("/v1/subscribers/ann/events", body)
                #expect(retry.status == .ok && retry.json["duplicate"]?.bool == true, "\(retry.text)")
                #expect(retry.json["position"]?.int == first.json["position"]?.int)
            }
        }
    }
}
