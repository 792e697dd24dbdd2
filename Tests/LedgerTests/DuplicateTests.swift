import Foundation
import Testing
@testable import Ledger

/// A duplicate decision carries the position of the fact's first copy, so a
/// repeat answers as the first time did; what the owner lookup needs comes
/// from the request.
struct DuplicateTests {
    let day = date("2024-01-01T00:00:00Z")
    let later = date("2024-01-20T00:00:00Z")

    @Test func aNewFactHasNoDuplicatePosition() throws {
        var world = World()
        let decision = try world.send(purchase("p1", IDs.pass, at: day), to: "u", now: day)
        #expect(!decision.isDuplicate)
        #expect(decision.duplicatePosition == nil)
    }

    @Test func aRepeatedPurchaseOrRenewalAnswersWithTheFirstCopy() throws {
        var world = World()
        try world.send(purchase("a1", IDs.monthly, at: day, expires: date("2024-02-01T00:00:00Z")), to: "u", now: day)
        try world.send(purchase("n1", IDs.level2, at: day), to: "u", now: day)
        let renewed = date("2024-02-01T00:00:00Z")
        try world.send(renewal("a2", original: "a1", IDs.monthly, at: renewed, expires: date("2024-03-01T00:00:00Z")), to: "u", now: renewed)
        try world.send(refund("n1", at: renewed), to: "u", now: renewed)
        let again = try world.send(purchase("a1", IDs.monthly, at: day, expires: date("2024-02-01T00:00:00Z")), to: "u", now: renewed)
        #expect(again.isDuplicate)
        #expect(again.duplicatePosition == 1)
        let renewedAgain = try world.send(renewal("a2", original: "a1", IDs.monthly, at: renewed, expires: date("2024-03-01T00:00:00Z")),
                                          to: "u", now: renewed)
        #expect(renewedAgain.duplicatePosition == 3)
    }

