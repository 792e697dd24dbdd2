import Foundation

/// One fact from the app's backend: the body of
/// `POST /v1/subscribers/{id}/events` (and one line of `subledger import`).
public struct FactRequest: Sendable, Hashable {
    /// The fact types; the first five are the HTTP contract's, the last
    /// three are produced by the App Store integration.
    public enum FactType: String, Sendable, Hashable, CaseIterable {
        case purchase, renewal, restore, refund, expiry
        case autoRenewChange, billingIssue, refundReversal
    }

    public var type: FactType
    public var transactionId: String?
    /// Defaults to `transactionId` for purchases and restores.
    public var originalTransactionId: String?
    public var productId: String?
    public var purchaseDate: Date?
    public var expiresDate: Date?
    /// Refunds: when access ended (defaults to the decision's `now`).
    public var revocationDate: Date?
    public var gracePeriodExpiresDate: Date?
    /// Auto-renew changes and billing issues: when it happened (defaults to `now`).
    public var effectiveDate: Date?
    public var reason: String?
    public var autoRenew: Bool?
    public var environment: Environment
    public var deviceId: String?
    public var quantity: Int?

    public init(type: FactType, transactionId: String? = nil, originalTransactionId: String? = nil,
                productId: String? = nil, purchaseDate: Date? = nil, expiresDate: Date? = nil,
                revocationDate: Date? = nil, gracePeriodExpiresDate: Date? = nil, effectiveDate: Date? = nil,
                reason: String? = nil, autoRenew: Bool? = nil, environment: Environment = .production,
                deviceId: String? = nil, quantity: Int? = nil) {
        self.type = type
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.purchaseDate = purchaseDate
        self.expiresDate = expiresDate
        self.revocationDate = revocationDate
        self.gracePeriodExpiresDate = gracePeriodExpiresDate
        self.effectiveDate = effectiveDate
        self.reason = reason
        self.autoRenew = autoRenew
        self.environment = environment
        self.deviceId = deviceId
        self.quantity = quantity
    }

    /// Parses and validates a request body. Each type requires:
    /// purchase: `transactionId`, `productId`, `purchaseDate` (and
    /// `expiresDate` for auto-renewables, checked by the `Decider`);
    /// renewal: those plus `originalTransactionId` and `expiresDate`;
    /// restore: as purchase; refund and refundReversal: `transactionId`; expiry:
    /// `originalTransactionId` or `productId`; autoRenewChange:
    /// `originalTransactionId` and `autoRenew`; billingIssue:
    /// `originalTransactionId`.
    public static func parse(json data: Data) throws(LedgerError) -> FactRequest {
        try parse(FieldReader(fields: FieldReader.object(from: data), prefix: ""))
    }

    /// Parses one `subledger import` line: a request body plus `subscriberId`.
    public static func parseImportLine(_ data: Data) throws(LedgerError) -> (subscriberID: String, request: FactRequest) {
        let reader = FieldReader(fields: try FieldReader.object(from: data), prefix: "")
        let subscriberID = try reader.requiredString("subscriberId", for: "each import line names its subscriber")
        return (subscriberID, try parse(reader))
    }

