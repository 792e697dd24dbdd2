import Foundation
import Testing
import TestSupport
@testable import Ledger

/// The hand-written state JSON is byte for byte what the ledger's
/// `JSONEncoder` writes for the same state.
struct StateJSONTests {
    static let awkward = ["plain", "with/slash", "quote \" here", #"back\slash"#, "tab\tnew\nline\r", "\u{0}\u{1}\u{8}\u{C}\u{1F}\u{7F}",
                          "héllo", "e\u{301}", "日本語", "👩‍👩‍👧‍👦", "\u{2028}\u{2029}", "", "com.example.pass.30d", "<tag>&amp;"]

    struct Generator {
        var random = SplitMix64(seed: 5)
        mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }
        mutating func text() -> String { StateJSONTests.awkward[int(0...StateJSONTests.awkward.count - 1)] + String(int(0...3)) }
        mutating func date() -> Date {
            // Whole seconds half the time (no fraction written), else milliseconds.
            let milliseconds = Double(int(-2_000_000_000...9_000_000_000)) * 1000 + (int(0...1) == 0 ? 0 : Double(int(1...999)))
            return Date(timeIntervalSince1970: milliseconds / 1000)
        }
        mutating func optionalDate() -> Date? { int(0...2) == 0 ? nil : date() }
        mutating func pick<T: CaseIterable>(_: T.Type) -> T { let all = Array(T.allCases); return all[int(0...all.count - 1)] }
        mutating func many<T>(_ make: (inout Generator) -> T) -> [T] { (0..<int(0...3)).map { _ in make(&self) } }

        mutating func state() -> SubscriberState {
            var state = SubscriberLedger(subscriberID: text()).state(at: date(), catalog: catalog)
            state.environment = pick(Ledger.Environment.self)
            state.entitlements = many { .init(id: $0.text(), active: $0.int(0...1) == 1, productID: $0.text(),
                                              expiresAt: $0.optionalDate(), source: $0.text()) }
            state.subscriptions = many { .init(group: $0.text(), productID: $0.text(), type: $0.pick(ProductType.self),
                                               status: $0.pick(SubscriptionStatus.self), expiresAt: $0.optionalDate(),
                                               autoRenew: $0.int(0...1) == 1, originalTransactionID: $0.text()) }
            state.nonRenewingPeriods = many { .init(group: $0.text(), productID: $0.text(), transactionID: $0.text(), start: $0.date(),
                                                    end: $0.date()) }
            state.purchases = many { .init(transactionID: $0.text(), originalTransactionID: $0.text(), productID: $0.text(),
                                           type: $0.pick(ProductType.self), purchaseDate: $0.date(), quantity: $0.int(-5...100_000),
                                           revokedAt: $0.optionalDate()) }
            state.devices = many { .init(id: $0.text(), firstSeenAt: $0.date()) }
            state.reminders = many { .init(id: $0.text(), dueAt: $0.date(), lead: ISODuration(days: $0.int(0...30)),
                                           status: $0.pick(ReminderStatus.self)) }
            return state
        }
    }

    @Test func generatedStatesEncodeAsTheLedgerEncoderDoes() throws {
        var generator = Generator()
        let encoder = LedgerJSON.makeEncoder()
        for _ in 0..<2000 {
            let state = generator.state()
            let expected = try encoder.encode(state)
            let written = state.encodedJSON()
            #expect(String(decoding: written, as: UTF8.self) == String(decoding: expected, as: UTF8.self))
            #expect(written.elementsEqual(expected))
        }
    }

    @Test func aFoldedStateEncodesAsTheLedgerEncoderDoes() throws {
        var world = World()
        let day = date("2024-01-01T00:00:00Z")
        try world.send(purchase("p1", IDs.pass, at: day, device: "D1"), to: "u", now: day)
        try world.send(purchase("n1", IDs.level2, at: day), to: "u", now: day)
        try world.send(purchase("a1", IDs.monthly, at: day, expires: date("2024-02-01T00:00:00Z")), to: "u", now: day)
        try world.send(refund("a1", at: date("2024-01-10T00:00:00Z")), to: "u", now: date("2024-01-10T00:00:00Z"))
        let state = try world.state("u", at: date("2024-01-15T00:00:00.500Z"))
        #expect(state.encodedJSON().elementsEqual(try LedgerJSON.makeEncoder().encode(state)))
    }
}
