import Foundation
import Testing
import JSON
@testable import Ledger

/// Worked examples, one per rule of docs/api.md ("The rules").
struct NonRenewingExamples {
    @Test func threePassesBoughtOnOneDayStackIntoContiguousPeriods() throws {
        var world = World()
        for (index, hour) in ["10", "11", "12"].enumerated() {
            try world.send(purchase("p\(index)", IDs.pass, at: date("2024-01-01T\(hour):00:00Z")), to: "u", now: date("2024-01-01T13:00:00Z"))
        }
        let state = world.state("u", at: date("2024-01-02T00:00:00Z"))
        #expect(state.nonRenewingPeriods.map { [$0.transactionID, RFC3339.format($0.start), RFC3339.format($0.end)] } == [
            ["p0", "2024-01-01T10:00:00Z", "2024-01-31T10:00:00Z"],
            ["p1", "2024-01-31T10:00:00Z", "2024-03-01T10:00:00Z"],
            ["p2", "2024-03-01T10:00:00Z", "2024-03-31T10:00:00Z"],
        ])
        #expect(state.entitlements == [.init(id: "pro", active: true, productID: IDs.pass, expiresAt: date("2024-03-31T10:00:00Z"), source: "p0")])
        #expect(state.subscriptions.map(\.status) == [.active])
        #expect(state.subscriptions.first?.expiresAt == date("2024-03-31T10:00:00Z"))
    }

    @Test func aRefundedPassLosesItsPeriodAndLaterOnesRestack() throws {
        var world = World()
        // Each fact is sent when it happened (no effective date may be more than a day ahead).
        for (id, at) in [("p0", "2024-01-01T10:00:00Z"), ("p1", "2024-01-05T10:00:00Z"), ("p2", "2024-01-06T10:00:00Z")] {
            try world.send(purchase(id, IDs.pass, at: date(at)), to: "u", now: date(at))
        }
        try world.send(refund("p0", at: date("2024-01-10T00:00:00Z")), to: "u", now: date("2024-01-10T00:00:00Z"))

        let before = world.state("u", at: date("2024-01-09T00:00:00Z"))
        #expect(before.nonRenewingPeriods.map(\.transactionID) == ["p0", "p1", "p2"])
        let after = world.state("u", at: date("2024-01-10T00:00:00Z"))
        // p1 may not start before its own purchase date; p2 follows it.
        #expect(after.nonRenewingPeriods.map { [$0.transactionID, RFC3339.format($0.start), RFC3339.format($0.end)] } == [
            ["p1", "2024-01-05T10:00:00Z", "2024-02-04T10:00:00Z"],
            ["p2", "2024-02-04T10:00:00Z", "2024-03-05T10:00:00Z"],
        ])
        #expect(after.entitlements.first?.source == "p1")
    }

    @Test func aPurchaseAfterAGapStartsAtItsOwnDate() throws {
        var world = World()
        try world.send(purchase("p0", IDs.pass, at: date("2024-01-01T00:00:00Z")), to: "u", now: date("2024-01-01T00:00:00Z"))
        try world.send(purchase("p1", IDs.passMonth, at: date("2024-03-31T00:00:00Z")), to: "u", now: date("2024-03-31T00:00:00Z"))
        let state = world.state("u", at: date("2024-04-01T00:00:00Z"))
        #expect(state.nonRenewingPeriods.map { [RFC3339.format($0.start), RFC3339.format($0.end)] } == [
            ["2024-01-01T00:00:00Z", "2024-01-31T00:00:00Z"],
            ["2024-03-31T00:00:00Z", "2024-04-30T00:00:00Z"],  // Mar 31 + P1M clamps to Apr 30
        ])
        let inGap = world.state("u", at: date("2024-02-15T00:00:00Z"))
        #expect(inGap.entitlements.map(\.active) == [false])
        #expect(inGap.nonRenewingPeriods.count == 1)
        #expect(inGap.subscriptions.map(\.status) == [.expired])
    }

    @Test func expiryIsAppendedOncePerCoverageEnd() throws {
        var world = World()
        try world.send(purchase("p0", IDs.pass, at: date("2024-01-01T00:00:00Z")), to: "u", now: date("2024-01-01T00:00:00Z"))
        #expect(Coverage.dueExpiries(history: world.history("u"), subscriberID: "u", catalog: catalog, now: date("2024-01-30T00:00:00Z")).isEmpty)
        let due = Coverage.dueExpiries(history: world.history("u"), subscriberID: "u", catalog: catalog, now: date("2024-02-01T00:00:00Z"))
        #expect(due.map(\.idempotencyKey) == ["expiry:pass@2024-01-31T00:00:00Z"])
        world.append(due, to: "u", now: date("2024-02-01T00:00:00Z"))
        #expect(Coverage.dueExpiries(history: world.history("u"), subscriberID: "u", catalog: catalog, now: date("2024-02-02T00:00:00Z")).isEmpty)
        // A new purchase makes a new coverage end, expired once in its turn.
        try world.send(purchase("p1", IDs.pass, at: date("2024-02-10T00:00:00Z")), to: "u", now: date("2024-02-10T00:00:00Z"))
        let next = Coverage.dueExpiries(history: world.history("u"), subscriberID: "u", catalog: catalog, now: date("2024-04-01T00:00:00Z"))
        #expect(next.map(\.idempotencyKey) == ["expiry:pass@2024-03-11T00:00:00Z"])
    }

    @Test func remindersPrecedeTheCoverageEnd() throws {
        var world = World()
        try world.send(purchase("p0", IDs.pass, at: date("2024-01-01T00:00:00Z")), to: "u", now: date("2024-01-01T00:00:00Z"))
        let reminders = Coverage.desiredReminders(history: world.history("u"), subscriberID: "u", catalog: catalog, now: date("2024-01-02T00:00:00Z"))
        #expect(reminders.map { [$0.type.rawValue, $0.lead.description, RFC3339.format($0.dueAt)] } == [
            ["renewal_reminder", "P7D", "2024-01-24T00:00:00Z"],
            ["renewal_reminder", "P1D", "2024-01-30T00:00:00Z"],
            ["expiry_prompt", "P0D", "2024-01-31T00:00:00Z"],
        ])
        #expect(reminders.last?.id == "rem:u:pass:2024-01-31T00:00:00Z:P0D")
        // Extending coverage moves every reminder (new ids, so the old ones get cancelled).
        try world.send(purchase("p1", IDs.pass, at: date("2024-01-03T00:00:00Z")), to: "u", now: date("2024-01-03T00:00:00Z"))
        let moved = Coverage.desiredReminders(history: world.history("u"), subscriberID: "u", catalog: catalog, now: date("2024-01-03T00:00:00Z"))
        #expect(moved.map(\.expiresAt) == Array(repeating: date("2024-03-01T00:00:00Z"), count: 3))
        #expect(Set(moved.map(\.id)).isDisjoint(with: reminders.map(\.id)))
        let body = String(decoding: try moved[0].webhookBody(), as: UTF8.self)
        #expect(body == #"{"dueAt":"2024-02-23T00:00:00Z","environment":"Production","expiresAt":"2024-03-01T00:00:00Z","group":"pass","id":"rem:u:pass:2024-03-01T00:00:00Z:P7D","lead":"P7D","productId":"com.example.pass.30d","subscriberId":"u","type":"renewal_reminder"}"#)
    }
}

