import Foundation
import Testing
@testable import Ledger

/// The JSON shapes the Server serves and stores, summaries and explanations.
struct OutputTests {
    let day = date("2024-01-01T00:00:00Z")

    func sampleWorld() throws -> World {
        var world = World()
        try world.send(purchase("p1", IDs.pass, at: day, device: "D1"), to: "u", now: day)
        try world.send(purchase("n1", IDs.level2, at: day), to: "u", now: day)
        try world.send(purchase("a1", IDs.monthly, at: day, expires: date("2024-02-01T00:00:00Z")), to: "u", now: day)
        try world.send(refund("a1", at: date("2024-01-10T00:00:00Z")), to: "u", now: date("2024-01-10T00:00:00Z"))
        return world
    }

    @Test func stateEncodesToTheContractShapeWithTheLedgerEncoder() throws {
        var state = try sampleWorld().state("u", at: date("2024-01-15T00:00:00.500Z"))
        state.reminders = [.init(id: "r1", dueAt: date("2024-01-24T00:00:00Z"), lead: ISODuration(days: 7), status: .pending)]
        // The state's dates follow the encoder's one date strategy: RFC 3339 in LedgerJSON's.
        let json = String(decoding: try LedgerJSON.makeEncoder().encode(state), as: UTF8.self)
        #expect(json == #"""
            {"at":"2024-01-15T00:00:00.500Z","devices":[{"firstSeenAt":"2024-01-01T00:00:00Z","id":"D1"}],\#
            "entitlements":[{"active":true,"expiresAt":null,"id":"level2","productId":"com.example.level2","source":"n1","store":"app_store"},\#
            {"active":true,"expiresAt":"2024-01-31T00:00:00Z","id":"pro","productId":"com.example.pass.30d","source":"p1","store":"app_store"}],\#
            "environment":"Production",\#
            "nonRenewingPeriods":[{"end":"2024-01-31T00:00:00Z","group":"pass","productId":"com.example.pass.30d","start":"2024-01-01T00:00:00Z","transactionId":"p1"}],\#
            "purchases":[{"originalTransactionId":"n1","productId":"com.example.level2","purchaseDate":"2024-01-01T00:00:00Z","quantity":1,"revokedAt":null,"store":"app_store","transactionId":"n1","type":"non-consumable"}],\#
            "reminders":[{"dueAt":"2024-01-24T00:00:00Z","id":"r1","lead":"P7D","status":"pending"}],"storeTransactions":[],"subscriberId":"u",\#
            "subscriptions":[{"autoRenew":false,"expiresAt":"2024-01-31T00:00:00Z","group":"pass","originalTransactionId":"p1","productId":"com.example.pass.30d","status":"active","store":"app_store","type":"non-renewing"},\#
            {"autoRenew":true,"expiresAt":"2024-02-01T00:00:00Z","group":"pro","originalTransactionId":"a1","productId":"com.example.pro.monthly","status":"revoked","store":"app_store","type":"auto-renewable"}]}
            """#)
    }

    @Test func eventsAreStoredAsCamelCaseJSONWithRFC3339Dates() throws {
        let event = LedgerEvent.purchased(TransactionFact(
            transactionID: "1001", originalTransactionID: "1001", productID: IDs.pass, productType: .nonRenewing, group: "pass",
            duration: ISODuration(days: 30), purchaseDate: date("2024-01-31T12:00:00Z"), deviceID: "ABC", environment: .sandbox))
        #expect(String(decoding: try event.encodedData(), as: UTF8.self) == #"""
            {"deviceId":"ABC","duration":"P30D","environment":"Sandbox","group":"pass","originalTransactionId":"1001",\#
            "productId":"com.example.pass.30d","productType":"non-renewing","purchaseDate":"2024-01-31T12:00:00Z","quantity":1,"source":"api","transactionId":"1001"}
            """#)
        #expect(event.type == "purchased")
        #expect(event.schemaVersion == 1)
        #expect(event.idempotencyKey == "1001")
        #expect(event.summary == "Purchased com.example.pass.30d (transaction 1001) on device ABC [Sandbox]")
    }

    @Test func unknownEventsDecodeAndAreIgnoredByTheFold() throws {
        let unknown = try LedgerEvent.decode(type: "loyalty_points_added", schemaVersion: 1, data: Data(#"{"points": 5}"#.utf8))
        #expect(unknown == .unknown(type: "loyalty_points_added", schemaVersion: 1, data: Data(#"{"points": 5}"#.utf8)))
        #expect(unknown.idempotencyKey == nil)
        var world = try sampleWorld()
        let before = world.state("u", at: date("2024-01-15T00:00:00Z"))
        world.append([unknown], to: "u", now: day)
        #expect(world.state("u", at: date("2024-01-15T00:00:00Z")) == before)
        #expect(throws: LedgerEventDecodingError.self) {
            try LedgerEvent.decode(type: "purchased", schemaVersion: 1, data: Data(#"{"transactionId": 5}"#.utf8))
        }
    }

    @Test func everyHistoryEventHasASummary() throws {
        let world = try sampleWorld()
        #expect(world.history("u").map { $0.event.summary } == [
            "Purchased com.example.pass.30d (transaction p1) on device D1",
            "Purchased com.example.level2 (transaction n1)",
            "Purchased com.example.pro.monthly (transaction a1), expires 2024-02-01T00:00:00Z",
            "Refunded com.example.pro.monthly (transaction a1), access ended 2024-01-10T00:00:00Z",
        ])
    }

    @Test func explainSaysWhyWithTheFacts() throws {
        let world = try sampleWorld()
        let explanation = SubscriberLedger(subscriberID: "u", events: world.history("u")).explanation(catalog: catalog, at: date("2024-02-15T00:00:00Z"))
        #expect(explanation.entitlements.map(\.id) == ["level2", "pro"])
        #expect(explanation.neverGranted == ["starter"])
        let pro = explanation.entitlements[1]
        #expect(pro.active == false)
        #expect(pro.reasons == [
            "Not active: non-renewing group 'pass' coverage ended at 2024-01-31T00:00:00Z (last period: com.example.pass.30d, transaction p1)",
            "Also: auto-renewable com.example.pro.monthly (original transaction a1, latest transaction a1) was refunded; access ended at 2024-01-10T00:00:00Z",
        ])
        #expect(pro.positions == [1, 3, 4])
        #expect(pro.transactionIDs == ["a1", "p1"])
        let json = String(decoding: try LedgerJSON.makeEncoder().encode(explanation), as: UTF8.self)
        #expect(json.hasPrefix(#"{"at":"2024-02-15T00:00:00Z","entitlements":[{"active":true,"#))
        #expect(json.contains(#""transactionIds":["a1","p1"]"#))
        #expect(json.hasSuffix(#""neverGranted":["starter"],"subscriberId":"u"}"#))
        #expect(explanation.entitlements[0].reasons.first?.hasPrefix("Active: non-consumable com.example.level2") == true)
        _ = try LedgerJSON.makeEncoder().encode(explanation)
    }

    @Test func lookupFindsATransactionsFacts() throws {
        var world = try sampleWorld()
        try world.send(renewal("a2", original: "a1", IDs.monthly, at: date("2024-02-01T00:00:00Z"), expires: date("2024-03-01T00:00:00Z")),
                       to: "u", now: date("2024-02-01T00:00:00Z"))
        #expect(world.history("u").facts(ofTransaction: "a1").map(\.position) == [3, 4, 5])
        #expect(world.history("u").facts(ofTransaction: "a2").map(\.position) == [5])
        #expect(world.history("u").facts(ofTransaction: "zzz").isEmpty)
    }
}
