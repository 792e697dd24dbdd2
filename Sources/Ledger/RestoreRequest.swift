import Foundation
import JSON

/// The body of `POST /v1/subscribers/{id}/restore`: what the device's
/// StoreKit reported, to be made available to the subscriber.
public struct RestoreRequest: Sendable, Hashable {
    /// One restored transaction.
    public struct Transaction: Sendable, Hashable {
        public var transactionID: String
        public var originalTransactionID: String
        public var productID: String
        public var purchaseDate: Date
        public var expiresDate: Date?
        public var environment: Environment
        /// What a signed transaction said beyond its terms.
        public var details: AppleTransactionDetails

        public init(transactionID: String, originalTransactionID: String? = nil, productID: String,
                    purchaseDate: Date, expiresDate: Date? = nil, environment: Environment = .production,
                    details: AppleTransactionDetails = AppleTransactionDetails()) {
            self.transactionID = transactionID
            self.originalTransactionID = originalTransactionID ?? transactionID
            self.productID = productID
            self.purchaseDate = purchaseDate
            self.expiresDate = expiresDate
            self.environment = environment
            self.details = details
        }
    }

    public var deviceID: String?
    public var transactions: [Transaction]

    public init(deviceID: String?, transactions: [Transaction]) {
        self.deviceID = deviceID
        self.transactions = transactions
    }

    /// Every transaction and original transaction id the restore names, whose
    /// owners the decision may ask about: look these up before calling the
    /// `Decider`.
    public var referencedTransactionIDs: Set<String> {
        Set(transactions.flatMap {
            [$0.environment.ownershipKey($0.transactionID), $0.environment.ownershipKey($0.originalTransactionID)]
        })
    }

    /// Parses and validates a restore body against `InputLimits`
    /// (identifiers come back in NFC); errors name the field, e.g.
    /// `transactions[1].purchaseDate`.
    public static func parse(json data: Data) throws(LedgerError) -> RestoreRequest {
        let reader = FieldReader(fields: try FieldReader.object(from: data), prefix: "")
        guard let items = try reader.array("transactions") else {
            throw .missingField("transactions", "an array of {transactionId, originalTransactionId, productId, purchaseDate, expiresDate}")
        }
        guard items.count <= InputLimits.maximumRestoredTransactions else {
            throw .invalidField("transactions", expected: "at most 1000 transactions", got: "\(items.count)")
        }
        let environment = try reader.environment("environment") ?? .production
        var transactions: [Transaction] = []
        for (index, item) in items.enumerated() {
            guard case .object(let fields) = item else {
                throw .invalidField("transactions[\(index)]", expected: "an object", got: item.kindDescription)
            }
            let field = FieldReader(fields: fields, prefix: "transactions[\(index)].")
            let purpose = "each restored transaction needs it"
            let transaction = Transaction(
                transactionID: try field.requiredIdentifier("transactionId", for: purpose),
                originalTransactionID: try field.identifier("originalTransactionId"),
                productID: try field.requiredIdentifier("productId", for: purpose),
                purchaseDate: try field.requiredDate("purchaseDate", for: purpose),
                expiresDate: try field.date("expiresDate"),
                environment: try field.environment("environment") ?? environment
            )
            if let expiresDate = transaction.expiresDate, expiresDate <= transaction.purchaseDate {
                throw .invalidField(field.name("expiresDate"), expected: "a time after purchaseDate", got: RFC3339.format(expiresDate))
            }
            transactions.append(transaction)
        }
        return RestoreRequest(deviceID: try reader.identifier("deviceId"), transactions: transactions)
    }
}
