import AppStore
import Foundation
import Ledger

/// `GET /v1/orders/{orderId}`: the transactions Apple lists for an order id
/// (the one on the customer's e-mail receipt) and who holds each in the ledger.
public struct OrderReport: Sendable, Encodable {
    public struct Transaction: Sendable, Encodable {
        public var transactionID: String
        public var originalTransactionID: String
        public var productID: String
        public var purchaseDate: Date
        public var expiresDate: Date?
        public var revocationDate: Date?
        public var quantity: Int?
        public var environment: Ledger.Environment
        /// The subscriber holding the original transaction now; nil when the ledger has never seen it.
        public var subscriberID: String?

        enum CodingKeys: String, CodingKey {
            case transactionID = "transactionId", originalTransactionID = "originalTransactionId", productID = "productId"
            case purchaseDate, expiresDate, revocationDate, quantity, environment, subscriberID = "subscriberId"
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(transactionID, forKey: .transactionID)
            try container.encode(originalTransactionID, forKey: .originalTransactionID)
            try container.encode(productID, forKey: .productID)
            try container.encode(purchaseDate, forKey: .purchaseDate)
            try container.encodeIfPresent(expiresDate, forKey: .expiresDate)
            try container.encodeIfPresent(revocationDate, forKey: .revocationDate)
            try container.encodeIfPresent(quantity, forKey: .quantity)
            try container.encode(environment, forKey: .environment)
            // Explicitly null: "nobody in the ledger holds it" is an answer.
            try container.encode(subscriberID, forKey: .subscriberID)
        }
    }

    public var orderID: String
    public var environment: Ledger.Environment
    public var transactions: [Transaction]

    enum CodingKeys: String, CodingKey { case orderID = "orderId", environment, transactions }
}

extension AppStoreIntegration {
    /// Look Up Order ID, then the owners in the ledger. Without
    /// `environment`, the environments this deployment accepts are asked in
    /// turn, Production first, and the first that knows the order answers.
    /// 404 `order_not_found` when none does.
    public func lookUpOrder(_ orderID: String, environment: Ledger.Environment? = nil) async throws -> OrderReport {
        let orderID = try InputLimits.identifier(orderID, field: "orderId")
        let api = try requireAPI()
        let candidates = environment.map { [$0] } ?? orderEnvironments
        var found: (environment: Ledger.Environment, transactions: [TransactionInfo])?
        for candidate in candidates where found == nil {
            do {
                if let transactions = try await api.lookUpOrder(orderID: orderID, environment: candidate) {
                    found = (candidate, transactions)
                }
            } catch let error as AppStoreAPIError where error.kind == .notFound {
                continue
            }
        }
        guard let (environment, transactions) = found else {
            let asked = candidates.map(\.rawValue).joined(separator: " or ")
            throw LedgerError(kind: .notFound, code: .orderNotFound,
                              message: "The App Store knows no order '\(orderID)' of this app in \(asked).", field: "orderId")
        }
        // Owned per environment: the order's environment's keys.
        let ids = Set(transactions.flatMap {
            [environment.ownershipKey($0.transactionID), environment.ownershipKey($0.originalTransactionID ?? $0.transactionID)]
        })
        let owners = try await OwnershipStore(pool: writer.pool).owners(of: ids)
        return OrderReport(orderID: orderID, environment: environment, transactions: transactions.map { transaction in
            let original = transaction.originalTransactionID ?? transaction.transactionID
            return OrderReport.Transaction(
                transactionID: transaction.transactionID, originalTransactionID: original, productID: transaction.productID,
                purchaseDate: transaction.purchaseDate, expiresDate: transaction.expiresDate, revocationDate: transaction.revocationDate,
                quantity: transaction.quantity, environment: AppStoreAPIClient.ledgerEnvironment(transaction.environment),
                subscriberID: owners[environment.ownershipKey(original)])
        })
    }
}
