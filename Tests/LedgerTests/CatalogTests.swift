import Foundation
import Testing
@testable import Ledger

struct CatalogTests {
    @Test func decodesTheExampleCatalog() throws {
        #expect(catalog.version == 3)
        #expect(catalog.products.count == 7)
        let pass = try #require(catalog.product(id: IDs.pass))
        #expect(pass.type == .nonRenewing)
        #expect(pass.group == "pass")
        #expect(pass.duration == ISODuration(days: 30))
        #expect(pass.reminders.map(\.description) == ["P7D", "P1D", "P0D"])
        let coins = try #require(catalog.product(id: IDs.coins))
        #expect(coins.group == IDs.coins)
        #expect(coins.entitlements.isEmpty)
        #expect(catalog.product(id: "nope") == nil)
        #expect(catalog.entitlementIDs == ["level2", "pro", "starter"])
    }

    @Test(arguments: [
        ("{", nil, "not valid JSON"),
        ("[]", nil, "expected a JSON object"),
        (#"{"products": [{"id": "a", "type": "subscription"}]}"#, "a", "unknown type \"subscription\""),
        (#"{"products": [{"id": "a", "type": "non-renewing"}]}"#, "a", "needs a duration"),
        (#"{"products": [{"id": "a", "type": "non-renewing", "duration": "PT1H"}]}"#, "a", "duration \"PT1H\""),
        (#"{"products": [{"id": "a", "type": "auto-renewable", "reminders": ["P3X"]}]}"#, "a", "reminder \"P3X\""),
        (#"{"products": [{"id": "a", "type": "free"}, {"id": "a", "type": "free"}]}"#, "a", "more than once"),
        (#"{"products": [{"id": "a", "type": "auto-renewable", "duration": "P1M"}]}"#, "a", "only allowed on non-renewing"),
        (#"{"products": [{"id": "a", "type": "consumable", "reminders": ["P1D"]}]}"#, "a", "reminders are only allowed"),
        (#"{"products": [{"id": "a", "type": "auto-renewable", "group": "g"}, {"id": "b", "type": "non-renewing", "duration": "P1D", "group": "g"}]}"#, "b", "mixes"),
        (#"{"products": [{"type": "free"}]}"#, nil, "products[0] needs"),
        (#"{"products": [{"id": "a", "type": "free", "entitlements": "pro"}]}"#, "a", "\"entitlements\" must be an array"),
        (#"{"version": "3", "products": []}"#, nil, "\"version\" must be an integer"),
    ] as [(String, String?, String)])
    func refusesBadCatalogs(json: String, productID: String?, message: String) {
        #expect {
            try Catalog.decode(from: Data(json.utf8))
        } throws: { error in
            guard let error = error as? CatalogError else { return false }
            return error.productID == productID && error.description.contains(message)
                && (productID.map { error.description.contains("'\($0)'") } ?? true)
        }
    }
}
