import Foundation
import GooglePlay
import GooglePlayTesting
import JSON
import Ledger
import Testing

@Suite struct VoidedPurchasesPageTests {
    // https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.voidedpurchases#VoidedPurchase
    @Test func eachVoidedPurchaseBecomesAVoidFact() throws {
        let voidedTime = RFC3339.parse("2024-03-08T09:30:00.250Z")!
        let page = try VoidedPurchasesPage.parse(json: GooglePlaySamples.voidedPurchasesPage([
            GooglePlaySamples.voidedPurchase(purchaseToken: GooglePlaySamples.purchaseToken(1), voidedTime: voidedTime,
                                             voidedReason: 7, voidedSource: 2),
            GooglePlaySamples.voidedPurchase(purchaseToken: GooglePlaySamples.purchaseToken(2), orderID: nil,
                                             voidedReason: nil, voidedSource: nil, voidedQuantity: 1),
        ], nextPageToken: "next-page").data)
        #expect(page.voids == [
            GooglePlayVoid(purchaseToken: GooglePlaySamples.purchaseToken(1), orderID: GooglePlaySamples.orderID, voidedAt: voidedTime,
                           reason: 7, voidedSource: 2),
            GooglePlayVoid(purchaseToken: GooglePlaySamples.purchaseToken(2), orderID: nil,
                           voidedAt: GooglePlaySamples.startTime + 7 * 86_400),
        ])
        #expect(page.failures.isEmpty)
        #expect(page.nextPageToken == "next-page")
    }

    // https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.voidedpurchases/list#response-body — one bad item never fails the page.
    @Test func aMalformedItemIsAFailureOfItsOwn() throws {
        let page = try VoidedPurchasesPage.parse(json: GooglePlaySamples.voidedPurchasesPage([
            GooglePlaySamples.voidedPurchase(purchaseToken: GooglePlaySamples.purchaseToken(1)),
            GooglePlaySamples.voidedPurchase(purchaseToken: GooglePlaySamples.purchaseToken(2)).setting("voidedTimeMillis", nil),
            .string("not an object"),
            GooglePlaySamples.voidedPurchase(purchaseToken: GooglePlaySamples.purchaseToken(4)).setting("voidedReason", .string("fraud")),
            GooglePlaySamples.voidedPurchase(purchaseToken: GooglePlaySamples.purchaseToken(5)),
        ]).data)
        #expect(page.voids.map(\.purchaseToken) == [GooglePlaySamples.purchaseToken(1), GooglePlaySamples.purchaseToken(5)])
        #expect(page.failures.map(\.index) == [1, 2, 3])
        #expect(page.failures.map(\.field) == ["voidedPurchases[1].voidedTimeMillis", "voidedPurchases[2]",
                                               "voidedPurchases[3].voidedReason"])
        #expect(page.failures[0].message.contains("required"))
        #expect(page.nextPageToken == nil)
    }

    // https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.voidedpurchases/list#response-body — an empty last page is `{}`.
    @Test func anEmptyLastPage() throws {
        let page = try VoidedPurchasesPage.parse(json: Data("{}".utf8))
        #expect(page == VoidedPurchasesPage(voids: []))
        let sandbox = try VoidedPurchasesPage.parse(json: GooglePlaySamples.voidedPurchasesPage([GooglePlaySamples.voidedPurchase()]).data,
                                                    environment: .sandbox)
        #expect(sandbox.voids.first?.environment == .sandbox)
    }

    // https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.voidedpurchases/list#response-body — only a page that is not one throws.
    @Test func aPageThatIsNotOneThrows() throws {
        #expect(throws: GooglePlayParseError.self) { _ = try VoidedPurchasesPage.parse(json: Data("[]".utf8)) }
        #expect(throws: GooglePlayParseError.self) { _ = try VoidedPurchasesPage.parse(json: Data("{\"voidedPurchases\": 3".utf8)) }
        let error = #expect(throws: GooglePlayParseError.self) {
            _ = try VoidedPurchasesPage.parse(json: Data(#"{"voidedPurchases": {}}"#.utf8))
        }
        #expect(error?.field == "voidedPurchases")
    }
}
