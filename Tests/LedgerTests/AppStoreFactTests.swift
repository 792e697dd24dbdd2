import Foundation
import Testing
@testable import Ledger

/// The facts the App Store integration needs beyond the HTTP contract's:
/// refunds reversed, renewals extended on the same transaction, and late or
/// out-of-order delivery never rolling state back.
struct AppStoreFactTests {
    let start = date("2024-01-01T00:00:00Z")
    let firstEnd = date("2024-02-01T00:00:00Z")

    func reversal(_ transactionID: String, at effectiveDate: Date) -> FactRequest {
        .refundReversal(.init(transactionID: transactionID, effectiveDate: effectiveDate, reason: "refund reversed"))
    }

    func extended(_ transactionID: String, original: String, to expires: Date, signed: Date) -> FactRequest {
        .renewal(.init(transactionID: transactionID, originalTransactionID: original, productID: IDs.monthly,
                       purchaseDate: start, expiresDate: expires, effectiveDate: signed))
    }

    // MARK: Refund reversed

    @Test func aReversedRefundRestoresAccessFromTheReversal() throws {
        var world = World()
        try world.send(purchase("a1", IDs.monthly, at: start, expires: firstEnd), to: "u", now: start)
        try world.send(refund("a1", at: date("2024-01-05T00:00:00Z")), to: "u", now: date("2024-01-05T00:00:00Z"))
        let decision = try world.send(reversal("a1", at: date("2024-01-07T00:00:00Z")), to: "u", now: date("2024-01-07T00:00:00Z"))
        #expect(decision.events.map(\.type) == ["refund_reversed"])
        #expect(decision.events.first?.idempotencyKey == "refund-reversed:a1:2024-01-07T00:00:00Z")
        #expect(world.state("u", at: date("2024-01-06T00:00:00Z")).subscriptions.map(\.status) == [.revoked])
        #expect(world.state("u", at: date("2024-01-08T00:00:00Z")).subscriptions.map(\.status) == [.active])
        #expect(world.state("u", at: date("2024-01-08T00:00:00Z")).entitlements.map(\.active) == [true])
        // Sent again: nothing new.
        #expect(try world.send(reversal("a1", at: date("2024-01-09T00:00:00Z")), to: "u", now: date("2024-01-09T00:00:00Z")).isDuplicate)
    }

    @Test func aReversalDeliveredBeforeItsRefundStillWins() throws {
        var world = World()
        try world.send(purchase("n1", IDs.level2, at: start), to: "u", now: start)
        try world.send(reversal("n1", at: date("2024-01-07T00:00:00Z")), to: "u", now: date("2024-01-07T00:00:00Z"))
        try world.send(refund("n1", at: date("2024-01-05T00:00:00Z")), to: "u", now: date("2024-01-08T00:00:00Z"))
        #expect(world.state("u", at: date("2024-01-06T00:00:00Z")).entitlements.map(\.active) == [false])
        #expect(world.state("u", at: date("2024-01-10T00:00:00Z")).entitlements.map(\.active) == [true])
    }

    @Test func aReversalDatedBeforeTheRefundDoesNotUndoIt() throws {
        var world = World()
        try world.send(purchase("n1", IDs.level2, at: start), to: "u", now: start)
        try world.send(refund("n1", at: date("2024-01-05T00:00:00Z")), to: "u", now: date("2024-01-05T00:00:00Z"))
        try world.send(reversal("n1", at: date("2024-01-03T00:00:00Z")), to: "u", now: date("2024-01-05T00:00:00Z"))
        #expect(world.state("u", at: date("2024-01-10T00:00:00Z")).entitlements.map(\.active) == [false])
    }

    @Test func aReversalOfAnUnknownTransactionIsNotFound() throws {
        var world = World()
        #expect(throws: LedgerError.self) { try world.send(reversal("zz", at: start), to: "u", now: start) }
    }

    @Test func reversalEventsRoundTrip() throws {
        let event = LedgerEvent.refundReversed(RefundReversal(transactionID: "a1", originalTransactionID: "a1", productID: IDs.monthly,
                                                              date: start, reason: "refund reversed", environment: .sandbox))
        #expect(try LedgerEvent.decode(type: event.type, schemaVersion: 1, data: event.encodedData()) == event)
        #expect(event.summary.contains("reversed"))
    }

    // MARK: Renewal extended

    @Test func anExtensionOfTheSameTransactionMovesTheEnd() throws {
        var world = World()
        try world.send(purchase("a1", IDs.monthly, at: start, expires: firstEnd), to: "u", now: start)
        let newEnd = date("2024-02-15T00:00:00Z")
        let decision = try world.send(extended("a1", original: "a1", to: newEnd, signed: date("2024-01-20T00:00:00Z")),
                                      to: "u", now: date("2024-01-20T00:00:00Z"))
        #expect(decision.events.map(\.type) == ["renewal_extended"])
        #expect(decision.events.first?.idempotencyKey == "renewal-extended:a1@2024-02-15T00:00:00Z")
        let after = world.state("u", at: date("2024-02-05T00:00:00Z"))
        #expect(after.subscriptions.map(\.status) == [.active])
        #expect(after.subscriptions.first?.expiresAt == newEnd)
        // Before the extension was granted, the old end was what was true.
        #expect(world.state("u", at: date("2024-01-10T00:00:00Z")).subscriptions.first?.expiresAt == firstEnd)
        // The same extension again, or a late copy with the older end: no change.
        #expect(try world.send(extended("a1", original: "a1", to: newEnd, signed: date("2024-01-20T00:00:00Z")), to: "u", now: newEnd).isDuplicate)
        #expect(try world.send(extended("a1", original: "a1", to: firstEnd, signed: date("2024-01-01T00:00:00Z")), to: "u", now: newEnd).isDuplicate)
        #expect(world.state("u", at: date("2024-02-05T00:00:00Z")).subscriptions.first?.expiresAt == newEnd)
        // A second extension to a later end is its own fact.
        let later = date("2024-03-01T00:00:00Z")
        #expect(try world.send(extended("a1", original: "a1", to: later, signed: date("2024-02-10T00:00:00Z")), to: "u", now: later).events.count == 1)
        #expect(world.state("u", at: date("2024-02-20T00:00:00Z")).subscriptions.first?.expiresAt == later)
    }

