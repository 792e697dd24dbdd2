import Foundation

extension TransactionFact {
    /// The stored JSON of the fact, written directly (`JSONBytes`): byte
    /// for byte what `LedgerJSON.makeEncoder()` writes (sorted keys, absent
    /// optionals left out, RFC 3339 instants), which
    /// `TransactionFactJSONTests` checks on generated facts. Purchases and
    /// renewals are most of what a ledger appends, and the encoder's
    /// containers and boxing cost several times what the bytes do.
    public func storedJSON() -> Data {
        var writer = JSONBytes()
        writer.bytes.reserveCapacity(256 + transactionID.utf8.count + originalTransactionID.utf8.count + productID.utf8.count)
        writer.object {
            if let autoRenew { $0.bool("autoRenew", autoRenew) }
            if let currency = details.sale.currency { $0.string("currency", currency) }
            if let deviceID { $0.string("deviceId", deviceID) }
            if let duration { $0.string("duration", duration.description) }
            $0.string("environment", environment.rawValue)
            if let expiresDate { $0.date("expiresDate", expiresDate) }
            if let group { $0.string("group", group) }
            if let isUpgraded = details.isUpgraded { $0.bool("isUpgraded", isUpgraded) }
            if let offerDiscount = details.sale.offerDiscount { $0.string("offerDiscount", offerDiscount.rawValue) }
            if let offerType = details.offerType { $0.integer("offerType", Int64(offerType)) }
            $0.string("originalTransactionId", originalTransactionID)
            if let ownershipType = details.ownershipType { $0.string("ownershipType", ownershipType) }
            if let price = details.sale.price { $0.string("price", price.description) }
            $0.string("productId", productID)
            if let productType { $0.string("productType", productType.rawValue) }
            $0.date("purchaseDate", purchaseDate)
            $0.integer("quantity", Int64(quantity))
            $0.string("source", source)
            if let storefront = details.sale.storefront { $0.string("storefront", storefront) }
            $0.string("transactionId", transactionID)
            if let webOrderLineItemID = details.webOrderLineItemID { $0.string("webOrderLineItemId", webOrderLineItemID) }
        }
        return Data(writer.bytes)
    }
}
