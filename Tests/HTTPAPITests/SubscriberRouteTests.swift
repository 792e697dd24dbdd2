import Foundation
import Hummingbird
import HummingbirdTesting
import Ledger
import HTTPAPI
import SubledgerApp
import SubledgerAppTesting
import Testing

@Suite("Subscriber routes")
struct SubscriberRouteTests {
    @Test func purchaseIsRecordedThenAnsweredAsADuplicate() async throws {
        try await withApp { client, _ in
            let first = try await client.post("/v1/subscribers/alice/events", purchaseJSON("t1", device: "phone"))
            #expect(first.status == .created)
            #expect(first.headers[.contentType] == "application/json")
            let position = try #require(first.json["position"]?.int)
            #expect(first.json["duplicate"]?.bool == false)
            let subscriber = try #require(first.json["subscriber"])
            #expect(subscriber["subscriberId"]?.string == "alice")
            #expect(subscriber["nonRenewingPeriods"]?.array.count == 1)
            #expect(subscriber["nonRenewingPeriods"]?.array.first?["end"]?.string == "2025-01-31T00:00:00Z")
            #expect(subscriber["devices"]?.array.first?["id"]?.string == "phone")
            #expect(subscriber.keys == ["subscriberId", "at", "entitlements", "subscriptions", "nonRenewingPeriods",
                                        "purchases", "devices", "reminders", "environment", "storeTransactions"])

            let again = try await client.post("/v1/subscribers/alice/events", purchaseJSON("t1", device: "phone"))
            #expect(again.status == .ok)
            #expect(again.json["duplicate"]?.bool == true)
            #expect(again.json["position"]?.int == position)
            #expect(again.json["subscriber"]?["nonRenewingPeriods"]?.array.count == 1)

