import Foundation
import JSON
import TestSupport
import Testing
@testable import Ledger

/// Google Play's purchases under the ledger's rules: states to entitlements,
/// replacement, voiding, one-time products, test purchases, both stores at
/// once. Google's pages are the authority:
/// - states: https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.subscriptionsv2#SubscriptionState
/// - lifecycle: https://developer.android.com/google/play/billing/lifecycle/subscriptions
/// - replacement: https://developer.android.com/google/play/billing/subscriptions#upgrade-downgrade
/// - voided: https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.voidedpurchases
struct GooglePlayLedgerTests {
    static let playCatalog: Catalog = try! Catalog.decode(from: Data("""
        { "version": 1, "products": [
          {"id": "com.example.pro.monthly", "type": "auto-renewable", "group": "pro", "entitlements": ["pro"]},
          {"id": "pro_sub:monthly", "store": "google_play", "type": "auto-renewable", "group": "pro", "entitlements": ["pro"], "reminders": ["P3D"]},
          {"id": "pro_sub:yearly", "store": "google_play", "type": "auto-renewable", "group": "pro", "entitlements": ["pro"]},
          {"id": "pro_sub", "store": "google_play", "type": "auto-renewable", "group": "pro", "entitlements": ["pro"]},
          {"id": "level_pack", "store": "google_play", "type": "non-consumable", "entitlements": ["level2"]},
          {"id": "gems_100", "store": "google_play", "type": "consumable"}
        ] }
        """.utf8))

    static let t0 = date("2025-01-31T23:30:00Z")

    static func state(_ token: String, _ state: GooglePlayPurchase.State, order: String? = "GPA.1111-2222-3333-44444",
                      basePlan: String? = "monthly", start: Date = t0, expiry: Date?, observed: Date,
                      autoRenew: Bool? = true, linked: String? = nil, environment: Environment = .production,
                      acknowledged: Bool = true) -> FactRequest {
        .googlePlayPurchase(GooglePlayPurchase(
            kind: .subscription, purchaseToken: token, orderID: order, productID: "pro_sub", basePlanID: basePlan, state: state,
            startTime: start, expiryTime: expiry, autoRenew: autoRenew, linkedPurchaseToken: linked, acknowledged: acknowledged,
            observedAt: observed, environment: environment))
    }

    func world() -> World { World(catalog: Self.playCatalog) }

    func pro(_ world: World, _ subscriber: String = "ann", at: Date, environment: Environment = .production) -> Bool {
        SubscriberState.fold(world.history(subscriber), subscriberID: subscriber, catalog: Self.playCatalog, at: at,
                             environment: environment).activeEntitlementIDs.contains("pro")
    }

    func subscription(_ world: World, _ subscriber: String = "ann", at: Date) -> SubscriberState.Subscription? {
        world.state(subscriber, at: at).subscriptions.first { $0.store == .googlePlay }
    }

    // ACTIVE, IN_GRACE_PERIOD and CANCELED grant until the line item's expiryTime.
    @Test(arguments: [GooglePlayPurchase.State.active, .inGracePeriod, .canceled])
    func grantingStatesGrantUntilTheExpiry(state: GooglePlayPurchase.State) throws {
        var world = world()
        let expiry = Self.t0 + 30 * 86_400
        try world.send(Self.state("tok-a", state, expiry: expiry, observed: Self.t0 + 60, autoRenew: state != .canceled),
                       to: "ann", now: Self.t0 + 60)
        #expect(pro(world, at: Self.t0 + 1))
        #expect(pro(world, at: expiry - 1))
        #expect(!pro(world, at: expiry))
        #expect(!pro(world, at: Self.t0 - 1), "nothing before the purchase's start")
        let shown = try #require(subscription(world, at: Self.t0 + 86_400))
        #expect(shown.status == (state == .inGracePeriod ? .grace : .active))
        #expect(shown.autoRenew == (state != .canceled))
        #expect(shown.originalTransactionID == "tok-a" && shown.productID == "pro_sub:monthly")
        #expect(subscription(world, at: expiry)?.status == .expired)
    }

