import AppStore
import Foundation
import Ledger

/// The endpoints Subledger calls, their answers decoded and every signed
/// part verified. A part that fails verification fails the whole answer
/// (`unverifiedAnswer`): nothing of a forged answer is ever used. Get
/// Notification History is the exception: its items are notifications of
/// their own, and one that fails is handed back apart, with its reason.
extension AppStoreAPIClient {
    /// A notification of Get Notification History, verified, with the JWS as Apple signed it.
    public struct HistoricNotification: Sendable {
        public var notification: VerifiedNotification
        public var signedPayload: String
    }

    /// An item of Get Notification History that failed verification: never
    /// applied, kept with the reason so the rest of the history still counts.
    public struct UnverifiedNotification: Sendable {
        public var signedPayload: String
        /// Why; `field` names the item (`notificationHistory[3].signedPayload`).
        public var error: AppStoreVerificationError
    }

    public struct NotificationHistoryPage: Sendable {
        public var notifications: [HistoricNotification]
        /// The page's items that failed verification.
        public var unverified: [UnverifiedNotification]
        /// Give it back for the next page while `hasMore`.
        public var paginationToken: String?
        public var hasMore: Bool
    }

    /// Get Notification History: the notifications Apple sent (or tried to)
    /// between `start` and `end`, one page of at most 20.
    public func notificationHistory(environment: Ledger.Environment, start: Date, end: Date,
                                    paginationToken: String? = nil) async throws -> NotificationHistoryPage {
        struct Body: Encodable { var startDate: Int64; var endDate: Int64 }
        struct Answer: Decodable {
            struct Item: Decodable { var signedPayload: String }
            var notificationHistory: [Item]?
            var hasMore: Bool?
            var paginationToken: String?
        }
        // The same bytes for every page, as Apple asks.
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let body = try encoder.encode(Body(startDate: Self.milliseconds(start), endDate: Self.milliseconds(end)))
        let answer: Answer = try await decode(Call(
            endpoint: .notificationHistory, environment: environment, method: .POST, path: "/inApps/v1/notifications/history",
            query: paginationToken.map { [("paginationToken", $0)] } ?? [], body: body))
        var notifications: [HistoricNotification] = []
        var unverified: [UnverifiedNotification] = []
        for (index, item) in (answer.notificationHistory ?? []).enumerated() {
            do {
                let verified = try await verified(.notificationHistory, field: "notificationHistory[\(index)]", nested: true) {
                    try await verifier.verifyNotification(signedPayload: item.signedPayload)
                }
                notifications.append(HistoricNotification(notification: verified, signedPayload: item.signedPayload))
            } catch let error as AppStoreAPIError {
                guard case .unverifiedAnswer(let cause) = error.kind else { throw error }
                unverified.append(UnverifiedNotification(signedPayload: item.signedPayload, error: cause))
            }
        }
        let hasMore = answer.hasMore ?? false
        if hasMore && answer.paginationToken == nil {
            throw AppStoreAPIError(.invalidAnswer, endpoint: .notificationHistory, message: "hasMore without a paginationToken")
        }
        return NotificationHistoryPage(notifications: notifications, unverified: unverified, paginationToken: answer.paginationToken,
                                       hasMore: hasMore)
    }

    public struct TransactionHistoryPage: Sendable {
        public var transactions: [TransactionInfo]
        public var revision: String?
        public var hasMore: Bool
    }

    /// Get Transaction History (v2): the customer's transactions in the app,
    /// found by any of their transaction ids; one page, oldest first.
    public func transactionHistory(transactionID: String, environment: Ledger.Environment, revision: String? = nil,
                                   productIDs: [String] = []) async throws -> TransactionHistoryPage {
        struct Answer: Decodable { var signedTransactions: [String]?; var revision: String?; var hasMore: Bool? }
        var query = [("sort", "ASCENDING")]
        if let revision { query.append(("revision", revision)) }
        query += productIDs.map { ("productId", $0) }
        let answer: Answer = try await decode(Call(
            endpoint: .transactionHistory, environment: environment, path: "/inApps/v2/history/\(Self.pathSegment(transactionID))",
            query: query))
        var transactions: [TransactionInfo] = []
        for (index, signed) in (answer.signedTransactions ?? []).enumerated() {
            transactions.append(try await verifiedTransaction(signed, .transactionHistory, environment, field: "signedTransactions[\(index)]"))
        }
        return TransactionHistoryPage(transactions: transactions, revision: answer.revision, hasMore: answer.hasMore ?? false)
    }