struct AutoRenewableExamples {
    let start = date("2024-01-01T00:00:00Z")
    let firstEnd = date("2024-02-01T00:00:00Z")

    @Test func gracePeriodKeepsAccessUntilGraceEnd() throws {
        var world = World()
        try world.send(purchase("a1", IDs.monthly, at: start, expires: firstEnd), to: "u", now: start)
        try world.send(.billingIssue(.init(originalTransactionID: "a1", gracePeriodExpiresDate: date("2024-02-17T00:00:00Z"),
                                           effectiveDate: firstEnd)), to: "u", now: firstEnd)
        let inGrace = world.state("u", at: date("2024-02-10T00:00:00Z"))
        #expect(inGrace.subscriptions.map(\.status) == [.grace])
        #expect(inGrace.entitlements == [.init(id: "pro", active: true, productID: IDs.monthly, expiresAt: date("2024-02-17T00:00:00Z"), source: "a1")])
        #expect(world.state("u", at: date("2024-02-17T00:00:00Z")).subscriptions.map(\.status) == [.expired])
        // Billing recovers: the renewal wins.
        try world.send(renewal("a2", original: "a1", IDs.monthly, at: date("2024-02-12T00:00:00Z"), expires: date("2024-03-12T00:00:00Z")),
                       to: "u", now: date("2024-02-12T00:00:00Z"))
        #expect(world.state("u", at: date("2024-02-20T00:00:00Z")).subscriptions.map(\.status) == [.active])
    }