    // ON_HOLD, PAUSED, EXPIRED, PENDING and PENDING_PURCHASE_CANCELED grant
    // nothing from eventTimeMillis, or from expiryTime if that is earlier.
    @Test(arguments: [(GooglePlayPurchase.State.onHold, SubscriptionStatus.onHold), (.paused, .paused), (.expired, .expired),
                      (.pending, .pending), (.pendingPurchaseCanceled, .pending)])
    func heldStatesGrantNothingFromTheirEvent(state: GooglePlayPurchase.State, status: SubscriptionStatus) throws {
        var world = world()
        let expiry = Self.t0 + 30 * 86_400
        try world.send(Self.state("tok-a", .active, expiry: expiry, observed: Self.t0), to: "ann", now: Self.t0)
        // The held state is observed ten days in, before the expiry.
        let event = Self.t0 + 10 * 86_400
        try world.send(Self.state("tok-a", state, expiry: expiry, observed: event), to: "ann", now: event)
        #expect(pro(world, at: event - 1))
        #expect(!pro(world, at: event))
        #expect(subscription(world, at: event)?.status == status)
        // Observed after the expiry: access ended at the expiry, not the event.
        var late = self.world()
        try late.send(Self.state("tok-b", .active, expiry: expiry, observed: Self.t0), to: "ann", now: Self.t0)
        try late.send(Self.state("tok-b", state, expiry: expiry, observed: expiry + 5 * 86_400), to: "ann", now: expiry + 5 * 86_400)
        #expect(!pro(late, at: expiry))
        #expect(subscription(late, at: expiry + 5 * 86_400)?.status == status)
    }

    @Test func aRenewalMovesTheExpiryAndAMissedPushIsFilledInByTheNextFetch() throws {
        var world = world()
        let first = Self.t0 + 30 * 86_400, second = first + 30 * 86_400, third = second + 30 * 86_400
        try world.send(Self.state("tok", .active, order: "GPA.1-1-1", expiry: first, observed: Self.t0), to: "ann", now: Self.t0)
        // The renewal at `first` was missed; the next fetch (after the second renewal) says paid until `third`.
        try world.send(Self.state("tok", .active, order: "GPA.1-1-1..1", expiry: third, observed: second + 60), to: "ann", now: second + 60)
        #expect(pro(world, at: first + 86_400), "the missed renewal is covered by what the later fetch says")
        #expect(pro(world, at: third - 1) && !pro(world, at: third))
    }

    @Test func graceThenHoldThenRecovery() throws {
        var world = world()
        let paid = Self.t0 + 30 * 86_400, graceEnd = paid + 3 * 86_400, recovered = graceEnd + 5 * 86_400
        try world.send(Self.state("tok", .active, expiry: paid, observed: Self.t0), to: "ann", now: Self.t0)
        try world.send(Self.state("tok", .inGracePeriod, expiry: graceEnd, observed: paid), to: "ann", now: paid)
        try world.send(Self.state("tok", .onHold, expiry: graceEnd, observed: graceEnd), to: "ann", now: graceEnd)
        try world.send(Self.state("tok", .active, order: "GPA.1111-2222-3333-44444..1", expiry: recovered + 30 * 86_400,
                                  observed: recovered), to: "ann", now: recovered)
        #expect(subscription(world, at: paid + 86_400)?.status == .grace)
        #expect(pro(world, at: paid + 86_400))
        #expect(subscription(world, at: graceEnd + 86_400)?.status == .onHold)
        #expect(!pro(world, at: graceEnd + 86_400))
        #expect(subscription(world, at: recovered)?.status == .active)
        #expect(pro(world, at: recovered + 86_400))
    }

    @Test func pauseSuspendsAccessUntilItResumes() throws {
        var world = world()
        let paid = Self.t0 + 30 * 86_400, resumed = paid + 30 * 86_400
        try world.send(Self.state("tok", .active, expiry: paid, observed: Self.t0), to: "ann", now: Self.t0)
        try world.send(Self.state("tok", .paused, expiry: paid, observed: paid), to: "ann", now: paid)
        try world.send(Self.state("tok", .active, order: "GPA.1111-2222-3333-44444..1", expiry: resumed + 30 * 86_400,
                                  observed: resumed), to: "ann", now: resumed)
        #expect(subscription(world, at: paid + 86_400)?.status == .paused)
        #expect(!pro(world, at: paid + 86_400))
        #expect(pro(world, at: resumed + 60))
    }

    @Test func aCancellationKeepsAccessUntilTheExpiryThenItEnds() throws {
        var world = world()
        let paid = Self.t0 + 30 * 86_400
        try world.send(Self.state("tok", .active, expiry: paid, observed: Self.t0), to: "ann", now: Self.t0)
        try world.send(Self.state("tok", .canceled, expiry: paid, observed: Self.t0 + 86_400, autoRenew: false), to: "ann", now: Self.t0 + 86_400)
        #expect(pro(world, at: paid - 1))
        #expect(subscription(world, at: paid - 1)?.autoRenew == false)
        try world.send(Self.state("tok", .expired, expiry: paid, observed: paid + 60, autoRenew: false), to: "ann", now: paid + 60)
        #expect(!pro(world, at: paid))
        #expect(subscription(world, at: paid + 60)?.status == .expired)
    }

