import AppStore
import Foundation
import JSON
import Ledger
import Metrics

/// What `subledger appstore refresh` and `POST /v1/subscribers/{id}/appstore/refresh` did.
public struct RefreshReport: Sendable, Encodable {
    public struct Rejected: Sendable, Encodable {
        public var fact: String
        public var code: String
        public var message: String
    }

    public var subscriberID: String
    /// The original transactions Apple was asked about.
    public var originalTransactionIDs: [String]
    /// Facts the ledger lacked, now recorded, in words.
    public var recorded: [String]
    /// Facts Apple reported that the ledger already had.
    public var duplicates: Int
    public var rejected: [Rejected]
    /// Original transactions Apple answered it does not know (404): facts
    /// recorded by hand or by a test, or of another app or environment.
    /// The others are still asked about and recorded.
    public var unknownToAppStore: [String] = []
    public var subscriber: SubscriberState

    enum CodingKeys: String, CodingKey {
        case subscriberID = "subscriberId", originalTransactionIDs = "originalTransactionIds", recorded, duplicates, rejected,
             unknownToAppStore, subscriber
    }
}

extension AppStoreIntegration {
    /// Asks Get All Subscription Statuses about the subscriber's
    /// auto-renewable original transactions and records what the ledger
    /// lacks: the latest transaction (purchase or renewal, idempotent by
    /// transaction id), a revocation, an auto-renew or grace change the
    /// ledger's state does not show. A subscription of the same customer that
    /// nobody holds yet is recorded too when its `appAccountToken` names the
    /// subscriber. Refused facts are reported; the others are written.
    public func refresh(subscriberID: String) async throws -> RefreshReport {
        let api = try requireAPI()
        let history = try await reader.history(of: subscriberID)
        let subscriberID = history.subscriberID
        let ledger = SubscriberLedger(subscriberID: subscriberID, events: history.events)
        let state = ledger.state(at: reader.now(), catalog: writer.catalog)
        let ownership = OwnershipStore(pool: writer.pool)
        let owned = Set(try await ownership.originals(ownedBy: subscriberID))
        var environments: [String: Ledger.Environment] = [:]
        for recorded in history.events {
            let fact: TransactionFact? = switch recorded.event {
            case .purchased(let fact), .renewed(let fact), .restored(let fact): fact
            case .transferredIn(let transfer): transfer.transaction
            default: nil
            }
            guard let fact, owned.contains(fact.environment.ownershipKey(fact.originalTransactionID)),
                  (fact.productType ?? writer.catalog.product(id: fact.productID)?.type) == .autoRenewable else { continue }
            environments[fact.originalTransactionID] = fact.environment
        }
        var asked: [String] = []
        var unknown: [String] = []
        var answered = Set<String>()
        var commands: [WriteCommand] = []
        for original in environments.keys.sorted() where !answered.contains(original) {
            asked.append(original)
            let statuses: [AppStoreAPIClient.SubscriptionStatus]
            do {
                statuses = try await api.subscriptionStatuses(transactionID: original, environment: environments[original]!)
            } catch let error as AppStoreAPIError where error.kind == .notFound {
                // An answer about this one, not a failure of Apple's: the rest are asked still.
                unknown.append(original)
                continue
            }
            let environment = environments[original]!
            let owners = try await ownership.owners(of: Set(statuses.map { environment.ownershipKey($0.originalTransactionID) }))
            for status in statuses where answered.insert(status.originalTransactionID).inserted {
                let token = status.transaction.appAccountToken?.trimmingCharacters(in: .whitespaces).lowercased()
                let owner = owners[environment.ownershipKey(status.originalTransactionID)]
                let isOurs = owner == subscriberID || (owner == nil && token == subscriberID.lowercased())
                guard isOurs else { continue }
                commands += Self.facts(for: status, ledger: ledger, state: state).map {
                    WriteCommand.fact($0, subscriberID: subscriberID, source: FactSource.appStore)
                }
            }
        }
        var report = RefreshReport(subscriberID: subscriberID, originalTransactionIDs: asked, recorded: [], duplicates: 0,
                                   rejected: [], unknownToAppStore: unknown, subscriber: state)
        if !commands.isEmpty {
            let result = try await writer.write(WriteBatch(commands, refusals: .skip))
            for (command, outcome) in zip(commands, result.outcomes) {
                guard case .fact(let fact) = command.request else { continue }
                switch outcome {
                case .recorded: report.recorded.append(Self.describe(fact))
                case .duplicate: report.duplicates += 1
                case .rejected(let error):
                    report.rejected.append(.init(fact: Self.describe(fact), code: error.code.rawValue, message: error.message))
                }
            }
        }
        Counter(label: "subledger_appstore_refresh_facts_total", dimensions: [("outcome", "recorded")]).increment(by: report.recorded.count)
        logger.info("app store refresh", metadata: [
            "subscriber.ref": "\(LogReference.subscriber(subscriberID))", "appstore.refresh.asked": "\(asked.count)",
            "appstore.refresh.recorded": "\(report.recorded.count)", "appstore.refresh.rejected": "\(report.rejected.count)",
        ])
        report.subscriber = try await reader.state(of: subscriberID)
        return report
    }

