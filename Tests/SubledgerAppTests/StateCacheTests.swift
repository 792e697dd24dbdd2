import Foundation
import Ledger
import Testing
@testable import SubledgerApp
import SubledgerAppTesting

/// The state cache serves a stored state again only if it reads back as
/// the state it stored: a shape it cannot decode is a miss on every read,
/// which costs a fold and a write each time and nothing says so.
struct StateCacheTests {
    @Test func aStoredStateReadsBackAsItWasWithBothStores() throws {
        let catalog = try Catalog(version: 1, products: [
            Product(id: "com.example.pro.monthly", type: .autoRenewable, group: "pro", entitlements: ["pro"]),
            Product(id: "com.example.level2", type: .nonConsumable, entitlements: ["level2"]),
            Product(id: "pro_monthly", type: .autoRenewable, group: "pro", entitlements: ["pro"], store: .googlePlay),
        ])
        let start = Date(timeIntervalSince1970: 1_767_225_600)  // 2026-01-01
        let events: [LedgerEvent] = [
            .purchased(TransactionFact(transactionID: "1000000001", originalTransactionID: "1000000001", productID: "com.example.pro.monthly",
                                       purchaseDate: start, expiresDate: start + 30 * 86_400)),
            .purchased(TransactionFact(transactionID: "1000000002", originalTransactionID: "1000000002", productID: "com.example.level2",
                                       purchaseDate: start)),
            .googlePlayPurchase(GooglePlayPurchase(
                kind: .subscription, purchaseToken: "tok", orderID: "GPA.1234-5678-9012-34567", productID: "pro_monthly",
                basePlanID: "monthly", state: .active, startTime: start, expiryTime: start + 60 * 86_400, autoRenew: true,
                acknowledged: true, observedAt: start + 60)),
        ]
        var ledger = SubscriberLedger(subscriberID: "ann")
        for (index, event) in events.enumerated() {
            ledger.apply(RecordedLedgerEvent(position: Int64(index + 1), recordedAt: start + 60, event: event))
        }
        let state = ledger.state(at: start + 86_400, catalog: catalog)
        // level2 from the App Store; pro from Google Play, whose term lasts longer.
        #expect(state.entitlements.map(\.store) == [.appStore, .googlePlay], "\(state.entitlements)")
        #expect(Set(state.subscriptions.map(\.store)) == [.appStore, .googlePlay])
        let text = String(decoding: try LedgerJSON.makeEncoder().encode(state), as: UTF8.self)
        let read = try #require(SubscriberStateCache.decode(text, at: state.at), "the cached state does not decode: \(text)")
        #expect(read == state)
    }
}
