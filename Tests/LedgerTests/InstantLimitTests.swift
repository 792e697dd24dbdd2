import Foundation
import TestSupport
import Testing
@testable import JSON
@testable import Ledger

/// docs/api.md, "Input limits": instants: RFC 3339 with an offset, to the
/// millisecond, within 1970-01-01T00:00:00Z … 9999-12-31T23:59:59Z once the
/// offset is applied (given or computed); effective dates at most 24 hours
/// after the clock.
struct InstantLimitTests {
    func parse(_ json: String) throws(LedgerError) -> FactRequest {
        try FactRequest.parse(json: Data(json.utf8))
    }

    func refusal(_ code: String, field: String, _ body: () throws -> Void) {
        #expect {
            try body()
        } throws: { error in
            guard let error = error as? LedgerError else { return false }
            return error.kind == .badRequest && error.code.rawValue == code && error.field == field && error.message.contains("'\(field)'")
        }
    }

    static let purchaseFields = #""type": "purchase", "transactionId": "1", "productId": "p""#

    @Test(arguments: [
        // Year 10000 once the offset is applied: it was stored and then never read back.
        (#"{\#(purchaseFields), "purchaseDate": "9999-12-31T23:59:59-23:59"}"#, "purchaseDate"),
        (#"{\#(purchaseFields), "purchaseDate": "9999-12-31T23:59:59.500Z"}"#, "purchaseDate"),
        // Rounded to the millisecond, this is 10000-01-01T00:00:00Z.
        (#"{\#(purchaseFields), "purchaseDate": "2024-01-01T00:00:00Z", "expiresDate": "9999-12-31T23:59:59.9999Z"}"#, "expiresDate"),
        (#"{\#(purchaseFields), "purchaseDate": "2024-01-01T00:00:00Z", "expiresDate": "9999-12-31T23:30:00-01:00"}"#, "expiresDate"),
        (#"{\#(purchaseFields), "purchaseDate": "1970-01-01T00:59:59.999+01:00"}"#, "purchaseDate"),
        (#"{"type": "refund", "transactionId": "1", "revocationDate": "9999-12-31T23:59:59-00:01"}"#, "revocationDate"),
    ])
    func instantsOutsideTheRangeAreRefused(json: String, field: String) {
        refusal("invalid_field", field: field) { _ = try parse(json) }
    }

    @Test func restoredInstantsOutsideTheRangeAreRefused() {
        let json = #"{"transactions": [{"transactionId": "1", "productId": "p", "purchaseDate": "2024-01-01T00:00:00Z", "expiresDate": "9999-12-31T23:30:00-01:00"}]}"#
        refusal("invalid_field", field: "transactions[0].expiresDate") { _ = try RestoreRequest.parse(json: Data(json.utf8)) }
    }

    @Test func theEdgesOfTheRangeAreAccepted() throws {
        let request = try parse(#"{\#(Self.purchaseFields), "purchaseDate": "1970-01-01T01:00:00+01:00", "expiresDate": "9999-12-31T22:59:59-01:00"}"#)
        guard case .purchase(let purchase) = request else {
            Issue.record("not a purchase: \(request)")
            return
        }
        #expect(purchase.purchaseDate == InputLimits.earliestInstant)
        #expect(purchase.expiresDate == InputLimits.latestInstant)
        #expect(RFC3339.format(InputLimits.latestInstant) == "9999-12-31T23:59:59Z")
    }

    /// Random RFC 3339 strings, most of them near the edges of what a year of
    /// four digits and an offset of up to 23:59 can say.
    static func randomInstant(_ random: inout SplitMix64) -> String {
        func pick<T>(_ items: [T]) -> T { items[Int.random(in: 0..<items.count, using: &random)] }
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let year = pick([0, 1, 1, 1969, 1970, 1970, 2024, 9998, 9999, 9999, Int.random(in: 0...9999, using: &random)])
        let month = pick([1, 12, Int.random(in: 1...12, using: &random)])
        let day = pick([1, 28, 31, Int.random(in: 1...31, using: &random)])
        let hour = pick([0, 23, Int.random(in: 0...23, using: &random)])
        let minute = pick([0, 59, Int.random(in: 0...59, using: &random)])
        let second = pick([0, 59, Int.random(in: 0...59, using: &random)])
        let fractionDigits = pick([0, 0, 1, 3, 4, 6])
        let fraction = fractionDigits == 0 ? "" : "." + String((0..<fractionDigits).map { _ in pick(Array("9999950123")) })
        let offset = pick(["Z", "+23:59", "-23:59", "+00:01", "-00:01",
                           (Bool.random(using: &random) ? "+" : "-") + two(Int.random(in: 0...23, using: &random)) + ":"
                            + two(Int.random(in: 0...59, using: &random))])
        let yearText = String(repeating: "0", count: 4 - String(year).count) + String(year)
        return "\(yearText)-\(two(month))-\(two(day))T\(two(hour)):\(two(minute)):\(two(second))\(fraction)\(offset)"
    }

    @Test func everyInstantTheParserAcceptsFormatsAndParsesBack() {
        var random = SplitMix64(seed: 3339)
        var accepted = 0
        for _ in 0..<20_000 {
            let text = Self.randomInstant(&random)
            guard let date = RFC3339.parse(text) else { continue }
            accepted += 1
            #expect(RFC3339.parse(RFC3339.format(date)) == date, "\(text) → \(RFC3339.format(date))")
            // What a request accepts is also inside the range.
            if let request = try? parse(#"{\#(Self.purchaseFields), "purchaseDate": "\#(text)"}"#), case .purchase(let purchase) = request {
                #expect(InputLimits.earliestInstant <= purchase.purchaseDate && purchase.purchaseDate <= InputLimits.latestInstant,
                        "\(text)")
                #expect(RFC3339.parse(RFC3339.format(purchase.purchaseDate)) == purchase.purchaseDate, "\(text)")
            }
        }
        #expect(accepted > 5000)
    }

    // MARK: Computed instants

    @Test func aPeriodEndingAfterTheRangeIsRefused() throws {
        var world = World()
        let now = date("9999-12-20T00:00:00Z")
        refusal("invalid_field", field: "purchaseDate") { try world.send(purchase("p1", IDs.pass, at: now), to: "u", now: now) }
        #expect(world.history("u").isEmpty)
    }

    @Test func aStackedPeriodEndingAfterTheRangeIsRefused() throws {
        var world = World()
        for (id, day) in [("p1", "9999-10-01"), ("p2", "9999-11-01"), ("p3", "9999-12-01")] {
            let at = date(day + "T00:00:00Z")
            try world.send(purchase(id, IDs.pass, at: at), to: "u", now: at)
        }
        // Behind three periods this one would start 9999-12-30 and end in year 10000.
        let at = date("9999-12-02T00:00:00Z")
        refusal("invalid_field", field: "purchaseDate") { try world.send(purchase("p4", IDs.pass, at: at), to: "u", now: at) }
        let restore = RestoreRequest(deviceID: nil, transactions: [.init(transactionID: "p4", productID: IDs.pass, purchaseDate: at)])
        refusal("invalid_field", field: "transactions[0].purchaseDate") { try world.restore(restore, to: "u", now: at) }
        #expect(world.history("u").count == 3)
    }

    @Test func aReminderDueBeforeTheRangeIsRefused() throws {
        var world = World()
        let start = InputLimits.earliestInstant
        // The monthly product reminds P3D before its end: 1969-12-30.
        refusal("invalid_field", field: "expiresDate") {
            try world.send(purchase("a1", IDs.monthly, at: start, expires: date("1970-01-02T00:00:00Z")), to: "u", now: start)
        }
        #expect(world.history("u").isEmpty)
    }

    @Test func remindersOutsideTheRangeAreNeverScheduled() {
        // A history recorded before the limits were enforced.
        var world = World()
        let start = InputLimits.earliestInstant
        let fact = TransactionFact(transactionID: "a1", originalTransactionID: "a1", productID: IDs.monthly, productType: .autoRenewable,
                                   group: "pro", purchaseDate: start, expiresDate: date("1970-01-02T00:00:00Z"), autoRenew: false)
        world.append([.purchased(fact)], to: "u", now: start)
        #expect(Coverage.desiredReminders(history: world.history("u"), subscriberID: "u", catalog: catalog, now: start).isEmpty)
    }

    // MARK: Dates in the future

    @Test func anEffectiveDateMayBeUpTo24HoursAhead() throws {
        var world = World()
        let now = date("2024-01-01T00:00:00Z")
        try world.send(purchase("n1", IDs.level2, at: now + 86_400), to: "u", now: now)
        refusal("date_in_future", field: "purchaseDate") {
            try world.send(purchase("n2", IDs.level2, at: now + 86_400.001), to: "u", now: now)
        }
        refusal("date_in_future", field: "revocationDate") {
            try world.send(refund("n1", at: now + 90_000), to: "u", now: now)
        }
        refusal("date_in_future", field: "effectiveDate") {
            try world.send(.refundReversal(.init(transactionID: "n1", effectiveDate: now + 90_000)), to: "u", now: now)
        }
        let restore = RestoreRequest(deviceID: nil, transactions: [.init(transactionID: "n3", productID: IDs.level2, purchaseDate: now + 90_000)])
        refusal("date_in_future", field: "transactions[0].purchaseDate") { try world.restore(restore, to: "u", now: now) }
        #expect(world.history("u").count == 1)
    }

    @Test func subscriptionChangesMayNotBeDatedAhead() throws {
        var world = World()
        let now = date("2024-01-01T00:00:00Z")
        try world.send(purchase("a1", IDs.monthly, at: now, expires: date("2024-02-01T00:00:00Z")), to: "u", now: now)
        let ahead = now + 2 * 86_400
        for fact in [FactRequest.autoRenewChange(.init(originalTransactionID: "a1", autoRenew: false, effectiveDate: ahead)),
                     .billingIssue(.init(originalTransactionID: "a1", effectiveDate: ahead)),
                     renewalExtension(of: "a1", to: date("2024-03-01T00:00:00Z"), effective: ahead)] {
            refusal("date_in_future", field: "effectiveDate") { try world.send(fact, to: "u", now: now) }
        }
        refusal("date_in_future", field: "purchaseDate") {
            try world.send(renewal("a2", original: "a1", IDs.monthly, at: ahead, expires: date("2024-03-01T00:00:00Z")), to: "u", now: now)
        }
        #expect(world.history("u").count == 1)
    }

    func renewalExtension(of transactionID: String, to end: Date, effective: Date) -> FactRequest {
        .renewal(.init(transactionID: transactionID, originalTransactionID: transactionID, productID: IDs.monthly,
                       purchaseDate: date("2024-01-01T00:00:00Z"), expiresDate: end, effectiveDate: effective))
    }

    @Test func endsMayLieAnywhereInTheRange() throws {
        var world = World()
        let now = date("2024-01-01T00:00:00Z")
        try world.send(purchase("a1", IDs.monthly, at: now, expires: InputLimits.latestInstant), to: "u", now: now)
        try world.send(.expiry(.init(.subscription(originalTransactionID: "a1", end: date("2030-01-01T00:00:00Z")))), to: "u", now: now)
        #expect(world.history("u").count == 2)
    }

    /// `format`'s digit-by-digit path writes what joining padded parts
    /// writes, for instants across the years 0 to 9999 (with and without
    /// milliseconds) and on both sides of them, where it hands over.
    @Test func formattingDigitByDigitWritesWhatThePartsWrite() {
        var random = SplitMix64(seed: 3339)
        let yearZero = Double(CivilDate.daysFromCivil(year: 0, month: 1, day: 1)) * 86_400
        let year10000 = Double(RFC3339.firstInstantOfYear10000)
        var dates = [Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: yearZero),
                     Date(timeIntervalSince1970: yearZero - 0.001), Date(timeIntervalSince1970: year10000 - 0.001),
                     Date(timeIntervalSince1970: year10000), InputLimits.latestInstant]
        for _ in 0..<20_000 {
            let seconds = Double.random(in: (yearZero - 86_400 * 800)...(year10000 + 86_400 * 800), using: &random)
            let milliseconds = Bool.random(using: &random) ? seconds.rounded(.down) : (seconds * 1000).rounded() / 1000
            dates.append(Date(timeIntervalSince1970: milliseconds))
        }
        for date in dates {
            #expect(RFC3339.format(date) == RFC3339.formatByParts(date), "\(date.timeIntervalSince1970)")
        }
    }
}