    @Test func aVoidedPurchaseGrantsNothingFromItsVoidingAndAnEarlierInstantStillShowsIt() throws {
        var world = world()
        let paid = Self.t0 + 30 * 86_400, voided = Self.t0 + 5 * 86_400
        try world.send(Self.state("tok", .active, expiry: paid, observed: Self.t0), to: "ann", now: Self.t0)
        try world.send(.googlePlayVoid(GooglePlayVoid(purchaseToken: "tok", orderID: "GPA.1111-2222-3333-44444", voidedAt: voided,
                                                      reason: 1, voidedSource: 0)), to: "ann", now: voided + 60)
        #expect(pro(world, at: voided - 1), "?at= before the voiding still shows the access")
        #expect(!pro(world, at: voided))
        #expect(subscription(world, at: voided)?.status == .revoked)
        // The same voiding again is a duplicate.
        let again = try world.send(.googlePlayVoid(GooglePlayVoid(purchaseToken: "tok", orderID: "GPA.1111-2222-3333-44444",
                                                                  voidedAt: voided)), to: "ann", now: voided + 120)
        #expect(again.isDuplicate)
    }

    @Test func anUpgradeThroughTheLinkedTokenReplacesTheOldPurchase() throws {
        var world = world()
        let paid = Self.t0 + 30 * 86_400, upgraded = Self.t0 + 10 * 86_400
        try world.send(Self.state("old", .active, expiry: paid, observed: Self.t0), to: "ann", now: Self.t0)
        try world.send(Self.state("new", .active, order: "GPA.9-9-9", basePlan: "yearly", start: upgraded,
                                  expiry: upgraded + 365 * 86_400, observed: upgraded, linked: "old"), to: "ann", now: upgraded)
        let state = world.state("ann", at: upgraded + 86_400)
        let old = try #require(state.subscriptions.first { $0.originalTransactionID == "old" })
        #expect(old.status == .expired, "the old token grants nothing from the new purchase's start, whatever Google still says")
        #expect(state.subscriptions.first { $0.originalTransactionID == "new" }?.productID == "pro_sub:yearly")
        #expect(pro(world, at: upgraded + 200 * 86_400))
        #expect(world.state("ann", at: upgraded - 1).subscriptions.first { $0.originalTransactionID == "old" }?.status == .active)
    }

    @Test func oneTimeProductsAreOwnedWhilePurchasedAndConsumablesGrantNothing() throws {
        var world = world()
        func product(_ token: String, _ id: String, _ state: GooglePlayPurchase.State, observed: Date) -> FactRequest {
            .googlePlayPurchase(GooglePlayPurchase(kind: .product, purchaseToken: token, orderID: "GPA.\(token)", productID: id,
                                                   state: state, startTime: Self.t0, acknowledged: false, observedAt: observed))
        }
        try world.send(product("p1", "level_pack", .purchased, observed: Self.t0), to: "ann", now: Self.t0)
        try world.send(product("p2", "gems_100", .purchased, observed: Self.t0), to: "ann", now: Self.t0)
        let state = world.state("ann", at: Self.t0 + 60)
        #expect(state.activeEntitlementIDs == ["level2"])
        #expect(Set(state.purchases.map(\.productID)) == ["level_pack", "gems_100"])
        #expect(state.purchases.allSatisfy { $0.store == .googlePlay })
        try world.send(product("p1", "level_pack", .productCanceled, observed: Self.t0 + 86_400), to: "ann", now: Self.t0 + 86_400)
        #expect(!world.state("ann", at: Self.t0 + 2 * 86_400).activeEntitlementIDs.contains("level2"))
        #expect(world.state("ann", at: Self.t0 + 60).activeEntitlementIDs.contains("level2"))
    }

