import AsyncHTTPClient
import Foundation
import Ledger
import Logging
import Metrics
import NIOCore

/// Apple's legacy `verifyReceipt`: production first, sandbox when production
/// answers 21007, temporary statuses retried with backoff, the rest mapped to
/// errors that say what to do.
struct ReceiptValidator: Sendable {
    var productionURL: String
    var sandboxURL: String
    var sharedSecret: String?
    /// The receipt's `bundle_id` must be this (`SUBLEDGER_APPSTORE_BUNDLE_ID`).
    var bundleID: String?
    var acceptedEnvironments: Set<Ledger.Environment>
    /// The pause before each retry; its count is how many retries there are.
    var retryDelays: [Duration]
    var timeout: Duration
    var client: HTTPClient
    let logger: Logger

    init(configuration: SubledgerConfiguration, client: HTTPClient = .withoutRedirects, logger: Logger) {
        productionURL = configuration.appStoreVerifyURL
        sandboxURL = configuration.appStoreSandboxURL
        sharedSecret = configuration.appStoreSharedSecret
        bundleID = configuration.appStoreBundleID
        acceptedEnvironments = configuration.appStoreEnvironments
        retryDelays = configuration.appStoreReceiptRetryDelays
        timeout = configuration.appStoreReceiptTimeout
        self.client = client
        self.logger = logger
    }

    /// One in-app purchase of the receipt (`latest_receipt_info` or `in_app`).
    struct Transaction: Sendable, Hashable {
        var transactionID: String
        var originalTransactionID: String
        var productID: String
        var purchaseDate: Date
        var expiresDate: Date?
        var cancellationDate: Date?
        var quantity: Int?
        /// `cancellation_reason`: 1 an issue with the app, 0 another reason.
        var cancellationReason: Int? = nil
        var details = AppleTransactionDetails()
    }

    /// One subscription's `pending_renewal_info`: whether it renews, and
    /// whether a failed renewal keeps access (grace) while Apple retries.
    /// https://developer.apple.com/documentation/appstorereceipts/responsebody/pending_renewal_info
    struct PendingRenewal: Sendable, Hashable {
        var originalTransactionID: String
        var productID: String?
        var autoRenew: Bool?
        var isInBillingRetryPeriod: Bool
        var gracePeriodExpiresDate: Date?
    }

    /// A receipt Apple accepted.
    struct Validated: Sendable {
        var environment: Ledger.Environment
        /// Each transaction once, in purchase order.
        var transactions: [Transaction]
        var pendingRenewals: [PendingRenewal] = []
    }

    /// Asks the App Store about `receiptData`.
    func validate(receiptData: String) async throws -> Validated {
        guard let bundleID else {
            throw ServiceError(.notConfigured, code: .appStoreNotConfigured,
                               message: "SUBLEDGER_APPSTORE_BUNDLE_ID is not set: a receipt cannot be checked to be this app's.")
        }
        var body: [String: Any] = ["receipt-data": receiptData, "exclude-old-transactions": false]
        if let sharedSecret { body["password"] = sharedSecret }
        let requestBody = (try? JSONSerialization.data(withJSONObject: body)) ?? Data()
        var url = productionURL
        var environment = Ledger.Environment.production
        var retries = 0
        while true {
            let answer: [String: Any]
            do {
                answer = try await post(requestBody, to: url)
            } catch {
                logger.warning("app store receipt endpoint failed", metadata: [
                    "http.url": "\(url)", "receipt.attempt": "\(retries + 1)", "error": "\(error)",
                ])
                if retries < retryDelays.count {
                    try? await Task.sleep(for: retryDelays[retries])
                    retries += 1
                    continue
                }
                Self.count("unreachable")
                throw ServiceError(.upstreamUnreachable, code: .appStoreUnreachable,
                               message: "The App Store receipt service at \(url) could not be reached or answered badly (\(error)); try again later.")
            }
            let status = (answer["status"] as? NSNumber)?.intValue ?? -1
            if status == 0 {
                let receiptBundle = (answer["receipt"] as? [String: Any])?["bundle_id"] as? String
                guard receiptBundle == bundleID else {
                    Self.count("rejected")
                    throw LedgerError(kind: .rule, code: .bundleIDMismatch,
                                      message: "The receipt is for bundle id '\((receiptBundle ?? "none").prefix(200))', not this app's '\(bundleID)'.",
                                      field: "receiptData")
                }
                let answered = Self.environment(of: answer) ?? environment
                guard acceptedEnvironments.contains(answered) else {
                    Self.count("rejected")
                    throw LedgerError(kind: .rule, code: .environmentNotAccepted,
                                      message: "The receipt is from the \(answered.rawValue) environment, which SUBLEDGER_APPSTORE_ENVIRONMENTS does not accept.",
                                      field: "receiptData")
                }
                Self.count("valid")
                return Validated(environment: answered, transactions: Self.transactions(in: answer),
                                 pendingRenewals: Self.pendingRenewals(in: answer))
            }
            if status == 21007, url == productionURL {
                // A sandbox receipt sent to production: ask the sandbox.
                url = sandboxURL
                environment = .sandbox
                continue
            }
            guard Self.isTemporary(status, answer) else {
                Self.count("rejected")
                throw Self.error(forStatus: status)
            }
            guard retries < retryDelays.count else {
                Self.count("unavailable")
                throw ServiceError(.upstreamUnavailable, code: .appStoreUnavailable,
                               message: "The App Store could not validate the receipt right now (status \(status)) after \(retries + 1) attempts; try again later.")
            }
            logger.info("app store receipt status is temporary; retrying", metadata: [
                "receipt.status": "\(status)", "receipt.attempt": "\(retries + 1)",
            ])
            try? await Task.sleep(for: retryDelays[retries])
            retries += 1
        }
    }

