import Foundation
import Testing
@testable import Ledger

struct RequestTests {
    func parse(_ json: String) throws(LedgerError) -> FactRequest {
        try FactRequest.parse(json: Data(json.utf8))
    }

    @Test func parsesAPurchase() throws {
        let request = try parse(#"""
            {"type": "purchase", "transactionId": "1001", "productId": "com.example.pass.30d",
             "purchaseDate": "2024-01-31T14:00:00.250+02:00", "deviceId": "ABC", "environment": "Sandbox",
             "quantity": 2, "autoRenew": false, "somethingElse": [1, 2]}
            """#)
        #expect(request.type == .purchase)
        #expect(request.transactionID == "1001")
        #expect(request.originalTransactionID == "1001")
        #expect(request.environment == .sandbox)
        guard case .purchase(let purchase) = request else {
            Issue.record("not a purchase: \(request)")
            return
        }
        #expect(purchase.purchaseDate == date("2024-01-31T12:00:00.250Z"))
        #expect(purchase.quantity == 2)
        #expect(purchase.autoRenew == false)
        #expect(purchase.deviceID == "ABC")
    }

    @Test(arguments: [
        ("[1]", "invalid_json", nil),
        ("{not json", "invalid_json", nil),
        (#"{"transactionId": "1"}"#, "missing_field", "type"),
        (#"{"type": "gift"}"#, "invalid_type", "type"),
        (#"{"type": 7}"#, "invalid_field", "type"),
        (#"{"type": "purchase", "productId": "p", "purchaseDate": "2024-01-01T00:00:00Z"}"#, "missing_field", "transactionId"),
        (#"{"type": "purchase", "transactionId": 1001, "productId": "p", "purchaseDate": "2024-01-01T00:00:00Z"}"#, "invalid_field", "transactionId"),
        (#"{"type": "purchase", "transactionId": "", "productId": "p", "purchaseDate": "2024-01-01T00:00:00Z"}"#, "invalid_field", "transactionId"),
        (#"{"type": "purchase", "transactionId": "1", "productId": "p"}"#, "missing_field", "purchaseDate"),
        (#"{"type": "purchase", "transactionId": "1", "productId": "p", "purchaseDate": "2024-01-01"}"#, "invalid_field", "purchaseDate"),
        (#"{"type": "purchase", "transactionId": "1", "productId": "p", "purchaseDate": 1704067200}"#, "invalid_field", "purchaseDate"),
        // Year 0 cannot be stored; before it was refused here it stalled the reminder projection.
        (#"{"type": "purchase", "transactionId": "1", "productId": "p", "purchaseDate": "0000-06-01T00:00:00Z"}"#, "invalid_field", "purchaseDate"),
        (#"{"type": "purchase", "transactionId": "1", "productId": "p", "purchaseDate": "1969-12-31T23:59:59Z"}"#, "invalid_field", "purchaseDate"),
        (#"{"type": "purchase", "transactionId": "1", "productId": "p", "purchaseDate": "2024-01-01T00:00:00Z", "quantity": 0}"#, "invalid_field", "quantity"),
        (#"{"type": "purchase", "transactionId": "1", "productId": "p", "purchaseDate": "2024-01-01T00:00:00Z", "quantity": 1.5}"#, "invalid_field", "quantity"),
        (#"{"type": "purchase", "transactionId": "1", "productId": "p", "purchaseDate": "2024-01-01T00:00:00Z", "autoRenew": "yes"}"#, "invalid_field", "autoRenew"),
        (#"{"type": "purchase", "transactionId": "1", "productId": "p", "purchaseDate": "2024-01-01T00:00:00Z", "autoRenew": 1}"#, "invalid_field", "autoRenew"),
        (#"{"type": "purchase", "transactionId": "1", "productId": "p", "purchaseDate": "2024-01-01T00:00:00Z", "environment": "Prod"}"#, "invalid_field", "environment"),
        (#"{"type": "purchase", "transactionId": "1", "productId": "p", "purchaseDate": "2024-01-01T00:00:00Z", "expiresDate": "2023-01-01T00:00:00Z"}"#, "invalid_field", "expiresDate"),
        (#"{"type": "renewal", "transactionId": "2", "productId": "p", "purchaseDate": "2024-01-01T00:00:00Z", "expiresDate": "2024-02-01T00:00:00Z"}"#, "missing_field", "originalTransactionId"),
        (#"{"type": "refund"}"#, "missing_field", "transactionId"),
        (#"{"type": "refund", "transactionId": "1", "revocationDate": "soon"}"#, "invalid_field", "revocationDate"),
        (#"{"type": "expiry"}"#, "missing_field", "originalTransactionId"),
        (#"{"type": "autoRenewChange", "originalTransactionId": "1"}"#, "missing_field", "autoRenew"),
    ] as [(String, String, String?)])
    func namesTheBadField(json: String, code: String, field: String?) {
        #expect {
            try parse(json)
        } throws: { error in
            guard let error = error as? LedgerError else { return false }
            return error.kind == .badRequest && error.code.rawValue == code && error.field == field
                && (field.map { error.message.contains("'\($0)'") } ?? true)
        }
    }

    @Test func nullCountsAsAbsent() throws {
        let request = try parse(#"{"type": "refund", "transactionId": "1", "revocationDate": null, "deviceId": null}"#)
        guard case .refund(let refund) = request else {
            Issue.record("not a refund: \(request)")
            return
        }
        #expect(refund.revocationDate == nil)
        // A refund names no device: see that a null deviceId is absent where one is read.
        let purchase = try parse(#"{"type": "purchase", "transactionId": "1", "productId": "p", "purchaseDate": "2024-01-01T00:00:00Z", "deviceId": null}"#)
        guard case .purchase(let purchase) = purchase else {
            Issue.record("not a purchase: \(purchase)")
            return
        }
        #expect(purchase.deviceID == nil)
    }

    @Test func parsesAnImportLine() throws {
        let line = #"{"subscriberId": "u1", "type": "refund", "transactionId": "9"}"#
        let (subscriber, request) = try FactRequest.parseImportLine(Data(line.utf8))
        #expect(subscriber == "u1")
        #expect(request.type == .refund)
        #expect(throws: LedgerError.missingField("subscriberId", "each import line names its subscriber")) {
            try FactRequest.parseImportLine(Data(#"{"type": "refund", "transactionId": "9"}"#.utf8))
        }
    }

    @Test func parsesARestore() throws {
        let request = try RestoreRequest.parse(json: Data(#"""
            {"deviceId": "D1", "transactions": [
              {"transactionId": "5", "productId": "com.example.level2", "purchaseDate": "2024-01-01T00:00:00Z"},
              {"transactionId": "7", "originalTransactionId": "6", "productId": "com.example.pro.monthly",
               "purchaseDate": "2024-02-01T00:00:00Z", "expiresDate": "2024-03-01T00:00:00Z"}]}
            """#.utf8))
        #expect(request.deviceID == "D1")
        #expect(request.transactions.map(\.originalTransactionID) == ["5", "6"])
        #expect(request.transactions[1].expiresDate == date("2024-03-01T00:00:00Z"))
    }

    @Test(arguments: [
        (#"{"deviceId": "D"}"#, "missing_field", "transactions"),
        (#"{"transactions": {}}"#, "invalid_field", "transactions"),
        (#"{"transactions": [7]}"#, "invalid_field", "transactions[0]"),
        (#"{"transactions": [{"transactionId": "1", "productId": "p", "purchaseDate": "2024-01-01T00:00:00Z"}, {"transactionId": "2", "productId": "p", "purchaseDate": "x"}]}"#, "invalid_field", "transactions[1].purchaseDate"),
        (#"{"transactions": [{"productId": "p", "purchaseDate": "2024-01-01T00:00:00Z"}]}"#, "missing_field", "transactions[0].transactionId"),
        (#"{"deviceId": 5, "transactions": []}"#, "invalid_field", "deviceId"),
    ] as [(String, String, String)])
    func restoreNamesTheBadField(json: String, code: String, field: String) {
        #expect {
            try RestoreRequest.parse(json: Data(json.utf8))
        } throws: { error in
            guard let error = error as? LedgerError else { return false }
            return error.code.rawValue == code && error.field == field && error.kind == .badRequest
        }
    }
}
