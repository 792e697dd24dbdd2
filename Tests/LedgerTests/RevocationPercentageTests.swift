import Testing
@testable import Ledger

/// Apple gives a prorated refund's share in milliunits, and its page's
/// table is the authority on how to read it.
/// https://developer.apple.com/documentation/appstoreservernotifications/revocationpercentage
struct RevocationPercentageTests {
    @Test(arguments: [(67932, "67.932"), (15, "0.015"), (40000, "40"), (100000, "100"), (50000, "50"), (1500, "1.5"), (0, "0")])
    func aShareInMilliunitsReadsAsApplesTableSays(milliunits: Int, percent: String) {
        #expect(Evaluation.percentage(milliunits: milliunits) == percent)
    }
}
