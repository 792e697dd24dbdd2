import Foundation
import Testing
@testable import Ledger

/// Prices on facts (docs/api.md, the events route): a decimal string
/// and an ISO 4217 currency, an offer and a storefront; amounts exact, rounded
/// half-even to the currency's minor unit only when answered.
struct SaleTermsTests {
    static let purchase = #""type": "purchase", "transactionId": "1", "productId": "p", "purchaseDate": "2024-01-01T00:00:00Z""#

    func parse(_ extra: String) throws(LedgerError) -> FactRequest {
        try FactRequest.parse(json: Data("{\(Self.purchase), \(extra)}".utf8))
    }

    func details(_ request: FactRequest) -> AppleTransactionDetails? {
        if case .purchase(let purchase) = request { return purchase.details }
        return nil
    }

    @Test func aPurchaseCarriesItsPriceCurrencyOfferAndStorefront() throws {
        let request = try parse(#""price": "9.99", "currency": "EUR", "offer": {"type": "win_back", "discount": "pay_up_front"}, "storefront": "FRA""#)
        let details = try #require(self.details(request))
        #expect(details.sale == SaleTerms(price: Amount(micros: 9_990_000), currency: "EUR", offerDiscount: .payUpFront, storefront: "FRA"))
        #expect(details.offerType == OfferKind.winBack.rawValue)
        // Apple's number for the offer's type reads the same, alone or agreeing.
        #expect(self.details(try parse(#""offerType": 4, "offer": {"type": "win_back"}"#))?.offerType == 4)
        #expect(self.details(try parse(#""offerType": 2"#))?.offerType == 2)
        // A free trial without a price, or priced 0.
        #expect(self.details(try parse(#""offer": {"type": "introductory", "discount": "free_trial"}"#))?.sale.isFreeTrial == true)
        #expect(self.details(try parse(#""price": "0.00", "currency": "USD", "offer": {"type": "introductory", "discount": "free_trial"}"#))?
            .sale.price == .zero)
    }