    @Test func aPurchaseRepeatedWithAnotherEndIsStillADuplicate() throws {
        var world = World()
        try world.send(purchase("a1", IDs.monthly, at: start, expires: firstEnd), to: "u", now: start)
        #expect(try world.send(purchase("a1", IDs.monthly, at: start, expires: date("2024-03-01T00:00:00Z")), to: "u", now: start).isDuplicate)
    }

    // MARK: Late and out-of-order delivery

    @Test func aLateOriginalPurchaseDoesNotRollBackARenewal() throws {
        var world = World()
        let renewedEnd = date("2024-03-01T00:00:00Z")
        try world.send(renewal("a2", original: "a1", IDs.monthly, at: firstEnd, expires: renewedEnd), to: "u", now: firstEnd)
        try world.send(purchase("a1", IDs.monthly, at: start, expires: firstEnd), to: "u", now: date("2024-02-02T00:00:00Z"))
        let state = world.state("u", at: date("2024-02-10T00:00:00Z"))
        #expect(state.subscriptions.map(\.status) == [.active])
        #expect(state.subscriptions.first?.expiresAt == renewedEnd)
    }

    @Test func aLateExpiryOfAnEarlierPeriodDoesNotEndTheRenewedOne() throws {
        var world = World()
        try world.send(purchase("a1", IDs.monthly, at: start, expires: firstEnd), to: "u", now: start)
        try world.send(renewal("a2", original: "a1", IDs.monthly, at: firstEnd, expires: date("2024-03-01T00:00:00Z")), to: "u", now: firstEnd)
        try world.send(.expiry(.init(.subscription(originalTransactionID: "a1", end: date("2024-01-15T00:00:00Z")), reason: "voluntary")),
                       to: "u", now: date("2024-02-02T00:00:00Z"))
        #expect(world.state("u", at: date("2024-02-10T00:00:00Z")).subscriptions.map(\.status) == [.active])
    }

    @Test func anEarlierAutoRenewChangeArrivingLaterDoesNotWin() throws {
        var world = World()
        try world.send(purchase("a1", IDs.monthly, at: start, expires: firstEnd, autoRenew: true), to: "u", now: start)
        try world.send(.autoRenewChange(.init(originalTransactionID: "a1", autoRenew: false, effectiveDate: date("2024-01-10T00:00:00Z"))),
                       to: "u", now: date("2024-01-10T00:00:00Z"))
        try world.send(.autoRenewChange(.init(originalTransactionID: "a1", autoRenew: true, effectiveDate: date("2024-01-05T00:00:00Z"))),
                       to: "u", now: date("2024-01-11T00:00:00Z"))
        #expect(world.state("u", at: date("2024-01-20T00:00:00Z")).subscriptions.map(\.autoRenew) == [false])
    }

    @Test func aBillingIssueSignedBeforeTheRenewalIsIgnored() throws {
        var world = World()
        try world.send(purchase("a1", IDs.monthly, at: start, expires: firstEnd), to: "u", now: start)
        try world.send(renewal("a2", original: "a1", IDs.monthly, at: date("2024-02-03T00:00:00Z"), expires: date("2024-03-03T00:00:00Z")),
                       to: "u", now: date("2024-02-03T00:00:00Z"))
        try world.send(.billingIssue(.init(originalTransactionID: "a1", gracePeriodExpiresDate: date("2024-02-16T00:00:00Z"),
                                           effectiveDate: firstEnd)), to: "u", now: date("2024-02-04T00:00:00Z"))
        let state = world.state("u", at: date("2024-02-20T00:00:00Z"))
        #expect(state.subscriptions.map(\.status) == [.active])
        #expect(state.subscriptions.first?.expiresAt == date("2024-03-03T00:00:00Z"))
    }
}

/// Reminders follow the end of access: in a billing grace period, the
/// prompt is due before the grace ends, not before the period's end.
/// https://developer.apple.com/documentation/appstoreservernotifications/graceperiodexpiresdate
struct GraceReminderTests {
    @Test func inGraceTheCoverageEndIsTheGraceEnd() throws {
        var world = World()
        let start = date("2024-01-01T00:00:00Z"), end = date("2024-02-01T00:00:00Z"), graceEnd = date("2024-02-17T00:00:00Z")
        try world.send(purchase("g1", IDs.monthly, at: start, expires: end), to: "u", now: start)
        try world.send(.billingIssue(.init(originalTransactionID: "g1", gracePeriodExpiresDate: graceEnd,
                                           effectiveDate: end + 3600)), to: "u", now: end + 3600)
        let ends = Coverage.ends(history: world.history("u"), subscriberID: "u", catalog: catalog, now: end + 7200)
        #expect(ends.map(\.end) == [graceEnd])
        let reminders = Coverage.desiredReminders(of: SubscriberLedger(subscriberID: "u", events: world.history("u")),
                                                  catalog: catalog, now: end + 7200)
        #expect(reminders.map(\.dueAt) == catalog.product(id: IDs.monthly)!.reminders.map { $0.subtracted(from: graceEnd) })
        #expect(!reminders.isEmpty)
    }
}