    /// 21002, 21005 and 21009 are temporary by definition; 21100–21199 only
    /// when Apple says so in `is-retryable`.
    static func isTemporary(_ status: Int, _ answer: [String: Any]) -> Bool {
        if [21002, 21005, 21009].contains(status) { return true }
        guard (21100...21199).contains(status) else { return false }
        return (answer["is-retryable"] as? Bool) ?? ((answer["is-retryable"] as? NSNumber)?.boolValue ?? false)
    }

    /// The error a terminal status becomes.
    static func error(forStatus status: Int) -> LedgerError {
        switch status {
        case 21003:
            LedgerError(kind: .rule, code: .receiptInvalid,
                     message: "The App Store could not authenticate the receipt (status 21003); send the receipt exactly as the device read it.",
                     field: "receiptData")
        case 21004:
            LedgerError(kind: .rule, code: .receiptSharedSecretMismatch,
                     message: "The App Store rejected the shared secret (status 21004); set SUBLEDGER_APPSTORE_SHARED_SECRET to the app's shared secret from App Store Connect.")
        case 21008:
            LedgerError(kind: .rule, code: .receiptEnvironmentMismatch,
                     message: "The receipt is from the production environment but was sent to the sandbox (status 21008); check SUBLEDGER_APPSTORE_VERIFY_URL.")
        case 21010:
            LedgerError(kind: .rule, code: .receiptAccountNotFound,
                     message: "The App Store account of this receipt was not found or was deleted (status 21010).", field: "receiptData")
        case 21000:
            LedgerError(kind: .rule, code: .receiptMalformed,
                     message: "The App Store could not read the receipt data (status \(status)); send the receipt as base64.", field: "receiptData")
        default:
            LedgerError(kind: .rule, code: .receiptRejected,
                     message: "The App Store rejected the receipt with status \(status).", field: "receiptData")
        }
    }