    /// A billing issue reported for a later period gives no grace to an
    /// earlier gap: a month paid to 1 April, a retry gap until the renewal
    /// of 5 April, and a billing issue dated 5 May (grace to 20 May) about
    /// that renewal. On 3 April the subscription has expired; on 10 May it
    /// is in grace.
    /// https://developer.apple.com/documentation/appstoreservernotifications/graceperiodexpiresdate
    @Test func aLaterPeriodsGraceDoesNotCoverAnEarlierGap() throws {
        var world = World()
        try world.send(purchase("g1", IDs.monthly, at: date("2026-03-01T00:00:00Z"), expires: date("2026-04-01T00:00:00Z")),
                       to: "g", now: date("2026-03-01T00:00:00Z"))
        try world.send(renewal("g2", original: "g1", IDs.monthly, at: date("2026-04-05T00:00:00Z"), expires: date("2026-05-05T00:00:00Z")),
                       to: "g", now: date("2026-04-05T00:00:00Z"))
        try world.send(.billingIssue(.init(originalTransactionID: "g1", gracePeriodExpiresDate: date("2026-05-20T00:00:00Z"),
                                           effectiveDate: date("2026-05-05T00:00:00Z"))), to: "g", now: date("2026-05-05T00:00:00Z"))
        #expect(world.state("g", at: date("2026-04-03T00:00:00Z")).subscriptions.map(\.status) == [.expired])
        #expect(world.state("g", at: date("2026-05-10T00:00:00Z")).subscriptions.map(\.status) == [.grace])
    }

    @Test func theLatestTransactionOfAnOriginalWins() throws {
        var world = World()
        try world.send(purchase("a1", IDs.monthly, at: start, expires: firstEnd), to: "u", now: start)
        // Renewals arrive out of order; the latest purchase date wins, not the latest arrival.
        let arrival = date("2024-03-01T00:00:00Z")
        try world.send(renewal("a3", original: "a1", IDs.yearly, at: date("2024-03-01T00:00:00Z"), expires: date("2025-03-01T00:00:00Z")), to: "u", now: arrival)
        try world.send(renewal("a2", original: "a1", IDs.monthly, at: firstEnd, expires: date("2024-03-01T00:00:00Z")), to: "u", now: arrival)
        let state = world.state("u", at: date("2024-06-01T00:00:00Z"))
        #expect(state.subscriptions == [.init(group: "pro", productID: IDs.yearly, type: .autoRenewable, status: .active,
                                              expiresAt: date("2025-03-01T00:00:00Z"), autoRenew: true, originalTransactionID: "a1")])
        let earlier = world.state("u", at: date("2024-02-15T00:00:00Z"))
        #expect(earlier.subscriptions.map(\.productID) == [IDs.monthly])
        #expect(earlier.entitlements.first?.source == "a2")
    }

    @Test func cancelledAutoRenewKeepsAccessToTheEnd() throws {
        var world = World()
        try world.send(purchase("a1", IDs.monthly, at: start, expires: firstEnd), to: "u", now: start)
        try world.send(.autoRenewChange(.init(originalTransactionID: "a1", autoRenew: false, effectiveDate: date("2024-01-10T00:00:00Z"))),
                       to: "u", now: date("2024-01-10T00:00:00Z"))
        let state = world.state("u", at: date("2024-01-20T00:00:00Z"))
        #expect(state.subscriptions.map(\.autoRenew) == [false])
        #expect(state.entitlements.map(\.active) == [true])
        #expect(world.state("u", at: date("2024-01-05T00:00:00Z")).subscriptions.map(\.autoRenew) == [true])
        #expect(world.state("u", at: firstEnd).entitlements.map(\.active) == [false])
        // Auto-renew off: a reminder P3D before the end.
        let reminders = Coverage.desiredReminders(history: world.history("u"), subscriberID: "u", catalog: catalog, now: date("2024-01-20T00:00:00Z"))
        #expect(reminders.map(\.dueAt) == [date("2024-01-29T00:00:00Z")])
    }

    @Test func refundEndsAccessAtRevocationDate() throws {
        var world = World()
        try world.send(purchase("a1", IDs.monthly, at: start, expires: firstEnd), to: "u", now: start)
        try world.send(refund("a1", at: date("2024-01-15T00:00:00Z")), to: "u", now: date("2024-01-15T00:00:00Z"))
        #expect(world.state("u", at: date("2024-01-14T00:00:00Z")).entitlements.map(\.active) == [true])
        let after = world.state("u", at: date("2024-01-15T00:00:00Z"))
        #expect(after.subscriptions.map(\.status) == [.revoked])
        #expect(after.entitlements.map(\.expiresAt) == [date("2024-01-15T00:00:00Z")])
    }

    @Test func storeExpiryEndsTheSubscriptionAndIsIdempotent() throws {
        var world = World()
        try world.send(purchase("a1", IDs.monthly, at: start, expires: firstEnd), to: "u", now: start)
        let expiry = FactRequest.expiry(.init(.subscription(originalTransactionID: "a1", end: nil)))
        #expect(try world.send(expiry, to: "u", now: firstEnd).events.count == 1)
        #expect(try world.send(expiry, to: "u", now: date("2024-02-02T00:00:00Z")).isDuplicate)
        #expect(world.state("u", at: date("2024-02-03T00:00:00Z")).subscriptions.map(\.status) == [.expired])
    }

    @Test func autoRenewablePurchaseNeedsExpiresDate() {
        var world = World()
        #expect(throws: LedgerError.missingField("expiresDate", "an auto-renewable purchase needs the store's expiresDate")) {
            try world.send(purchase("a1", IDs.monthly, at: start), to: "u", now: start)
        }
    }
}