    @Test func aTestPurchaseIsSandboxAndNeverGrantsProduction() throws {
        var world = world()
        try world.send(Self.state("tok", .active, expiry: Self.t0 + 86_400, observed: Self.t0, environment: .sandbox), to: "ann", now: Self.t0)
        #expect(!pro(world, at: Self.t0 + 60))
        #expect(pro(world, at: Self.t0 + 60, environment: .sandbox))
        // The same token can never be recorded in Production afterwards.
        #expect(throws: LedgerError.self) {
            try world.send(Self.state("tok", .active, expiry: Self.t0 + 86_400, observed: Self.t0 + 60), to: "ann", now: Self.t0 + 60)
        }
    }

    @Test func aSubscriberIsEntitledThroughBothStoresAtOnce() throws {
        var world = world()
        try world.send(purchase("1000000001", "com.example.pro.monthly", at: Self.t0, expires: Self.t0 + 10 * 86_400), to: "ann", now: Self.t0)
        try world.send(Self.state("tok", .active, start: Self.t0 + 5 * 86_400, expiry: Self.t0 + 40 * 86_400,
                                  observed: Self.t0 + 5 * 86_400), to: "ann", now: Self.t0 + 5 * 86_400)
        let both = world.state("ann", at: Self.t0 + 6 * 86_400)
        #expect(Set(both.subscriptions.map(\.store)) == [.appStore, .googlePlay])
        let grant = try #require(both.entitlements.first { $0.id == "pro" })
        #expect(grant.active && grant.expiresAt == Self.t0 + 40 * 86_400, "the longest-lasting grant speaks for the entitlement")
        #expect(pro(world, at: Self.t0 + 20 * 86_400), "Play keeps it after the App Store subscription ended")
    }

    @Test func theSameFetchedStateRecordsNothingNewAndATokenHasOneOwner() throws {
        var world = World(policy: .keepOriginal, catalog: Self.playCatalog)
        let fetched = Self.state("tok", .active, expiry: Self.t0 + 86_400, observed: Self.t0)
        #expect(try world.send(fetched, to: "ann", now: Self.t0).events.count == 1)
        #expect(try world.send(fetched, to: "ann", now: Self.t0 + 60).isDuplicate)
        // The same state as of a later push is recorded: pushes arrive out of
        // order, and one observed between the two would otherwise end it.
        #expect(try world.send(Self.state("tok", .active, expiry: Self.t0 + 86_400, observed: Self.t0 + 600), to: "ann", now: Self.t0 + 600)
            .events.count == 1)
        #expect(world.owners[Store.googlePlay.ownershipKey("tok", environment: .production)] == "ann")
        #expect(throws: LedgerError.self) { try world.send(fetched, to: "bob", now: Self.t0 + 60) }
        // A Play token never equals an App Store id's ownership key.
        #expect(Store.googlePlay.ownershipKey("1000000001", environment: .production)
            != Store.appStore.ownershipKey("1000000001", environment: .production))
    }

    @Test func underTheTransferPolicyATokenMovesWithItsHistory() throws {
        var world = world()
        try world.send(Self.state("tok", .active, expiry: Self.t0 + 30 * 86_400, observed: Self.t0), to: "ann", now: Self.t0)
        try world.send(Self.state("tok", .active, expiry: Self.t0 + 60 * 86_400, observed: Self.t0 + 86_400), to: "bob", now: Self.t0 + 86_400)
        #expect(pro(world, "bob", at: Self.t0 + 2 * 86_400))
        #expect(!pro(world, "ann", at: Self.t0 + 2 * 86_400), "a token is never attached to two subscribers")
    }

    @Test func snapshotsKeepPlayFacts() throws {
        var world = world()
        try world.send(Self.state("tok", .active, expiry: Self.t0 + 30 * 86_400, observed: Self.t0 + 1), to: "ann", now: Self.t0)
        try world.send(.googlePlayVoid(GooglePlayVoid(purchaseToken: "tok", orderID: nil, voidedAt: Self.t0 + 86_400)), to: "ann",
                       now: Self.t0 + 86_400)
        let ledger = SubscriberLedger(subscriberID: "ann", events: world.history("ann"))
        let restored = try SubscriberLedger(snapshot: ledger.snapshotData())
        #expect(restored.playPurchases == ledger.playPurchases)
        #expect(restored.playVoids == ledger.playVoids)
        #expect(restored.keyPositions == ledger.keyPositions)
        #expect(restored.lastPosition == ledger.lastPosition)
        #expect(restored == ledger)
        #expect(restored.playPurchases.count == 1 && restored.playVoids.count == 1)
    }

    @Test func jsonBodiesCannotClaimToBePlayFacts() {
        for type in ["googlePlayPurchase", "googlePlayVoid"] {
            #expect(throws: LedgerError.self) {
                try FactRequest.parse(json: Data(#"{"type": "\#(type)", "purchaseToken": "x"}"#.utf8))
            }
        }
    }
}