    @Test func aRepeatedRefundOrReversalAnswersWithItsOwnEvent() throws {
        var world = World()
        try world.send(purchase("n1", IDs.level2, at: day), to: "u", now: day)
        try world.send(purchase("n2", IDs.level2, at: day), to: "u", now: day)
        try world.send(refund("n1", at: later), to: "u", now: later)
        try world.send(refund("n2", at: later), to: "u", now: later)
        try world.send(.refundReversal(.init(transactionID: "n1", effectiveDate: later)), to: "u", now: later)
        try world.send(purchase("n3", IDs.level2, at: later), to: "u", now: later)
        #expect(try world.send(refund("n1", at: later), to: "u", now: later).duplicatePosition == 3)
        #expect(try world.send(refund("n2", at: later), to: "u", now: later).duplicatePosition == 4)
        #expect(try world.send(.refundReversal(.init(transactionID: "n1", effectiveDate: later)), to: "u", now: later)
            .duplicatePosition == 5)
    }

    @Test func aRepeatedSubscriptionChangeAnswersWithItsOwnEvent() throws {
        var world = World()
        let end = date("2024-02-01T00:00:00Z")
        try world.send(purchase("a1", IDs.monthly, at: day, expires: end), to: "u", now: day)
        let off = FactRequest.autoRenewChange(.init(originalTransactionID: "a1", autoRenew: false, effectiveDate: date("2024-01-05T00:00:00Z")))
        let on = FactRequest.autoRenewChange(.init(originalTransactionID: "a1", autoRenew: true, effectiveDate: date("2024-01-06T00:00:00Z")))
        let issue = FactRequest.billingIssue(.init(originalTransactionID: "a1", effectiveDate: end))
        let expiry = FactRequest.expiry(.init(.subscription(originalTransactionID: "a1", end: end)))
        let earlierExpiry = FactRequest.expiry(.init(.subscription(originalTransactionID: "a1", end: date("2024-01-25T00:00:00Z"))))
        for fact in [off, on, issue, expiry, earlierExpiry] { try world.send(fact, to: "u", now: end) }
        // The first copy of each, not the latest event of its kind.
        #expect(try world.send(off, to: "u", now: end).duplicatePosition == 2)
        #expect(try world.send(on, to: "u", now: end).duplicatePosition == 3)
        #expect(try world.send(issue, to: "u", now: end).duplicatePosition == 4)
        #expect(try world.send(expiry, to: "u", now: end).duplicatePosition == 5)
        #expect(try world.send(earlierExpiry, to: "u", now: end).duplicatePosition == 6)
    }

    /// A billing issue with no date of its own (an API fact) or one read from
    /// renewal info (`gracePeriodExpiresDate` of JWSRenewalInfoDecodedPayload,
    /// https://developer.apple.com/documentation/appstoreserverapi/jwsrenewalinfodecodedpayload,
    /// reported again on every reconciliation while the issue lasts) is news
    /// only when no open issue of the subscription has the same grace end.
    @Test func anUndatedOrReportedBillingIssueRepeatingTheOpenOneIsADuplicate() throws {
        var world = World()
        let end = date("2024-02-01T00:00:00Z")
        let grace = date("2024-02-17T00:00:00Z")
        try world.send(purchase("a1", IDs.monthly, at: day, expires: end), to: "u", now: day)
        let undated = FactRequest.billingIssue(.init(originalTransactionID: "a1", gracePeriodExpiresDate: grace))
        let first = try world.send(undated, to: "u", now: end)
        #expect(!first.isDuplicate)
        #expect(try world.send(undated, to: "u", now: end.addingTimeInterval(3600)).duplicatePosition == 2)
        let reported = FactRequest.billingIssue(.init(originalTransactionID: "a1", gracePeriodExpiresDate: grace,
                                                      effectiveDate: end.addingTimeInterval(7200), isReportedState: true))
        #expect(try world.send(reported, to: "u", now: end.addingTimeInterval(7200)).duplicatePosition == 2)
        // Another grace end is news, reported or not.
        let extended = FactRequest.billingIssue(.init(originalTransactionID: "a1", gracePeriodExpiresDate: grace.addingTimeInterval(86_400),
                                                      effectiveDate: end.addingTimeInterval(10_800), isReportedState: true))
        #expect(try !world.send(extended, to: "u", now: end.addingTimeInterval(10_800)).isDuplicate)
    }

    @Test func aRepeatedCoverageExpiryAnswersWithItsOwnEvent() throws {
        var world = World()
        try world.send(purchase("p1", IDs.pass, at: day), to: "u", now: day)
        let expiry = FactRequest.expiry(.init(.coverage(productID: IDs.pass, end: date("2024-01-31T00:00:00Z"))))
        try world.send(expiry, to: "u", now: later)
        try world.send(purchase("n1", IDs.level2, at: later), to: "u", now: later)
        #expect(try world.send(expiry, to: "u", now: later).duplicatePosition == 2)
    }

    @Test func aRestoreOfATransactionHereAnswersWithItsFirstRecording() throws {
        var world = World()
        try world.send(purchase("t1", IDs.level2, at: day), to: "alice", now: day)
        // Transferred to bob: his stream records it with transferred_in.
        try world.restore(RestoreRequest(deviceID: "D2", transactions: [.init(transactionID: "t1", productID: IDs.level2, purchaseDate: day)]),
                          to: "bob", now: later)
        try world.send(purchase("n1", IDs.level2, at: later), to: "bob", now: later)
        let restore = FactRequest.restore(.init(transaction: .init(transactionID: "t1", productID: IDs.level2, purchaseDate: day)))
        #expect(try world.send(restore, to: "bob", now: later).duplicatePosition == 2)
        #expect(try world.send(purchase("t1", IDs.level2, at: day), to: "bob", now: later).duplicatePosition == 2)
        // A whole restore request answers with the stream's last position.
        let request = RestoreRequest(deviceID: "D2", transactions: [.init(transactionID: "t1", productID: IDs.level2, purchaseDate: day)])
        #expect(try world.restore(request, to: "bob", now: later).duplicatePosition == 3)
    }

    @Test func requestsNameTheTransactionsWhoseOwnersTheDecisionNeeds() {
        #expect(purchase("t1", IDs.level2, at: day).referencedTransactionIDs == ["t1"])
        #expect(purchase("t2", IDs.monthly, at: day, original: "t1").referencedTransactionIDs == ["t1", "t2"])
        #expect(renewal("t2", original: "t1", IDs.monthly, at: day, expires: later).referencedTransactionIDs == ["t1", "t2"])
        #expect(refund("t2", at: day).referencedTransactionIDs == ["t2"])
        #expect(FactRequest.refund(.init(transactionID: "t2", originalTransactionID: "t1")).referencedTransactionIDs == ["t1", "t2"])
        #expect(FactRequest.expiry(.init(.coverage(productID: IDs.pass, end: later))).referencedTransactionIDs == [])
        #expect(FactRequest.billingIssue(.init(originalTransactionID: "t1")).referencedTransactionIDs == ["t1"])
        let restore = RestoreRequest(deviceID: nil, transactions: [
            .init(transactionID: "a", productID: IDs.level2, purchaseDate: day),
            .init(transactionID: "b2", originalTransactionID: "b1", productID: IDs.monthly, purchaseDate: day, expiresDate: later),
        ])
        #expect(restore.referencedTransactionIDs == ["a", "b1", "b2"])
    }
}
