import AppStore
import Foundation
import JSON
import Ledger
import Metrics

/// `POST /v1/subscribers/{id}/restore` with its App Store checks: a body of
/// `signedTransactions` (JWS from StoreKit 2 on the device) is verified like
/// a notification's transaction and recorded with the signed data; a plain
/// body is checked with Get Transaction History first when
/// `SUBLEDGER_RESTORE_VERIFY=api`. Either way the client's fields alone can no
/// longer move a subscription to another account.
extension AppStoreIntegration {
    /// Parses, verifies and records a restore; the subscriber's state after it.
    public func restore(body: Data, subscriberID: String) async throws -> WriteResult {
        let fields = try FieldReader(body: body)
        if let signed = try fields.array("signedTransactions") {
            guard try fields.array("transactions") == nil else {
                throw LedgerError(kind: .badRequest, code: .invalidField,
                                  message: "Send either 'transactions' or 'signedTransactions', not both.", field: "signedTransactions")
            }
            let request = try await verifiedRestore(signed, deviceID: try fields.identifier("deviceId"))
            return try await writer.restore(request, subscriberID: subscriberID)
        }
        var request = try RestoreRequest.parse(json: body)
        if restoreVerification == .api {
            request = try await checkedWithTransactionHistory(request)
        }
        return try await writer.restore(request, subscriberID: subscriberID)
    }

    /// Each JWS verified (chain to the configured roots, signature, bundle id,
    /// input limits); the first that fails refuses the whole restore (400),
    /// and nothing is stored. Revoked transactions are left out.
    func verifiedRestore(_ items: [JSONValue], deviceID: String?) async throws -> RestoreRequest {
        guard let verifier = notifications?.verifier else {
            throw ServiceError(.notConfigured, code: .appStoreNotConfigured, message: unavailable)
        }
        guard !items.isEmpty, items.count <= InputLimits.maximumRestoredTransactions else {
            throw LedgerError.invalidField("signedTransactions", expected: "1 to \(InputLimits.maximumRestoredTransactions) JWS strings",
                                           got: "\(items.count)")
        }
        var transactions: [RestoreRequest.Transaction] = []
        for (index, item) in items.enumerated() {
            let field = "signedTransactions[\(index)]"
            guard case .string(let jws) = item, !jws.isEmpty, jws.utf8.count <= 64 << 10 else {
                throw LedgerError.invalidField(field, expected: "a JWS string of at most 64 KiB (StoreKit's jwsRepresentation)")
            }
            let transaction: TransactionInfo
            do {
                transaction = try await verifier.verifyTransaction(jws, field: field)
            } catch {
                Self.countRestore("refused")
                logger.notice("signed restore refused", metadata: [
                    "error.code": "\(error.code)", "error.field": "\(error.field)", "error.message": "\(error.message)",
                ])
                throw error.ledgerError
            }
            if transaction.revocationDate != nil {
                logger.info("revoked transaction left out of a signed restore", metadata: ["transaction.id": "\(transaction.transactionID)"])
                continue
            }
            transactions.append(Self.restored(transaction))
        }
        Self.countRestore("verified")
        return RestoreRequest(deviceID: deviceID, transactions: transactions)
    }

    /// Every transaction looked up in the customer's history at Apple and
    /// replaced by Apple's data; one Apple does not list, or lists with
    /// another original or product, refuses the restore (422
    /// `restore_not_verified`) before anything is stored or moved.
    func checkedWithTransactionHistory(_ request: RestoreRequest) async throws -> RestoreRequest {
        let api = try requireAPI()
        let products = Array(Set(request.transactions.map(\.productID))).sorted()
        var known: [String: TransactionInfo] = [:]
        var asked = Set<String>()
        var checked = RestoreRequest(deviceID: request.deviceID, transactions: [])
        for (index, transaction) in request.transactions.enumerated() {
            let field = "transactions[\(index)]"
            if known[transaction.transactionID] == nil, asked.insert(transaction.transactionID).inserted {
                // One customer's history answers for all of their transactions.
                for found in try await history(of: transaction.transactionID, environment: transaction.environment,
                                               productIDs: products, api: api) {
                    known[found.transactionID] = found
                }
            }
            guard let apple = known[transaction.transactionID] else {
                Self.countRestore("not_verified")
                throw LedgerError(kind: .rule, code: .restoreNotVerified,
                                  message: "The App Store lists no transaction '\(transaction.transactionID)' of this app in \(transaction.environment.rawValue) (SUBLEDGER_RESTORE_VERIFY=api); nothing was restored.",
                                  field: field + ".transactionId")
            }
            let original = apple.originalTransactionID ?? apple.transactionID
            guard original == transaction.originalTransactionID, apple.productID == transaction.productID else {
                Self.countRestore("not_verified")
                throw LedgerError(kind: .rule, code: .restoreNotVerified,
                                  message: "The App Store records transaction '\(apple.transactionID)' as product '\(apple.productID)' of original transaction '\(original)', not what the restore says; nothing was restored.",
                                  field: field)
            }
            if apple.revocationDate != nil { continue }
            checked.transactions.append(Self.restored(apple))
        }
        Self.countRestore("verified")
        return checked
    }

    /// Every page of the history of `transactionID`'s customer; none when Apple does not know it.
    private func history(of transactionID: String, environment: Ledger.Environment, productIDs: [String],
                         api: AppStoreAPIClient) async throws -> [TransactionInfo] {
        var transactions: [TransactionInfo] = []
        var revision: String?
        var pages = 0
        do {
            repeat {
                let page = try await api.transactionHistory(transactionID: transactionID, environment: environment,
                                                            revision: revision, productIDs: productIDs)
                transactions += page.transactions
                pages += 1
                revision = page.hasMore ? page.revision : nil
            } while revision != nil && pages < 500
        } catch let error as AppStoreAPIError where error.kind == .notFound {
            return []
        }
        return transactions
    }

    /// A restored transaction as Apple signed it.
    static func restored(_ transaction: TransactionInfo) -> RestoreRequest.Transaction {
        RestoreRequest.Transaction(
            transactionID: transaction.transactionID, originalTransactionID: transaction.originalTransactionID ?? transaction.transactionID,
            productID: transaction.productID, purchaseDate: transaction.purchaseDate, expiresDate: transaction.expiresDate,
            environment: AppStoreAPIClient.ledgerEnvironment(transaction.environment),
            details: transaction.details)
    }

    /// `subledger_appstore_restores_total{outcome}`: verified restores.
    static func countRestore(_ outcome: String) {
        Counter(label: "subledger_appstore_restores_total", dimensions: [("outcome", outcome)]).increment()
    }
}
