import Foundation

extension FactRequest {
    /// A purchase: a new transaction (and original transaction, unless named).
    public struct Purchase: Sendable, Hashable {
        public var transactionID: String
        /// The transaction itself unless the purchase continues another.
        public var originalTransactionID: String
        public var productID: String
        public var purchaseDate: Date
        /// The store's end; required for auto-renewables (the `Decider`
        /// checks, as only the catalog knows the type), ignored for others.
        public var expiresDate: Date?
        public var autoRenew: Bool?
        public var quantity: Int
        public var deviceID: String?
        public var environment: Environment
        /// What a signed transaction said beyond its terms.
        public var details: AppleTransactionDetails

        public init(transactionID: String, originalTransactionID: String? = nil, productID: String, purchaseDate: Date,
                    expiresDate: Date? = nil, autoRenew: Bool? = nil, quantity: Int = 1, deviceID: String? = nil,
                    environment: Environment = .production, details: AppleTransactionDetails = AppleTransactionDetails()) {
            self.details = details
            self.transactionID = transactionID
            self.originalTransactionID = originalTransactionID ?? transactionID
            self.productID = productID
            self.purchaseDate = purchaseDate
            self.expiresDate = expiresDate
            self.autoRenew = autoRenew
            self.quantity = quantity
            self.deviceID = deviceID
            self.environment = environment
        }
    }

    /// A renewal of an auto-renewable: a new transaction of an original one.
    /// For a transaction already recorded with an earlier end, the store
    /// extending it (`RENEWAL_EXTENDED`).
    public struct Renewal: Sendable, Hashable {
        public var transactionID: String
        public var originalTransactionID: String
        public var productID: String
        public var purchaseDate: Date
        public var expiresDate: Date
        public var autoRenew: Bool?
        public var quantity: Int
        public var deviceID: String?
        /// An extension: when it took effect (defaults to the decision's `now`).
        public var effectiveDate: Date?
        public var environment: Environment
        /// What a signed transaction said beyond its terms.
        public var details: AppleTransactionDetails

        public init(transactionID: String, originalTransactionID: String, productID: String, purchaseDate: Date,
                    expiresDate: Date, autoRenew: Bool? = nil, quantity: Int = 1, deviceID: String? = nil,
                    effectiveDate: Date? = nil, environment: Environment = .production,
                    details: AppleTransactionDetails = AppleTransactionDetails()) {
            self.details = details
            self.transactionID = transactionID
            self.originalTransactionID = originalTransactionID
            self.productID = productID
            self.purchaseDate = purchaseDate
            self.expiresDate = expiresDate
            self.autoRenew = autoRenew
            self.quantity = quantity
            self.deviceID = deviceID
            self.effectiveDate = effectiveDate
            self.environment = environment
        }
    }

    /// One transaction restored on a device: as `RestoreRequest` with one
    /// transaction, field names without the `transactions[i].` prefix.
    public struct Restore: Sendable, Hashable {
        public var transaction: RestoreRequest.Transaction
        public var deviceID: String?

        public init(transaction: RestoreRequest.Transaction, deviceID: String? = nil) {
            self.transaction = transaction
            self.deviceID = deviceID
        }
    }

    /// A refund or revocation of a recorded transaction.
    public struct Refund: Sendable, Hashable {
        public var transactionID: String
        /// When given, a transaction recorded for another subscriber answers
        /// 409 rather than 404.
        public var originalTransactionID: String?
        /// When access ended (defaults to the decision's `now`).
        public var revocationDate: Date?
        public var reason: String?
        public var environment: Environment
        /// What the store said about the revocation.
        public var details: AppleRevocationDetails

        public init(transactionID: String, originalTransactionID: String? = nil, revocationDate: Date? = nil,
                    reason: String? = nil, environment: Environment = .production,
                    details: AppleRevocationDetails = AppleRevocationDetails()) {
            self.details = details
            self.transactionID = transactionID
            self.originalTransactionID = originalTransactionID
            self.revocationDate = revocationDate
            self.reason = reason
            self.environment = environment
        }
    }