            // The admin key writes too.
            let admin = try await client.post("/v1/subscribers/alice/events", purchaseJSON("t2"), key: Keys.admin)
            #expect(admin.status == .created)
            #expect(admin.json["subscriber"]?["nonRenewingPeriods"]?.array.count == 2)
        }
    }

    /// A purchase's price, currency, offer and storefront are recorded and
    /// shown to support; a bad one is a 400 naming the field, and nothing is
    /// recorded (docs/api.md).
    @Test func aPriceIsRecordedAndShownAndABadOneIsA400() async throws {
        try await withApp { client, _ in
            let priced = #"{"type": "purchase", "transactionId": "p1", "productId": "com.example.pass.30d", "purchaseDate": "2025-01-01T00:00:00Z", "#
                + #""price": "4.99", "currency": "EUR", "offer": {"type": "promotional", "discount": "pay_as_you_go"}, "storefront": "FRA"}"#
            let first = try await client.post("/v1/subscribers/paula/events", priced)
            #expect(first.status == .created, "\(first.text)")
            let shown = try #require(first.json["subscriber"]?["storeTransactions"]?.array.first)
            #expect(shown["price"]?.string == "4.99" && shown["currency"]?.string == "EUR" && shown["storefront"]?.string == "FRA")
            #expect(shown["offerType"]?.int == 2 && shown["offerDiscount"]?.string == "pay_as_you_go")

            let bad = #"{"type": "purchase", "transactionId": "p2", "productId": "com.example.pass.30d", "purchaseDate": "2025-01-01T00:00:00Z", "price": "4,99", "currency": "EUR"}"#
            let refused = try await client.post("/v1/subscribers/paula/events", bad)
            #expect(refused.status == .badRequest && refused.error.field == "price", "\(refused.text)")
            let noCurrency = #"{"type": "purchase", "transactionId": "p2", "productId": "com.example.pass.30d", "purchaseDate": "2025-01-01T00:00:00Z", "price": "4.99"}"#
            #expect(try await client.post("/v1/subscribers/paula/events", noCurrency).error.field == "currency")
            let history = try await client.get("/v1/subscribers/paula/history", key: Keys.support).json["events"]?.array ?? []
            #expect(history.count == 1, "nothing recorded for the refused facts")
        }
    }

    @Test func writesNeedAnIngestOrAdminKey() async throws {
        try await withApp { client, _ in
            let missing = try await client.post("/v1/subscribers/alice/events", purchaseJSON("t1"), key: nil)
            #expect(missing.status == .unauthorized)
            #expect(missing.error.code == "unauthorized")
            let wrong = try await client.post("/v1/subscribers/alice/events", purchaseJSON("t1"), key: "not-a-key")
            #expect(wrong.status == .unauthorized)
            let support = try await client.post("/v1/subscribers/alice/events", purchaseJSON("t1"), key: Keys.support)
            #expect(support.status == .forbidden)
            #expect(support.error.code == "forbidden")
            let restore = try await client.post("/v1/subscribers/alice/restore", #"{"transactions": []}"#, key: Keys.support)
            #expect(restore.status == .forbidden)
            // Nothing was stored by the refused requests.
            #expect(try await client.get("/v1/subscribers/alice").status == .notFound)
        }
    }

    @Test func badInputIsA400NamingTheField() async throws {
        try await withApp { client, _ in
            let notJSON = try await client.post("/v1/subscribers/alice/events", "{\"type\": ")
            #expect(notJSON.status == .badRequest)
            #expect(notJSON.error.code == "invalid_json")
            let array = try await client.post("/v1/subscribers/alice/events", "[1, 2]")
            #expect(array.status == .badRequest)
            let missing = try await client.post("/v1/subscribers/alice/events", #"{"type": "purchase", "productId": "com.example.pass.30d", "purchaseDate": "2025-01-01T00:00:00Z"}"#)
            #expect(missing.status == .badRequest)
            #expect(missing.error.field == "transactionId")
            let badDate = try await client.post("/v1/subscribers/alice/events", purchaseJSON("t1", at: "yesterday"))
            #expect(badDate.status == .badRequest)
            #expect(badDate.error.field == "purchaseDate")
            let badType = try await client.post("/v1/subscribers/alice/events", #"{"type": "gift"}"#)
            #expect(badType.error.field == "type")

            let tooLong = String(repeating: "x", count: 201)
            let longID = try await client.post("/v1/subscribers/\(tooLong)/events", purchaseJSON("t1"))
            #expect(longID.status == .badRequest)
            #expect(longID.error.field == "subscriberId")
            let control = try await client.post("/v1/subscribers/a%01b/events", purchaseJSON("t1"))
            #expect(control.status == .badRequest)
            #expect(control.error.field == "subscriberId")
            let controlRead = try await client.get("/v1/subscribers/a%0Ab")
            #expect(controlRead.error.field == "subscriberId")
        }
    }

    @Test func aBodyOverOneMebibyteIs413() async throws {
        try await withApp { client, _ in
            let padding = String(repeating: " ", count: 1 << 20)
            let response = try await client.post("/v1/subscribers/alice/events", purchaseJSON("t1") + padding)
            #expect(response.status == .contentTooLarge)
            #expect(response.error.code == "body_too_large")
            // Just under the limit is fine.
            let body = purchaseJSON("t1")
            let fits = try await client.post("/v1/subscribers/alice/events", body + String(repeating: " ", count: (1 << 20) - body.utf8.count))
            #expect(fits.status == .created)
        }
    }

    @Test func ruleViolationsAndConflicts() async throws {
        try await withApp { client, _ in
            let unknown = try await client.post("/v1/subscribers/alice/events", purchaseJSON("t1", product: "com.example.nope"))
            #expect(unknown.status == .unprocessableContent)
            #expect(unknown.error.code == "unknown_product")
            #expect(unknown.error.field == "productId")

            let refundUnknown = try await client.post("/v1/subscribers/alice/events", #"{"type": "refund", "transactionId": "t404"}"#)
            #expect(refundUnknown.status == .notFound)

            #expect(try await client.post("/v1/subscribers/alice/events", purchaseJSON("t1")).status == .created)
            let otherProduct = try await client.post("/v1/subscribers/alice/events", purchaseJSON("t1", product: "com.example.level2"))
            #expect(otherProduct.status == .conflict)
            #expect(otherProduct.error.code == "transaction_conflict")

            let refund = try await client.post("/v1/subscribers/alice/events",
                                               #"{"type": "refund", "transactionId": "t1", "revocationDate": "2025-01-10T00:00:00Z"}"#)
            #expect(refund.status == .created)
            #expect(refund.json["subscriber"]?["nonRenewingPeriods"]?.array.isEmpty == true)
            let refundAgain = try await client.post("/v1/subscribers/alice/events",
                                                    #"{"type": "refund", "transactionId": "t1", "revocationDate": "2025-01-10T00:00:00Z"}"#)
            #expect(refundAgain.status == .ok)
            #expect(refundAgain.json["position"]?.int == refund.json["position"]?.int)
        }
    }

    @Test func restoreAnswersTheStateAndAddsTheDevice() async throws {
        try await withApp { client, _ in
            let body = #"{"deviceId": "ipad", "transactions": [{"transactionId": "L1", "productId": "com.example.level2", "purchaseDate": "2025-01-01T00:00:00Z"}]}"#
            let restored = try await client.post("/v1/subscribers/bob/restore", body)
            #expect(restored.status == .ok)
            #expect(restored.json["subscriberId"]?.string == "bob")
            #expect(restored.json["devices"]?.array.map { $0["id"]?.string } == ["ipad"])
            #expect(restored.json["entitlements"]?.array.first?["id"]?.string == "level2")
            #expect(restored.json["entitlements"]?.array.first?["active"]?.bool == true)
            // Again: same state, nothing new stored.
            let again = try await client.post("/v1/subscribers/bob/restore", body)
            #expect(again.status == .ok)
            let history = try await client.get("/v1/subscribers/bob/history")
            #expect(history.json["events"]?.array.map { $0["type"]?.string } == ["device_seen", "restored"])
        }
    }

    @Test func restoringAConsumableIs422AndBadItemsName400() async throws {
        try await withApp { client, _ in
            let consumable = try await client.post("/v1/subscribers/bob/restore",
                                                   #"{"transactions": [{"transactionId": "C1", "productId": "com.example.coins.100", "purchaseDate": "2025-01-01T00:00:00Z"}]}"#)
            #expect(consumable.status == .unprocessableContent)
            #expect(consumable.error.code == "not_restorable")
            #expect(consumable.error.field == "transactions[0].productId")
            let bad = try await client.post("/v1/subscribers/bob/restore",
                                            #"{"transactions": [{"transactionId": "C1", "productId": "com.example.level2"}]}"#)
            #expect(bad.status == .badRequest)
            #expect(bad.error.field == "transactions[0].purchaseDate")
            let missing = try await client.post("/v1/subscribers/bob/restore", #"{"deviceId": "x"}"#)
            #expect(missing.error.field == "transactions")
        }
    }

    @Test func keepOriginalRefusesARestoreOfAnotherSubscribersTransaction() async throws {
        try await withApp(restorePolicy: .keepOriginal) { client, _ in
            #expect(try await client.post("/v1/subscribers/alice/events", purchaseJSON("L1", product: "com.example.level2")).status == .created)
            let restore = try await client.post("/v1/subscribers/bob/restore",
                                                #"{"transactions": [{"transactionId": "L1", "productId": "com.example.level2", "purchaseDate": "2025-01-01T00:00:00Z"}]}"#)
            #expect(restore.status == .conflict)
            #expect(restore.error.code == "owned_by_other_subscriber")
            #expect(restore.error.field == "transactions[0].originalTransactionId")
            // The same through the events route.
            let fact = try await client.post("/v1/subscribers/bob/events",
                                             #"{"type": "restore", "transactionId": "L1", "productId": "com.example.level2", "purchaseDate": "2025-01-01T00:00:00Z"}"#)
            #expect(fact.status == .conflict)
            #expect(fact.error.code == "owned_by_other_subscriber")
            #expect(try await client.get("/v1/subscribers/bob").status == .notFound)
        }
    }

    @Test func stateNowAndAtAnInstant() async throws {
        try await withApp { client, _ in
            #expect(try await client.post("/v1/subscribers/carol/events", purchaseJSON("L1", product: "com.example.level2", at: "2025-03-01T00:00:00Z")).status == .created)
            let now = try await client.get("/v1/subscribers/carol", key: Keys.support)
            #expect(now.status == .ok)
            #expect(now.json["entitlements"]?.array.first?["active"]?.bool == true)
            let before = try await client.get("/v1/subscribers/carol?at=2025-02-01T00:00:00Z", key: Keys.admin)
            #expect(before.status == .ok)
            #expect(before.json["at"]?.string == "2025-02-01T00:00:00Z")
            #expect(before.json["entitlements"]?.array.isEmpty == true)
            #expect(before.json["purchases"]?.array.isEmpty == true)

            let bad = try await client.get("/v1/subscribers/carol?at=tomorrow")
            #expect(bad.status == .badRequest)
            #expect(bad.error.field == "at")
            let unknown = try await client.get("/v1/subscribers/nobody")
            #expect(unknown.status == .notFound)
            #expect(unknown.error.code == "subscriber_not_found")
            #expect(try await client.get("/v1/subscribers/carol", key: nil).status == .unauthorized)
        }
    }

    @Test func percentEncodedSubscriberIDs() async throws {
        try await withApp { client, _ in
            let created = try await client.post("/v1/subscribers/user%40example.com%2F1/events", purchaseJSON("t1"))
            #expect(created.status == .created)
            #expect(created.json["subscriber"]?["subscriberId"]?.string == "user@example.com/1")
            #expect(try await client.get("/v1/subscribers/user%40example.com%2F1").status == .ok)
        }
    }

    @Test func historyListsEveryEventWithASummary() async throws {
        try await withApp { client, _ in
            _ = try await client.post("/v1/subscribers/dave/events", purchaseJSON("t1", device: "phone"))
            _ = try await client.post("/v1/subscribers/dave/events", purchaseJSON("c1", product: "com.example.coins.100"))
            let history = try await client.get("/v1/subscribers/dave/history", key: Keys.support)
            #expect(history.status == .ok)
            let events = history.json["events"]?.array ?? []
            #expect(events.count == 2)
            #expect(events.map { $0["type"]?.string } == ["purchased", "purchased"])
            for event in events {
                #expect(event.keys == ["position", "type", "recordedAt", "data", "source", "summary"])
                #expect(event["source"]?.string == "api")
            }
            #expect(events[0]["data"]?["transactionId"]?.string == "t1")
            #expect(events[0]["summary"]?.string?.hasPrefix("Purchased com.example.pass.30d (transaction t1)") == true)
            #expect((events[0]["position"]?.int ?? 0) < (events[1]["position"]?.int ?? 0))
            #expect(try await client.get("/v1/subscribers/nobody/history").status == .notFound)
            #expect(try await client.get("/v1/subscribers/dave/history", key: nil).status == .unauthorized)
        }
    }

    @Test func explainSaysWhy() async throws {
        try await withApp { client, _ in
            _ = try await client.post("/v1/subscribers/erin/events", purchaseJSON("L1", product: "com.example.level2"))
            let explained = try await client.get("/v1/subscribers/erin/explain")
            #expect(explained.status == .ok)
            let entitlement = try #require(explained.json["entitlements"]?.array.first)
            #expect(entitlement["id"]?.string == "level2")
            #expect(entitlement["active"]?.bool == true)
            #expect(entitlement["reasons"]?.array.isEmpty == false)
            #expect(explained.json["neverGranted"]?.array.map(\.string) == ["pro"])
            let past = try await client.get("/v1/subscribers/erin/explain?at=2020-01-01T00:00:00Z")
            #expect(past.json["at"]?.string == "2020-01-01T00:00:00Z")
            #expect(try await client.get("/v1/subscribers/erin/explain?at=soon").error.field == "at")
            #expect(try await client.get("/v1/subscribers/nobody/explain").status == .notFound)
        }
    }

    @Test func unknownRoutesAndMethodsAnswerTheErrorShape() async throws {
        try await withApp { client, _ in
            let missing = try await client.get("/v1/nothing")
            #expect(missing.status == .notFound)
            #expect(missing.error.code != nil)
            let method = try await client.execute(uri: "/v1/subscribers/alice/events", method: .delete, headers: Keys.bearer(Keys.admin))
            #expect([.methodNotAllowed, .notFound].contains(method.status))
            #expect(method.json["error"]?["code"]?.string != nil)
        }
    }
}