    @Test(arguments: [
        (#""price": 9.99, "currency": "USD""#, "price"),
        (#""price": "9,99", "currency": "USD""#, "price"),
        (#""price": "-1", "currency": "USD""#, "price"),
        (#""price": "1e3", "currency": "USD""#, "price"),
        (#""price": ".5", "currency": "USD""#, "price"),
        (#""price": "5.", "currency": "USD""#, "price"),
        (#""price": "0.0000001", "currency": "USD""#, "price"),
        (#""price": "1000000000000", "currency": "USD""#, "price"),
        (#""price": "9.99""#, "currency"),
        (#""currency": "USD""#, "price"),
        (#""price": "9.99", "currency": "usd""#, "currency"),
        (#""price": "9.99", "currency": "XYZ""#, "currency"),
        (#""price": "9.99", "currency": "DOLLARS""#, "currency"),
        (#""offer": "introductory""#, "offer"),
        (#""offer": {"discount": "free_trial"}"#, "offer.type"),
        (#""offer": {"type": "intro"}"#, "offer.type"),
        (#""offer": {"type": "introductory", "discount": "free""#, nil),
        (#""offer": {"type": "introductory", "discount": "FREE_TRIAL"}"#, "offer.discount"),
        (#""offerType": 1, "offer": {"type": "promotional"}"#, "offerType"),
        (#""price": "4.99", "currency": "USD", "offer": {"type": "introductory", "discount": "free_trial"}"#, "price"),
        (#""storefront": """#, "storefront"),
    ] as [(String, String?)])
    func badSaleTermsAreA400NamingTheField(extra: String, field: String?) {
        do {
            _ = try parse(extra)
            Issue.record("accepted \(extra)")
        } catch {
            #expect(error.kind == .badRequest, "\(error)")
            if let field { #expect(error.field == field, "\(extra): \(error)") }
        }
    }

    @Test(arguments: [("9.99", 9_990_000), ("0", 0), ("10", 10_000_000), ("0.000001", 1), ("999999999999.999999", 999_999_999_999_999_999),
                      ("007.50", 7_500_000)] as [(String, Int64)])
    func decimalStringsReadExactly(text: String, micros: Int64) throws {
        #expect(Amount(decimal: text)?.micros == micros)
    }

    @Test func amountsPrintShortestAndRoundHalfEvenToTheMinorUnitWhenAnswered() {
        #expect(Amount(micros: 9_990_000).description == "9.99")
        #expect(Amount(micros: 10_000_000).description == "10")
        #expect(Amount(micros: -1_500_000).description == "-1.5")
        #expect(Amount(milliunits: 9990) == Amount(decimal: "9.99"))
        // Half-even: 0.125 → 0.12, 0.135 → 0.14, 0.1251 → 0.13; JPY has no minor unit, KWD three, CLF four.
        #expect(Currency.format(Amount(decimal: "0.125")!, in: "USD") == "0.12")
        #expect(Currency.format(Amount(decimal: "0.135")!, in: "USD") == "0.14")
        #expect(Currency.format(Amount(decimal: "0.1251")!, in: "USD") == "0.13")
        #expect(Currency.format(Amount(decimal: "119.88")!, in: "USD") == "119.88")
        #expect(Currency.format(Amount(decimal: "7")!, in: "EUR") == "7.00")
        #expect(Currency.format(Amount(decimal: "1200.5")!, in: "JPY") == "1200")
        #expect(Currency.format(Amount(decimal: "1201.5")!, in: "JPY") == "1202")
        #expect(Currency.format(Amount(decimal: "3.0005")!, in: "KWD") == "3.000")
        #expect(Currency.format(Amount(decimal: "1.23456")!, in: "CLF") == "1.2346")
        #expect(Currency.format(Amount(micros: -125_000), in: "USD") == "-0.12")
        #expect(Currency.format(Amount(micros: -135_000), in: "USD") == "-0.14")
        // Summed exactly, rounded once: three thirds of a cent are a cent, not zero.
        let third = Amount(decimal: "0.003333")!
        #expect(Currency.format(third + third + third, in: "USD") == "0.01")
        #expect(Currency.format(Amount(decimal: "0.003333")!, in: "USD") == "0.00")
    }

    @Test func scalingRoundsHalfEvenToAMicro() {
        // Half of 9.99 is 4.995 exactly; a third of 10 is 3.333333 (…333 rounds down).
        #expect(Amount(decimal: "9.99")!.scaled(by: 50_000, 100_000) == Amount(decimal: "4.995"))
        #expect(Amount(decimal: "10")!.scaled(by: 1, 3) == Amount(decimal: "3.333333"))
        #expect(Amount(micros: 5).scaled(by: 1, 2) == Amount(micros: 2))
        #expect(Amount(micros: 7).scaled(by: 1, 2) == Amount(micros: 4))
        #expect(Amount(micros: -7).scaled(by: 1, 2) == Amount(micros: -4))
        // The largest price a fact may carry, at a refund's largest share, without overflow.
        #expect(Amount.maximum.scaled(by: 100_000, 100_000) == Amount.maximum)
        #expect(Amount.maximum.scaled(by: 67_932, 100_000) == Amount(micros: 679_319_999_999_999_999))
    }

    @Test func currencyCodesAreISO4217() {
        #expect(Currency.minorUnit("USD") == 2 && Currency.minorUnit("JPY") == 0 && Currency.minorUnit("BHD") == 3)
        #expect(Currency.minorUnit("XXX") == nil && Currency.minorUnit("usd") == nil && Currency.minorUnit("") == nil)
    }

    /// The terms are stored with the fact and read back the same way by
    /// every reader: the reference decoder, the fast parser, the snapshot.
    @Test func theTermsSurviveStorageAndSnapshots() throws {
        let sale = SaleTerms(price: Amount(decimal: "1234.5")!, currency: "JPY", offerDiscount: .freeTrial, storefront: "JPN")
        let fact = TransactionFact(transactionID: "t1", originalTransactionID: "t1", productID: "p", purchaseDate: Date(timeIntervalSince1970: 1_700_000_000),
                                   details: AppleTransactionDetails(offerType: 1, sale: sale))
        let stored = fact.storedJSON()
        #expect(String(decoding: stored, as: UTF8.self).contains(#""price":"1234.5""#))
        #expect(try LedgerEvent.decode(type: "purchased", schemaVersion: 1, data: stored) == .purchased(fact))
        #expect(try LedgerJSON.makeDecoder().decode(TransactionFact.self, from: stored) == fact)
        var writer = SnapshotWriter()
        writer.transaction(fact)
        var reader = SnapshotReader(bytes: writer.bytes)
        #expect(try reader.transaction() == fact && reader.isAtEnd)

        // A Google Play fact keeps its sale under `sale`, in JSON and snapshots.
        let play = GooglePlayPurchase(kind: .subscription, purchaseToken: "tok", orderID: "GPA.1", productID: "pro_monthly",
                                      state: .active, startTime: Date(timeIntervalSince1970: 1_700_000_000), acknowledged: true,
                                      observedAt: Date(timeIntervalSince1970: 1_700_000_000),
                                      sale: SaleTerms(price: Amount(decimal: "4.5"), currency: "EUR", storefront: "DE"))
        let encoded = try LedgerJSON.makeEncoder().encode(play)
        #expect(String(decoding: encoded, as: UTF8.self).contains(#""sale":{"currency":"EUR","price":"4.5","storefront":"DE"}"#))
        #expect(try LedgerJSON.makeDecoder().decode(GooglePlayPurchase.self, from: encoded) == play)
        for candidate in [play, { var bare = play; bare.sale = nil; return bare }()] {
            var playWriter = SnapshotWriter()
            playWriter.playPurchase(candidate)
            var playReader = SnapshotReader(bytes: playWriter.bytes)
            #expect(try playReader.playPurchase() == candidate && playReader.isAtEnd)
        }
    }
}