struct OwnershipExamples {
    let day = date("2024-01-01T00:00:00Z")
    let later = date("2024-01-20T00:00:00Z")

    func restore(_ transactionID: String, _ productID: String, device: String = "D2", expires: Date? = nil) -> RestoreRequest {
        RestoreRequest(deviceID: device, transactions: [.init(transactionID: transactionID, productID: productID, purchaseDate: day, expiresDate: expires)])
    }

    @Test func transferMovesTheOriginalWithEventsOnBothStreams() throws {
        var world = World()
        try world.send(purchase("t1", IDs.level2, at: day, device: "D1"), to: "alice", now: day)
        let decision = try world.restore(restore("t1", IDs.level2), to: "bob", now: later)
        #expect(decision.events.map(\.type) == ["device_seen", "transferred_in"])
        #expect(decision.transfers.map(\.fromSubscriberID) == ["alice"])
        #expect(decision.transfers.flatMap(\.events).map(\.type) == ["transferred_out"])
        #expect(decision.claims == ["t1"])
        #expect(world.owners["t1"] == "bob")

        #expect(world.state("bob", at: later).entitlements.map(\.id) == ["level2"])
        #expect(world.state("bob", at: later).devices.map(\.id) == ["D2"])
        #expect(world.state("alice", at: later).entitlements.isEmpty)
        // Before the transfer, alice had it and bob did not.
        #expect(world.state("alice", at: date("2024-01-10T00:00:00Z")).activeEntitlementIDs == ["level2"])
        #expect(world.state("bob", at: date("2024-01-10T00:00:00Z")).entitlements.isEmpty)
        // Restoring again on bob's side is a duplicate; both histories show the transfer.
        #expect(try world.restore(restore("t1", IDs.level2), to: "bob", now: later).isDuplicate)
        #expect(world.history("alice").map(\.event.type) == ["purchased", "transferred_out"])
        // And it can come back.
        try world.restore(restore("t1", IDs.level2, device: "D1"), to: "alice", now: date("2024-02-01T00:00:00Z"))
        #expect(world.state("alice", at: date("2024-02-01T00:00:00Z")).activeEntitlementIDs == ["level2"])
        #expect(world.state("bob", at: date("2024-02-01T00:00:00Z")).activeEntitlementIDs == [])
    }

    @Test func transferKeysAreTheSameForTheSameDecision() throws {
        var world = World()
        try world.send(purchase("t1", IDs.level2, at: day), to: "alice", now: day)
        let owners = world.owners
        let first = try world.decider.decide(restore("t1", IDs.level2), subscriberID: "bob", history: [], owner: { owners[$0] }, now: later)
        let second = try world.decider.decide(restore("t1", IDs.level2), subscriberID: "bob", history: [], owner: { owners[$0] }, now: later)
        #expect(first.transfers.flatMap(\.events).map(\.idempotencyKey) == second.transfers.flatMap(\.events).map(\.idempotencyKey))
        #expect(first.events.map(\.idempotencyKey) == ["device:D2", "transfer-in:t1:alice>bob@0"])
    }

