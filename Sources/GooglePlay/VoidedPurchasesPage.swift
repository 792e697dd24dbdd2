import Foundation
import JSON
import Ledger

/// One page of `purchases.voidedpurchases.list`: the voided purchases read
/// one by one into the ledger's facts, and the items that could not be read,
/// each on its own. The reconciler revokes what it could read and reports
/// the rest; one bad item never halts it.
/// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.voidedpurchases/list
/// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.voidedpurchases#VoidedPurchase
public struct VoidedPurchasesPage: Sendable, Hashable {
    public var voids: [GooglePlayVoid]
    public var failures: [ItemFailure]
    /// `tokenPagination.nextPageToken`: ask for it next; nil on the last page.
    public var nextPageToken: String?

    /// An item of `voidedPurchases` that is not a `VoidedPurchase` as Google
    /// documents it.
    public struct ItemFailure: Sendable, Hashable, CustomStringConvertible {
        /// Its position in `voidedPurchases`.
        public var index: Int
        /// The field at fault, `voidedPurchases[3].voidedTimeMillis`.
        public var field: String
        public var message: String

        public init(index: Int, field: String, message: String) {
            self.index = index
            self.field = field
            self.message = message
        }

        public var description: String { "voidedPurchases[\(index)]: \(message)" }
    }

    public init(voids: [GooglePlayVoid], failures: [ItemFailure] = [], nextPageToken: String? = nil) {
        self.voids = voids
        self.failures = failures
        self.nextPageToken = nextPageToken
    }

    /// Reads a page. Only a page that is not `{"voidedPurchases": [...],
    /// "tokenPagination": {...}}` at all throws; Google omits both on an
    /// empty last page. The API names no environment: the facts carry
    /// `environment` (the reconciler lists with the Production app).
    public static func parse(json data: Data, environment: Ledger.Environment = .production)
        throws(GooglePlayParseError) -> VoidedPurchasesPage {
        let root = try FieldReader.document(data, expected: "a VoidedPurchasesListResponse JSON object")
        let items = try root.array("voidedPurchases") ?? []
        let nextPageToken = try root.object("tokenPagination")?.string("nextPageToken", maximumBytes: GooglePlayLimits.maximumTokenBytes)

        var page = VoidedPurchasesPage(voids: [], nextPageToken: nextPageToken.flatMap { $0.isEmpty ? nil : $0 })
        for (index, item) in items.enumerated() {
            do {
                page.voids.append(try voided(item, path: "voidedPurchases[\(index)]", environment: environment))
            } catch {
                page.failures.append(ItemFailure(index: index, field: error.field, message: error.message))
            }
        }
        return page
    }

    static func voided(_ value: JSONValue, path: String, environment: Ledger.Environment) throws(GooglePlayParseError) -> GooglePlayVoid {
        let item = try FieldReader(value, path: path, expected: "a VoidedPurchase object")
        let token = try item.require(item.token("purchaseToken"), "purchaseToken", FieldReader.tokenExpectation)
        let voidedAt = try item.require(item.milliseconds("voidedTimeMillis"), "voidedTimeMillis", "milliseconds since 1970")
        return GooglePlayVoid(purchaseToken: token, orderID: try item.identifier("orderId"), voidedAt: voidedAt,
                              reason: try code(item, "voidedReason"), voidedSource: try code(item, "voidedSource"),
                              environment: environment)
    }

    /// `voidedReason` (0…7) and `voidedSource` (0…2), kept as Google numbers
    /// them; a number it adds later is kept too.
    private static func code(_ item: FieldReader, _ key: String) throws(GooglePlayParseError) -> Int? {
        guard let number = try item.integer(key) else { return nil }
        guard (0...1_000_000).contains(number) else {
            throw .invalid(item.name(key), expected: "a code between 0 and 1000000", got: "\(number)")
        }
        return Int(number)
    }
}