    static func parse(_ reader: FieldReader) throws(LedgerError) -> FactRequest {
        guard let typeName = try reader.string("type") else {
            throw .missingField("type", "one of \(FactType.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        guard let type = FactType(rawValue: typeName) else {
            throw LedgerError(kind: .badRequest, code: "invalid_type",
                              message: "Field 'type' must be one of \(FactType.allCases.map(\.rawValue).joined(separator: ", ")), got \"\(typeName.prefix(64))\".",
                              field: "type")
        }
        var request = FactRequest(
            type: type,
            transactionId: try reader.string("transactionId"),
            originalTransactionId: try reader.string("originalTransactionId"),
            productId: try reader.string("productId"),
            purchaseDate: try reader.date("purchaseDate"),
            expiresDate: try reader.date("expiresDate"),
            revocationDate: try reader.date("revocationDate"),
            gracePeriodExpiresDate: try reader.date("gracePeriodExpiresDate"),
            effectiveDate: try reader.date("effectiveDate"),
            reason: try reader.string("reason", maxLength: 1000),
            autoRenew: try reader.bool("autoRenew"),
            environment: try reader.environment("environment") ?? .production,
            deviceId: try reader.string("deviceId"),
            quantity: try reader.positiveInteger("quantity", max: 1_000_000)
        )
        let purpose = "a \(type.rawValue) needs it"
        switch type {
        case .purchase, .restore:
            _ = try reader.requiredString("transactionId", for: purpose)
            _ = try reader.requiredString("productId", for: purpose)
            _ = try reader.requiredDate("purchaseDate", for: purpose)
            if request.originalTransactionId == nil { request.originalTransactionId = request.transactionId }
        case .renewal:
            _ = try reader.requiredString("transactionId", for: purpose)
            _ = try reader.requiredString("originalTransactionId", for: purpose)
            _ = try reader.requiredString("productId", for: purpose)
            _ = try reader.requiredDate("purchaseDate", for: purpose)
            _ = try reader.requiredDate("expiresDate", for: purpose)
        case .refund, .refundReversal:
            _ = try reader.requiredString("transactionId", for: purpose)
        case .expiry:
            if request.originalTransactionId == nil, request.productId == nil {
                throw .missingField("originalTransactionId", "an expiry needs originalTransactionId (or productId for a non-renewing group)")
            }
        case .autoRenewChange:
            _ = try reader.requiredString("originalTransactionId", for: purpose)
            guard request.autoRenew != nil else { throw .missingField("autoRenew", purpose) }
        case .billingIssue:
            _ = try reader.requiredString("originalTransactionId", for: purpose)
        }
        if let purchaseDate = request.purchaseDate, let expiresDate = request.expiresDate,
           type != .expiry, expiresDate <= purchaseDate {
            throw .invalidField("expiresDate", expected: "a time after purchaseDate (\(RFC3339.format(purchaseDate)))",
                                got: RFC3339.format(expiresDate))
        }
        return request
    }
}

/// The body of `POST /v1/subscribers/{id}/restore`: what the device's
/// StoreKit reported, to be made available to the subscriber.
public struct RestoreRequest: Sendable, Hashable {
    /// One restored transaction.
    public struct Transaction: Sendable, Hashable {
        public var transactionId: String
        public var originalTransactionId: String
        public var productId: String
        public var purchaseDate: Date
        public var expiresDate: Date?
        public var environment: Environment

        public init(transactionId: String, originalTransactionId: String? = nil, productId: String,
                    purchaseDate: Date, expiresDate: Date? = nil, environment: Environment = .production) {
            self.transactionId = transactionId
            self.originalTransactionId = originalTransactionId ?? transactionId
            self.productId = productId
            self.purchaseDate = purchaseDate
            self.expiresDate = expiresDate
            self.environment = environment
        }
    }

    public var deviceId: String?
    public var transactions: [Transaction]

    public init(deviceId: String?, transactions: [Transaction]) {
        self.deviceId = deviceId
        self.transactions = transactions
    }

    /// Parses and validates a restore body; errors name the field, e.g.
    /// `transactions[1].purchaseDate`.
    public static func parse(json data: Data) throws(LedgerError) -> RestoreRequest {
        let reader = FieldReader(fields: try FieldReader.object(from: data), prefix: "")
        guard let items = try reader.array("transactions") else {
            throw .missingField("transactions", "an array of {transactionId, originalTransactionId, productId, purchaseDate, expiresDate}")
        }
        guard items.count <= 1000 else {
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
                transactionId: try field.requiredString("transactionId", for: purpose),
                originalTransactionId: try field.string("originalTransactionId"),
                productId: try field.requiredString("productId", for: purpose),
                purchaseDate: try field.requiredDate("purchaseDate", for: purpose),
                expiresDate: try field.date("expiresDate"),
                environment: try field.environment("environment") ?? environment
            )
            if let expiresDate = transaction.expiresDate, expiresDate <= transaction.purchaseDate {
                throw .invalidField(field.name("expiresDate"), expected: "a time after purchaseDate", got: RFC3339.format(expiresDate))
            }
            transactions.append(transaction)
        }
        return RestoreRequest(deviceId: try reader.string("deviceId"), transactions: transactions)
    }
}