    /// The facts one subscription status implies that the ledger may lack.
    static func facts(for status: AppStoreAPIClient.SubscriptionStatus, ledger: SubscriberLedger,
                      state: SubscriberState) -> [FactRequest] {
        let transaction = status.transaction
        let original = status.originalTransactionID
        let environment = AppStoreAPIClient.ledgerEnvironment(transaction.environment)
        let autoRenew = status.renewal?.autoRenew
        let quantity = transaction.quantity.flatMap { $0 >= 1 ? $0 : nil } ?? 1
        var facts: [FactRequest] = []
        if transaction.transactionID == original || !ledger.knows(originalTransactionID: original, environment: environment) {
            facts.append(.purchase(.init(transactionID: transaction.transactionID, originalTransactionID: original,
                                         productID: transaction.productID, purchaseDate: transaction.purchaseDate,
                                         expiresDate: transaction.expiresDate, autoRenew: autoRenew, quantity: quantity,
                                         environment: environment)))
        } else if let expiresDate = transaction.expiresDate {
            facts.append(.renewal(.init(transactionID: transaction.transactionID, originalTransactionID: original,
                                        productID: transaction.productID, purchaseDate: transaction.purchaseDate,
                                        expiresDate: expiresDate, autoRenew: autoRenew, quantity: quantity, environment: environment)))
        }
        // An upgraded-from transaction is cancelled by the upgrade, not refunded.
        if let revocationDate = transaction.revocationDate, transaction.isUpgraded != true {
            facts.append(.refund(.init(transactionID: transaction.transactionID, originalTransactionID: original,
                                       revocationDate: revocationDate, reason: "revoked (App Store status)", environment: environment,
                                       details: AppleRevocationDetails(revocationReason: transaction.revocationReason,
                                                                       revocationType: transaction.revocationType,
                                                                       revocationPercentage: transaction.revocationPercentage))))
        }
        let subscription = state.subscriptions.first { $0.originalTransactionID == original }
        if let subscription, ledger.knows(transactionID: transaction.transactionID), let renewal = status.renewal {
            if let autoRenew, subscription.autoRenew != autoRenew {
                facts.append(.autoRenewChange(.init(originalTransactionID: original, autoRenew: autoRenew,
                                                    productID: transaction.productID, effectiveDate: renewal.signedDate,
                                                    environment: environment)))
            }
            // 4: in the billing grace period, which keeps access.
            if status.status == 4, let grace = renewal.gracePeriodExpiresDate, subscription.status != .grace {
                facts.append(.billingIssue(.init(originalTransactionID: original, productID: transaction.productID,
                                                 gracePeriodExpiresDate: grace, effectiveDate: renewal.signedDate,
                                                 environment: environment)))
            }
        }
        return facts
    }

    static func describe(_ fact: FactRequest) -> String {
        switch fact {
        case .purchase(let purchase): "purchase of \(purchase.productID), transaction \(purchase.transactionID)"
        case .renewal(let renewal): "renewal of \(renewal.productID), transaction \(renewal.transactionID), until \(RFC3339.format(renewal.expiresDate))"
        case .refund(let refund): "revocation of transaction \(refund.transactionID)"
        case .autoRenewChange(let change): "auto-renew \(change.autoRenew ? "on" : "off") for \(change.originalTransactionID)"
        case .billingIssue(let issue): "billing issue of \(issue.originalTransactionID)"
        default: "\(fact.type.rawValue) of \(fact.transactionID ?? fact.originalTransactionID ?? "")"
        }
    }
}
