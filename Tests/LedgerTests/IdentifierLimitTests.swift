import Foundation
import Testing
@testable import Ledger

/// docs/api.md, "Input limits": identifiers and text: identifiers are 1–200
/// bytes of UTF-8 without control characters, in NFC so that Swift and
/// PostgreSQL compare them alike; `reason` at most 1000 bytes without NUL;
/// `quantity` 1…1,000,000; a restore at most 1000 transactions.
struct IdentifierLimitTests {
    /// A JSON body from a dictionary, so any string (NUL included) is escaped right.
    func json(_ fields: [String: Any]) -> Data {
        try! JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])
    }

    func purchaseBody(_ overrides: [String: Any] = [:]) -> [String: Any] {
        ["type": "purchase", "transactionId": "t1", "productId": "p", "purchaseDate": "2024-01-01T00:00:00Z"]
            .merging(overrides) { _, new in new }
    }

    func refusal(_ code: String = "invalid_field", field: String, _ body: () throws -> Void) {
        #expect {
            try body()
        } throws: { error in
            guard let error = error as? LedgerError else { return false }
            return error.kind == .badRequest && error.code.rawValue == code && error.field == field && error.message.contains("'\(field)'")
        }
    }

    /// One grapheme cluster, 3001 bytes.
    static let stacked = "a" + String(repeating: "\u{301}", count: 1500)
    static let badIdentifiers = [String(repeating: "x", count: 201), stacked, String(repeating: "é", count: 101),
                                 "ab\u{0}c", "tab\there", "\u{7F}", "next\u{85}line"]
    static let goodIdentifiers = [String(repeating: "x", count: 200), String(repeating: "é", count: 100), "1", "🙂 ok"]

    @Test(arguments: ["transactionId", "originalTransactionId", "productId", "deviceId"])
    func identifiersAreAtMost200BytesWithoutControlCharacters(key: String) throws {
        for bad in Self.badIdentifiers {
            refusal(field: key) { _ = try FactRequest.parse(json: json(purchaseBody([key: bad]))) }
        }
        for good in Self.goodIdentifiers {
            let request = try FactRequest.parse(json: json(purchaseBody([key: good])))
            #expect(request.transactionID != nil)
        }
    }

    @Test func restoreAndImportIdentifiersAreCheckedToo() {
        for bad in Self.badIdentifiers {
            let restore = json(["deviceId": "D1", "transactions": [["transactionId": bad, "productId": "p", "purchaseDate": "2024-01-01T00:00:00Z"]]])
            refusal(field: "transactions[0].transactionId") { _ = try RestoreRequest.parse(json: restore) }
            let device = json(["deviceId": bad, "transactions": [] as [Any]])
            refusal(field: "deviceId") { _ = try RestoreRequest.parse(json: device) }
            refusal(field: "subscriberId") { _ = try FactRequest.parseImportLine(json(purchaseBody(["subscriberId": bad]))) }
            refusal(field: "subscriberId") { try InputLimits.validateSubscriberID(bad) }
        }
        refusal(field: "subscriberId") { try InputLimits.validateSubscriberID("") }
        refusal(field: "path") { try InputLimits.validateSubscriberID("\u{0}", field: "path") }
    }

    @Test func reasonIsAtMost1000BytesWithoutNUL() throws {
        let body = ["type": "refund", "transactionId": "t1"]
        for bad in [String(repeating: "x", count: 1001), String(repeating: "é", count: 501), "a\u{0}b"] {
            refusal(field: "reason") { _ = try FactRequest.parse(json: json(body.merging(["reason": bad]) { _, new in new })) }
        }
        for good in [String(repeating: "é", count: 500), "line one\nline two"] {
            let request = try FactRequest.parse(json: json(body.merging(["reason": good]) { _, new in new }))
            guard case .refund(let refund) = request else {
                Issue.record("not a refund: \(request)")
                return
            }
            #expect(refund.reason == good)
        }
    }

    // MARK: Requests built in code (App Store, receipts) meet the same limits

    @Test func theDeciderRefusesWhatTheParserWould() {
        var world = World()
        let day = date("2024-01-01T00:00:00Z")
        refusal(field: "transactionId") {
            try world.send(purchase(String(repeating: "x", count: 201), IDs.level2, at: day), to: "u", now: day)
        }
        refusal(field: "deviceId") { try world.send(purchase("t1", IDs.level2, at: day, device: Self.stacked), to: "u", now: day) }
        refusal(field: "purchaseDate") { try world.send(purchase("t1", IDs.level2, at: Date(timeIntervalSince1970: -1)), to: "u", now: day) }
        refusal(field: "expiresDate") {
            try world.send(purchase("t1", IDs.monthly, at: day, expires: Date(timeIntervalSince1970: 253_402_300_800)), to: "u", now: day)
        }
        for quantity in [0, 1_000_001] {
            refusal(field: "quantity") {
                try world.send(.purchase(.init(transactionID: "c1", productID: IDs.coins, purchaseDate: day, quantity: quantity)), to: "u", now: day)
            }
        }
        refusal(field: "reason") { try world.send(.refund(.init(transactionID: "t1", reason: "a\u{0}b")), to: "u", now: day) }
        let many = (0...1000).map { RestoreRequest.Transaction(transactionID: "r\($0)", productID: IDs.level2, purchaseDate: day) }
        refusal(field: "transactions") { try world.restore(RestoreRequest(deviceID: nil, transactions: many), to: "u", now: day) }
        refusal(field: "transactions[0].productId") {
            try world.restore(RestoreRequest(deviceID: nil, transactions: [.init(transactionID: "r", productID: "p\u{1}", purchaseDate: day)]),
                              to: "u", now: day)
        }
        // Not in NFC: the parsers normalise; a request built in code must too.
        refusal(field: "transactionId") { try world.send(purchase("cafe\u{301}", IDs.level2, at: day), to: "u", now: day) }
        #expect(world.streams.isEmpty)
    }

    // MARK: Canonically equivalent spellings

    @Test func equivalentSpellingsParseToTheSameBytes() throws {
        let precomposed = "caf\u{E9}", decomposed = "cafe\u{301}"
        #expect(precomposed == decomposed)  // Swift's ==; PostgreSQL compares bytes
        #expect(Array(precomposed.utf8) != Array(decomposed.utf8))
        for spelling in [precomposed, decomposed] {
            let request = try FactRequest.parse(json: json(purchaseBody(["transactionId": spelling, "productId": spelling + ".pass",
                                                                         "deviceId": spelling])))
            #expect(Array(request.transactionID?.utf8 ?? "".utf8) == Array(precomposed.utf8))
            #expect(Array(request.productID?.utf8 ?? "".utf8) == Array((precomposed + ".pass").utf8))
            guard case .purchase(let purchase) = request else {
                Issue.record("not a purchase: \(request)")
                return
            }
            #expect(Array(purchase.deviceID?.utf8 ?? "".utf8) == Array(precomposed.utf8))
            let restore = try RestoreRequest.parse(json: json([
                "deviceId": spelling,
                "transactions": [["transactionId": spelling, "originalTransactionId": spelling, "productId": "p", "purchaseDate": "2024-01-01T00:00:00Z"]],
            ]))
            #expect(restore.transactions.allSatisfy {
                Array($0.transactionID.utf8) == Array(precomposed.utf8) && Array($0.originalTransactionID.utf8) == Array(precomposed.utf8)
            })
            #expect(Array(restore.deviceID?.utf8 ?? "".utf8) == Array(precomposed.utf8))
            let (subscriberID, _) = try FactRequest.parseImportLine(json(purchaseBody(["subscriberId": spelling])))
            #expect(Array(subscriberID.utf8) == Array(precomposed.utf8))
            #expect(Array(try InputLimits.validateSubscriberID(spelling).utf8) == Array(precomposed.utf8))
        }
    }
}