    private func post(_ body: Data, to url: String) async throws -> [String: Any] {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: body))
        let response = try await client.execute(request, timeout: .nanoseconds(Int64(timeout / .nanoseconds(1))))
        let bytes = try await response.body.collect(upTo: 32 << 20)
        guard response.status == .ok else { throw UnexpectedAnswer(description: "HTTP \(response.status.code)") }
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes.readableBytesView)) as? [String: Any] else {
            throw UnexpectedAnswer(description: "the answer is not a JSON object")
        }
        return object
    }

    struct UnexpectedAnswer: Error, CustomStringConvertible {
        var description: String
    }

    // MARK: Reading the answer

    static func environment(of answer: [String: Any]) -> Ledger.Environment? {
        switch answer["environment"] as? String {
        case "Sandbox"?: .sandbox
        case "Production"?: .production
        default: nil
        }
    }

    /// `latest_receipt_info` and `receipt.in_app`, each transaction once.
    static func transactions(in answer: [String: Any]) -> [Transaction] {
        let latest = answer["latest_receipt_info"] as? [[String: Any]] ?? []
        let inApp = (answer["receipt"] as? [String: Any])?["in_app"] as? [[String: Any]] ?? []
        var seen = Set<String>()
        var transactions: [Transaction] = []
        for entry in latest + inApp {
            guard let transaction = transaction(entry), seen.insert(transaction.transactionID).inserted else { continue }
            transactions.append(transaction)
        }
        return transactions.sorted { ($0.purchaseDate, $0.transactionID) < ($1.purchaseDate, $1.transactionID) }
    }

    /// A field of a receipt entry as text: Apple writes most as strings,
    /// some as numbers; empty is absent.
    static func string(_ key: String, of entry: [String: Any]) -> String? {
        if let text = entry[key] as? String, !text.isEmpty { return text }
        if let number = entry[key] as? NSNumber { return number.stringValue }
        return nil
    }

    /// A `…_ms` field of a receipt entry: milliseconds since 1970.
    static func date(_ key: String, of entry: [String: Any]) -> Date? {
        string(key, of: entry).flatMap(Int64.init).map { Date(timeIntervalSince1970: Double($0) / 1000) }
    }

    static func transaction(_ entry: [String: Any]) -> Transaction? {
        func string(_ key: String) -> String? { Self.string(key, of: entry) }
        func date(_ key: String) -> Date? { Self.date(key, of: entry) }
        guard let transactionID = string("transaction_id"), let productID = string("product_id"),
              let purchaseDate = date("purchase_date_ms") else { return nil }
        // An introductory price (trial or pay-as-you-go) is offer type 1, a promotional offer 2.
        let offerType: Int? = string("is_trial_period") == "true" || string("is_in_intro_offer_period") == "true" ? 1
            : string("promotional_offer_id") != nil ? 2 : nil
        let details = AppleTransactionDetails(ownershipType: string("in_app_ownership_type"), offerType: offerType,
                                              webOrderLineItemID: string("web_order_line_item_id"),
                                              isUpgraded: string("is_upgraded").map { $0 == "true" },
                                              sale: SaleTerms(offerDiscount: string("is_trial_period") == "true" ? .freeTrial : nil))
        return Transaction(transactionID: transactionID, originalTransactionID: string("original_transaction_id") ?? transactionID,
                           productID: productID, purchaseDate: purchaseDate, expiresDate: date("expires_date_ms"),
                           cancellationDate: date("cancellation_date_ms"), quantity: string("quantity").flatMap { Int($0) },
                           cancellationReason: string("cancellation_reason").flatMap { Int($0) }, details: details)
    }

    static func pendingRenewals(in answer: [String: Any]) -> [PendingRenewal] {
        (answer["pending_renewal_info"] as? [[String: Any]] ?? []).compactMap { entry in
            guard let original = string("original_transaction_id", of: entry) else { return nil }
            return PendingRenewal(
                originalTransactionID: original, productID: string("product_id", of: entry),
                autoRenew: string("auto_renew_status", of: entry).map { $0 == "1" },
                isInBillingRetryPeriod: string("is_in_billing_retry_period", of: entry) == "1",
                gracePeriodExpiresDate: date("grace_period_expires_date_ms", of: entry))
        }
    }

    /// `subledger_appstore_receipts_total{outcome}`.
    static func count(_ outcome: String) {
        Counter(label: "subledger_appstore_receipts_total", dimensions: [("outcome", outcome)]).increment()
    }
}

/// Turns a validated receipt into ledger facts for a subscriber.
struct ReceiptService: Sendable {
    let validator: ReceiptValidator
    let writer: LedgerWriter
    let reader: SubscriberReader

