import Foundation
import JSON

extension FactRequest {
    /// Parses and validates a request body against `InputLimits`
    /// (identifiers come back in NFC). Each type requires:
    /// purchase: `transactionId`, `productId`, `purchaseDate` (and
    /// `expiresDate` for auto-renewables, checked by the `Decider`);
    /// renewal: those plus `originalTransactionId` and `expiresDate`;
    /// restore: as purchase; refund and refundReversal: `transactionId`; expiry:
    /// `originalTransactionId`, or `productId` and `expiresDate` for a
    /// non-renewing group; autoRenewChange: `originalTransactionId` and
    /// `autoRenew`; billingIssue: `originalTransactionId`.
    public static func parse(json data: Data) throws(LedgerError) -> FactRequest {
        try parse(FieldReader(fields: FieldReader.object(from: data), prefix: ""))
    }

    /// Parses one `subledger import` line: a request body plus `subscriberId`.
    public static func parseImportLine(_ data: Data) throws(LedgerError) -> (subscriberID: String, request: FactRequest) {
        let reader = FieldReader(fields: try FieldReader.object(from: data), prefix: "")
        let subscriberID = try reader.requiredIdentifier("subscriberId", for: "each import line names its subscriber")
        return (subscriberID, try parse(reader))
    }

    static func parse(_ reader: FieldReader) throws(LedgerError) -> FactRequest {
        let typeNames = FactType.allCases.filter(\.acceptedAsJSON).map(\.rawValue).joined(separator: ", ")
        guard let typeName = try reader.string("type") else { throw .missingField("type", "one of \(typeNames)") }
        guard let type = FactType(rawValue: typeName), type.acceptedAsJSON else {
            throw LedgerError(kind: .badRequest, code: .invalidType,
                              message: "Field 'type' must be one of \(typeNames), got \"\(typeName.prefix(64))\".",
                              field: "type")
        }
        // Every field is checked whatever the type, in one order, so the
        // first bad field is the one reported; then what the type requires.
        let transactionID = try reader.identifier("transactionId")
        let originalTransactionID = try reader.identifier("originalTransactionId")
        let productID = try reader.identifier("productId")
        let purchaseDate = try reader.date("purchaseDate")
        let expiresDate = try reader.date("expiresDate")
        let revocationDate = try reader.date("revocationDate")
        let gracePeriodExpiresDate = try reader.date("gracePeriodExpiresDate")
        let effectiveDate = try reader.date("effectiveDate")
        let reason = try reader.text("reason")
        let autoRenew = try reader.bool("autoRenew")
        let environment = try reader.environment("environment") ?? .production
        let deviceID = try reader.identifier("deviceId")
        let quantity = try reader.positiveInteger("quantity", max: InputLimits.quantities.upperBound) ?? 1
        // What StoreKit's transaction says beyond the terms: for support,
        // and what it cost for the analytics.
        let ownershipType = try reader.oneOf("ownershipType", ["PURCHASED", "FAMILY_SHARED"])
        let (sale, offerType) = try reader.saleTerms()
        let details = AppleTransactionDetails(
            ownershipType: ownershipType, offerType: offerType,
            webOrderLineItemID: try reader.identifier("webOrderLineItemId"),
            isUpgraded: try reader.bool("isUpgraded"), sale: sale)
        let revocation = AppleRevocationDetails(
            revocationReason: try reader.integer("revocationReason", in: 0...99),
            revocationType: try reader.oneOf("revocationType", ["REFUND_FULL", "REFUND_PRORATED", "FAMILY_REVOKE"]),
            revocationPercentage: try reader.integer("revocationPercentage", in: 0...100_000))

        let purpose = "a \(type.rawValue) needs it"
        func required<Value>(_ value: Value?, _ key: String) throws(LedgerError) -> Value {
            guard let value else { throw .missingField(reader.name(key), purpose) }
            return value
        }
        let request: FactRequest
        switch type {
        case .purchase, .restore:
            let transactionID = try required(transactionID, "transactionId")
            let productID = try required(productID, "productId")
            let purchaseDate = try required(purchaseDate, "purchaseDate")
            if type == .purchase {
                request = .purchase(Purchase(
                    transactionID: transactionID, originalTransactionID: originalTransactionID, productID: productID,
                    purchaseDate: purchaseDate, expiresDate: expiresDate, autoRenew: autoRenew, quantity: quantity,
                    deviceID: deviceID, environment: environment, details: details))
            } else {
                request = .restore(Restore(
                    transaction: RestoreRequest.Transaction(
                        transactionID: transactionID, originalTransactionID: originalTransactionID, productID: productID,
                        purchaseDate: purchaseDate, expiresDate: expiresDate, environment: environment, details: details),
                    deviceID: deviceID))
            }
        case .renewal:
            let transactionID = try required(transactionID, "transactionId")
            let originalTransactionID = try required(originalTransactionID, "originalTransactionId")
            let productID = try required(productID, "productId")
            let purchaseDate = try required(purchaseDate, "purchaseDate")
            let expiresDate = try required(expiresDate, "expiresDate")
            request = .renewal(Renewal(
                transactionID: transactionID, originalTransactionID: originalTransactionID, productID: productID,
                purchaseDate: purchaseDate, expiresDate: expiresDate, autoRenew: autoRenew, quantity: quantity,
                deviceID: deviceID, effectiveDate: effectiveDate, environment: environment, details: details))
        case .refund:
            request = .refund(Refund(
                transactionID: try required(transactionID, "transactionId"), originalTransactionID: originalTransactionID,
                revocationDate: revocationDate, reason: reason, environment: environment, details: revocation))
        case .refundReversal:
            request = .refundReversal(RefundReversal(
                transactionID: try required(transactionID, "transactionId"), originalTransactionID: originalTransactionID,
                effectiveDate: effectiveDate, reason: reason, environment: environment))
        case .expiry:
            let subject: Expiry.Subject
            if let originalTransactionID {
                subject = .subscription(originalTransactionID: originalTransactionID, end: expiresDate)
            } else if let productID {
                guard let expiresDate else {
                    throw .missingField("expiresDate", "an expiry by productId needs the coverage end it reports")
                }
                subject = .coverage(productID: productID, end: expiresDate)
            } else {
                throw .missingField("originalTransactionId", "an expiry needs originalTransactionId (or productId for a non-renewing group)")
            }
            request = .expiry(Expiry(subject, reason: reason, environment: environment))
        case .autoRenewChange:
            request = .autoRenewChange(AutoRenewChange(
                originalTransactionID: try required(originalTransactionID, "originalTransactionId"),
                autoRenew: try required(autoRenew, "autoRenew"), productID: productID, effectiveDate: effectiveDate,
                environment: environment))
        case .billingIssue:
            request = .billingIssue(BillingIssue(
                originalTransactionID: try required(originalTransactionID, "originalTransactionId"), productID: productID,
                gracePeriodExpiresDate: gracePeriodExpiresDate, effectiveDate: effectiveDate, environment: environment))
        case .googlePlayPurchase, .googlePlayVoid:
            preconditionFailure("refused above: not accepted as JSON")
        }
        if let purchaseDate, let expiresDate, type != .expiry, expiresDate <= purchaseDate {
            throw .invalidField("expiresDate", expected: "a time after purchaseDate (\(RFC3339.format(purchaseDate)))",
                                got: RFC3339.format(expiresDate))
        }
        return request
    }
}