    @Test func keepOriginalRefusesWith409() throws {
        var world = World(policy: .keepOriginal)
        try world.send(purchase("t1", IDs.level2, at: day), to: "alice", now: day)
        #expect {
            try world.restore(restore("t1", IDs.level2), to: "bob", now: later)
        } throws: { error in
            let error = error as? LedgerError
            return error?.code == "owned_by_other_subscriber" && error?.kind == .conflict
                && error?.field == "transactions[0].originalTransactionId"
        }
        #expect(world.history("bob").isEmpty)
    }

    @Test func restoringAnUnknownOriginalRecordsItAndAddsTheDevice() throws {
        var world = World()
        let decision = try world.restore(restore("m1", IDs.monthly, expires: date("2024-02-01T00:00:00Z")), to: "bob", now: later)
        #expect(decision.events.map(\.type) == ["device_seen", "restored"])
        #expect(decision.claims == ["m1"])
        #expect(world.state("bob", at: later).activeEntitlementIDs == ["pro"])
        #expect(world.state("bob", at: later).devices == [.init(id: "D2", firstSeenAt: later)])
        // Same transaction from a new device: only the device is added.
        let again = try world.restore(restore("m1", IDs.monthly, device: "D3", expires: date("2024-02-01T00:00:00Z")), to: "bob", now: later)
        #expect(again.events.map(\.type) == ["device_seen"])
    }

    @Test func consumableRestoreIsRefused() {
        var world = World()
        #expect(throws: LedgerError(kind: .rule, code: "not_restorable",
                                    message: "Product 'com.example.coins.100' is consumable; consumables cannot be restored.",
                                    field: "transactions[0].productId")) {
            try world.restore(restore("c1", IDs.coins), to: "bob", now: later)
        }
    }

    @Test func nonConsumableBoughtTwiceIsRecordedWithEntitlementUnchanged() throws {
        var world = World()
        try world.send(purchase("n1", IDs.level2, at: day), to: "u", now: day)
        let second = try world.send(purchase("n2", IDs.level2, at: later), to: "u", now: later)
        #expect(second.events.map(\.type) == ["purchased"])
        let state = world.state("u", at: later)
        #expect(state.purchases.map(\.transactionID) == ["n1", "n2"])
        #expect(state.entitlements == [.init(id: "level2", active: true, productID: IDs.level2, expiresAt: nil, source: "n1")])
    }

    @Test func consumablesAreRecordedWithQuantity() throws {
        var world = World()
        let request = FactRequest.Purchase(transactionID: "c1", productID: IDs.coins, purchaseDate: day, quantity: 3)
        try world.send(.purchase(request), to: "u", now: day)
        let state = world.state("u", at: later)
        #expect(state.purchases.map(\.quantity) == [3])
        #expect(state.entitlements.isEmpty)
    }

    @Test func unknownProductIs422() {
        var world = World()
        #expect(throws: LedgerError.unknownProduct("com.example.nope", field: "productId")) {
            try world.send(purchase("x", "com.example.nope", at: day), to: "u", now: day)
        }
        #expect(LedgerError.unknownProduct("x", field: "productId").kind == .rule)
    }

    @Test func refundOfAnUnknownTransactionIs404() {
        var world = World()
        #expect {
            try world.send(refund("missing", at: day), to: "u", now: day)
        } throws: { error in
            (error as? LedgerError).map { $0.kind == .notFound && $0.field == "transactionId" } ?? false
        }
    }

    @Test func theSameFactTwiceIsADuplicate() throws {
        var world = World()
        let fact = purchase("n1", IDs.level2, at: day)
        #expect(try world.send(fact, to: "u", now: day).isDuplicate == false)
        #expect(try world.send(fact, to: "u", now: later).isDuplicate)
        #expect(try world.send(refund("n1", at: later), to: "u", now: later).events.count == 1)
        #expect(try world.send(refund("n1", at: later), to: "u", now: later).isDuplicate)
        #expect(world.history("u").count == 2)
        let other = purchase("n1", IDs.starter, at: day)
        #expect(throws: LedgerError.self) { try world.send(other, to: "u", now: later) }
    }

    @Test func renewalOfANonRenewableIsRefused() {
        var world = World()
        #expect {
            try world.send(renewal("r", original: "o", IDs.pass, at: day, expires: later), to: "u", now: day)
        } throws: { error in
            (error as? LedgerError)?.code == "not_renewable"
        }
    }
}