    /// One subscription of Get All Subscription Statuses.
    public struct SubscriptionStatus: Sendable {
        public var subscriptionGroupIdentifier: String?
        /// 1 active, 2 expired, 3 billing retry, 4 grace period, 5 revoked.
        public var status: Int
        public var originalTransactionID: String
        public var transaction: TransactionInfo
        public var renewal: RenewalInfo?
    }

    /// Get All Subscription Statuses: the latest transaction and renewal info
    /// of every auto-renewable subscription of the customer.
    public func subscriptionStatuses(transactionID: String, environment: Ledger.Environment) async throws -> [SubscriptionStatus] {
        struct Answer: Decodable {
            struct Group: Decodable { var subscriptionGroupIdentifier: String?; var lastTransactions: [Last]? }
            struct Last: Decodable {
                var status: Int?
                var originalTransactionId: String?
                var signedTransactionInfo: String
                var signedRenewalInfo: String?
            }
            var data: [Group]?
        }
        let answer: Answer = try await decode(Call(
            endpoint: .subscriptionStatuses, environment: environment, path: "/inApps/v1/subscriptions/\(Self.pathSegment(transactionID))"))
        var statuses: [SubscriptionStatus] = []
        for (groupIndex, group) in (answer.data ?? []).enumerated() {
            for (index, last) in (group.lastTransactions ?? []).enumerated() {
                let field = "data[\(groupIndex)].lastTransactions[\(index)]"
                let transaction = try await verifiedTransaction(last.signedTransactionInfo, .subscriptionStatuses, environment,
                                                                field: field + ".signedTransactionInfo")
                var renewal: RenewalInfo?
                if let signed = last.signedRenewalInfo {
                    renewal = try await verified(.subscriptionStatuses, field: field + ".signedRenewalInfo") {
                        try await verifier.verifyRenewalInfo(signed, field: field + ".signedRenewalInfo")
                    }
                }
                statuses.append(SubscriptionStatus(
                    subscriptionGroupIdentifier: group.subscriptionGroupIdentifier, status: last.status ?? 0,
                    originalTransactionID: transaction.originalTransactionID ?? last.originalTransactionId ?? transaction.transactionID,
                    transaction: transaction, renewal: renewal))
            }
        }
        return statuses
    }

    /// Look Up Order ID: the transactions of the order id on the customer's
    /// e-mail receipt; nil when Apple says the order id is not valid.
    public func lookUpOrder(orderID: String, environment: Ledger.Environment) async throws -> [TransactionInfo]? {
        struct Answer: Decodable { var status: Int?; var signedTransactions: [String]? }
        let answer: Answer = try await decode(Call(
            endpoint: .lookUpOrder, environment: environment, path: "/inApps/v1/lookup/\(Self.pathSegment(orderID))"))
        guard answer.status == 0 else { return nil }
        var transactions: [TransactionInfo] = []
        for (index, signed) in (answer.signedTransactions ?? []).enumerated() {
            transactions.append(try await verifiedTransaction(signed, .lookUpOrder, environment, field: "signedTransactions[\(index)]"))
        }
        return transactions
    }

    /// Request a Test Notification: Apple sends a TEST notification to the
    /// URL in App Store Connect; the token follows it.
    public func requestTestNotification(environment: Ledger.Environment) async throws -> String {
        struct Answer: Decodable { var testNotificationToken: String }
        let answer: Answer = try await decode(Call(
            endpoint: .requestTestNotification, environment: environment, method: .POST, path: "/inApps/v1/notifications/test"))
        return answer.testNotificationToken
    }