    /// A refund undone by the store (`REFUND_REVERSED`).
    public struct RefundReversal: Sendable, Hashable {
        public var transactionID: String
        /// As for `Refund`.
        public var originalTransactionID: String?
        /// When the reversal took effect (defaults to the decision's `now`).
        public var effectiveDate: Date?
        public var reason: String?
        public var environment: Environment

        public init(transactionID: String, originalTransactionID: String? = nil, effectiveDate: Date? = nil,
                    reason: String? = nil, environment: Environment = .production) {
            self.transactionID = transactionID
            self.originalTransactionID = originalTransactionID
            self.effectiveDate = effectiveDate
            self.reason = reason
            self.environment = environment
        }
    }

    /// Coverage ended.
    public struct Expiry: Sendable, Hashable {
        /// What expired.
        public enum Subject: Sendable, Hashable {
            /// An auto-renewable's original transaction, as the store reports
            /// it; `end` nil: the end the ledger knows.
            case subscription(originalTransactionID: String, end: Date?)
            /// A non-renewing group's coverage, named by one of its products.
            case coverage(productID: String, end: Date)
        }

        public var subject: Subject
        public var reason: String?
        public var environment: Environment

        public init(_ subject: Subject, reason: String? = nil, environment: Environment = .production) {
            self.subject = subject
            self.reason = reason
            self.environment = environment
        }

        public var originalTransactionID: String? {
            if case .subscription(let original, _) = subject { return original }
            return nil
        }

        public var productID: String? {
            if case .coverage(let productID, _) = subject { return productID }
            return nil
        }

        /// The end the fact reports, if it names one.
        public var end: Date? {
            switch subject {
            case .subscription(_, let end): end
            case .coverage(_, let end): end
            }
        }
    }

    /// The subscriber turned auto-renew on or off.
    public struct AutoRenewChange: Sendable, Hashable {
        public var originalTransactionID: String
        public var autoRenew: Bool
        /// Defaults to the product of the original's latest transaction.
        public var productID: String?
        /// When it happened (defaults to the decision's `now`).
        public var effectiveDate: Date?
        public var environment: Environment
        /// A state the store reported (renewal info) rather than a change:
        /// recorded only when it differs from what the ledger knows.
        public var isReportedState: Bool

        public init(originalTransactionID: String, autoRenew: Bool, productID: String? = nil, effectiveDate: Date? = nil,
                    environment: Environment = .production, isReportedState: Bool = false) {
            self.isReportedState = isReportedState
            self.originalTransactionID = originalTransactionID
            self.autoRenew = autoRenew
            self.productID = productID
            self.effectiveDate = effectiveDate
            self.environment = environment
        }
    }

    /// A renewal failed to bill; with a grace end the subscriber keeps access
    /// until then.
    public struct BillingIssue: Sendable, Hashable {
        public var originalTransactionID: String
        /// Defaults to the product of the original's latest transaction.
        public var productID: String?
        public var gracePeriodExpiresDate: Date?
        /// When it happened (defaults to the decision's `now`).
        public var effectiveDate: Date?
        public var environment: Environment
        /// A state the store reported (renewal info) rather than a failure
        /// it announced: recorded only when the open issue differs.
        public var isReportedState: Bool

        public init(originalTransactionID: String, productID: String? = nil, gracePeriodExpiresDate: Date? = nil,
                    effectiveDate: Date? = nil, environment: Environment = .production, isReportedState: Bool = false) {
            self.isReportedState = isReportedState
            self.originalTransactionID = originalTransactionID
            self.productID = productID
            self.gracePeriodExpiresDate = gracePeriodExpiresDate
            self.effectiveDate = effectiveDate
            self.environment = environment
        }
    }
}