    /// Validates, records every transaction (idempotent by transaction id)
    /// with the receipt's environment in one batch, all of it or none of it,
    /// and answers the subscriber's state.
    func record(receiptData: String, deviceID: String?, subscriberID: String) async throws -> SubscriberState {
        let subscriberID = try InputLimits.validateSubscriberID(subscriberID)
        let receipt = try await validator.validate(receiptData: receiptData)
        for transaction in receipt.transactions where writer.catalog.product(id: transaction.productID) == nil {
            // A product the catalog does not sell (any more): the rest of the receipt still counts.
            validator.logger.warning("receipt transaction skipped: product not in the catalog", metadata: [
                "subscriber.ref": "\(LogReference.subscriber(subscriberID))", "transaction.id": "\(transaction.transactionID)",
                "product.id": "\(transaction.productID)",
            ])
        }
        let commands = Self.facts(receipt, catalog: writer.catalog, deviceID: deviceID).map {
            WriteCommand.fact($0, subscriberID: subscriberID, source: FactSource.appStore)
        }
        if !commands.isEmpty {
            _ = try await writer.write(WriteBatch(commands))
        }
        return try await reader.stateOrEmpty(of: subscriberID)
    }

    /// The facts of a receipt: the first transaction of an original is a
    /// purchase; later ones are renewals (auto-renewables) or restores;
    /// a cancellation date adds a refund, unless the subscriber upgraded away
    /// from the transaction (`is_upgraded`: Apple cancels the old one, it is
    /// not refunded). Then each subscription's `pending_renewal_info`:
    /// auto-renew, and a grace period while a renewal is retried. Products
    /// the catalog does not sell are left out.
    /// https://developer.apple.com/documentation/appstorereceipts/responsebody/latest_receipt_info
    static func facts(_ receipt: ReceiptValidator.Validated, catalog: Catalog, deviceID: String?) -> [FactRequest] {
        var facts: [FactRequest] = []
        var subscriptions = Set<String>()
        for transaction in receipt.transactions {
            guard let product = catalog.product(id: transaction.productID) else { continue }
            if product.type == .autoRenewable { subscriptions.insert(transaction.originalTransactionID) }
            let details = transaction.details
            let isFirst = transaction.transactionID == transaction.originalTransactionID
            let quantity = transaction.quantity.flatMap { $0 >= 1 ? $0 : nil } ?? 1
            switch (isFirst, product.type) {
            case (false, .autoRenewable) where transaction.expiresDate != nil:
                facts.append(.renewal(.init(
                    transactionID: transaction.transactionID, originalTransactionID: transaction.originalTransactionID,
                    productID: transaction.productID, purchaseDate: transaction.purchaseDate, expiresDate: transaction.expiresDate!,
                    quantity: quantity, deviceID: deviceID, environment: receipt.environment, details: details)))
            case (false, let type) where type.isRestorable && type != .autoRenewable:
                facts.append(.restore(.init(
                    transaction: RestoreRequest.Transaction(
                        transactionID: transaction.transactionID, originalTransactionID: transaction.originalTransactionID,
                        productID: transaction.productID, purchaseDate: transaction.purchaseDate, environment: receipt.environment,
                        details: details),
                    deviceID: deviceID)))
            default:
                facts.append(.purchase(.init(
                    transactionID: transaction.transactionID, originalTransactionID: transaction.originalTransactionID,
                    productID: transaction.productID, purchaseDate: transaction.purchaseDate,
                    expiresDate: product.type == .autoRenewable ? transaction.expiresDate : nil,
                    quantity: quantity, deviceID: deviceID, environment: receipt.environment, details: details)))
            }
            if let cancelled = transaction.cancellationDate, details.isUpgraded != true {
                let reason = switch transaction.cancellationReason {
                case 1?: "refunded: an issue with the app"
                case 0?: "refunded: another reason"
                default: "cancelled by the App Store"
                }
                facts.append(.refund(.init(
                    transactionID: transaction.transactionID, originalTransactionID: transaction.originalTransactionID,
                    revocationDate: cancelled, reason: reason, environment: receipt.environment,
                    details: AppleRevocationDetails(revocationReason: transaction.cancellationReason))))
            }
        }
        for renewal in receipt.pendingRenewals where subscriptions.contains(renewal.originalTransactionID) {
            // Undated: the Decider records them only when they differ from what the ledger knows.
            if let autoRenew = renewal.autoRenew {
                facts.append(.autoRenewChange(.init(originalTransactionID: renewal.originalTransactionID, autoRenew: autoRenew,
                                                    environment: receipt.environment)))
            }
            if renewal.isInBillingRetryPeriod, let grace = renewal.gracePeriodExpiresDate {
                facts.append(.billingIssue(.init(originalTransactionID: renewal.originalTransactionID,
                                                 gracePeriodExpiresDate: grace, environment: receipt.environment)))
            }
        }
        return facts
    }
}