    /// What Apple knows of a test notification's delivery.
    public struct TestNotificationStatus: Sendable {
        public struct Attempt: Sendable {
            public var date: Date?
            /// `SUCCESS`, or why it failed (`TIMED_OUT`, `SSL_ISSUE`, `UNSUCCESSFUL_HTTP_RESPONSE_CODE`...).
            public var result: String
        }
        public var notification: HistoricNotification
        public var attempts: [Attempt]
    }

    /// Get Test Notification Status; nil while Apple has nothing to report yet (404).
    public func testNotificationStatus(token: String, environment: Ledger.Environment) async throws -> TestNotificationStatus? {
        struct Answer: Decodable {
            struct Attempt: Decodable { var attemptDate: Int64?; var sendAttemptResult: String? }
            var signedPayload: String
            var sendAttempts: [Attempt]?
        }
        let answer: Answer
        do {
            answer = try await decode(Call(endpoint: .testNotificationStatus, environment: environment,
                                           path: "/inApps/v1/notifications/test/\(Self.pathSegment(token))"))
        } catch let error as AppStoreAPIError where error.kind == .notFound {
            return nil
        }
        let verified = try await verified(.testNotificationStatus, field: "", nested: true) {
            try await verifier.verifyNotification(signedPayload: answer.signedPayload)
        }
        let attempts = (answer.sendAttempts ?? []).map {
            TestNotificationStatus.Attempt(date: $0.attemptDate.map { Date(timeIntervalSince1970: Double($0) / 1000) },
                                           result: $0.sendAttemptResult ?? "UNKNOWN")
        }
        return TestNotificationStatus(notification: HistoricNotification(notification: verified, signedPayload: answer.signedPayload),
                                      attempts: attempts)
    }

    // MARK: Decoding and verifying

    private func decode<Answer: Decodable>(_ call: Call) async throws -> Answer {
        let body = try await send(call)
        do {
            return try JSONDecoder().decode(Answer.self, from: body)
        } catch {
            throw AppStoreAPIError(.invalidAnswer, endpoint: call.endpoint,
                                   message: "the answer is not the JSON Apple documents (\(String(describing: error).prefix(300)))")
        }
    }

    /// Runs a verification; with `nested`, the failure's field (`signedPayload`,
    /// `data.signedTransactionInfo`...) is named below `field` in the answer.
    private func verified<Value>(_ endpoint: AppStoreAPIEndpoint, field: String, nested: Bool = false,
                                 _ body: () async throws -> Value) async throws -> Value {
        do {
            return try await body()
        } catch var error as AppStoreVerificationError {
            if nested { error.field = field.isEmpty ? error.field : field + "." + error.field }
            let field = error.field
            Self.count(endpoint, "unverified")
            logger.error("app store server api answer failed verification; ignored", metadata: [
                "appstore.api.endpoint": "\(endpoint.rawValue)", "error.code": "\(error.code)", "error.field": "\(field)",
                "error.message": "\(error.message)",
            ])
            throw AppStoreAPIError(.unverifiedAnswer(error), endpoint: endpoint,
                                   message: "\(field) of Apple's answer failed verification (\(error.code): \(error.message))")
        }
    }

    /// A signed transaction of an answer, verified and from the environment asked.
    private func verifiedTransaction(_ signed: String, _ endpoint: AppStoreAPIEndpoint, _ environment: Ledger.Environment,
                                     field: String) async throws -> TransactionInfo {
        let transaction = try await verified(endpoint, field: field) { try await verifier.verifyTransaction(signed, field: field) }
        if let named = transaction.environment, Self.ledgerEnvironment(named) != environment {
            throw AppStoreAPIError(.unverifiedAnswer(AppStoreVerificationError(
                .invalidPayload, "A \(named) transaction in an answer of the \(environment.rawValue) API.", field: field)),
                endpoint: endpoint, message: "\(field) is a \(named) transaction in an answer of the \(environment.rawValue) API")
        }
        return transaction
    }

    /// Production is Production; Sandbox, Xcode and local testing are Sandbox.
    public static func ledgerEnvironment(_ environment: AppStoreEnvironment?) -> Ledger.Environment {
        environment.map { $0 == .production ? .production : .sandbox } ?? .production
    }

    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }

    /// An identifier as one path segment.
    static func pathSegment(_ text: String) -> String {
        let allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}
