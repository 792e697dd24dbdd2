import AppStoreTesting
import AppStore
import Foundation
import Ledger
import Testing

/// Each notification type, signed like Apple's, verified, then mapped.
@Suite struct NotificationFactsTests {
    let store: TestAppStore
    let subscription = TestAppStore.subscription()

    init() throws { store = try TestAppStore() }

    private func mapped(_ type: NotificationType, _ subtype: NotificationSubtype? = nil, transaction: TransactionInfo? = nil,
                        renewal: RenewalInfo? = nil, environment: AppStoreEnvironment = .sandbox) async throws -> NotificationFacts {
        let signed = try store.signedNotification(type, subtype, transaction: transaction, renewal: renewal,
                                                  environment: environment, uuid: "4a1e0c6e-7b1d-4f0e-9d7c-000000000042")
        return try await store.verifier.verifyNotification(body: store.body(signedPayload: signed)).facts
    }

    private func record(_ type: FactRequest.FactType, _ transaction: TransactionInfo, autoRenew: Bool? = true,
                        effectiveDate: Date? = nil) -> FactRequest {
        let original = transaction.originalTransactionID ?? transaction.transactionID
        if type == .renewal, let expiresDate = transaction.expiresDate {
            return .renewal(.init(transactionID: transaction.transactionID, originalTransactionID: original,
                                  productID: transaction.productID, purchaseDate: transaction.purchaseDate, expiresDate: expiresDate,
                                  autoRenew: autoRenew, quantity: 1, effectiveDate: effectiveDate, environment: .sandbox))
        }
        return .purchase(.init(transactionID: transaction.transactionID, originalTransactionID: original,
                               productID: transaction.productID, purchaseDate: transaction.purchaseDate,
                               expiresDate: transaction.expiresDate, autoRenew: autoRenew, quantity: 1, environment: .sandbox))
    }

    /// What every notification's renewal info reports besides the type's own
    /// fact; the ledger records it only when it differs from what it knows.
    private func reportedAutoRenew(_ autoRenew: Bool, productID: String = "com.example.pro.monthly") -> FactRequest {
        .autoRenewChange(.init(originalTransactionID: "2000000000000001", autoRenew: autoRenew, productID: productID,
                               effectiveDate: TestAppStore.signedDate, environment: .sandbox, isReportedState: true))
    }

    private func reportedGrace(_ end: Date) -> FactRequest {
        .billingIssue(.init(originalTransactionID: "2000000000000001", productID: "com.example.pro.monthly", gracePeriodExpiresDate: end,
                            effectiveDate: TestAppStore.signedDate, environment: .sandbox, isReportedState: true))
    }

    @Test(arguments: [NotificationSubtype.initialBuy, .resubscribe])
    func subscribedIsAPurchase(_ subtype: NotificationSubtype) async throws {
        let result = try await mapped(.subscribed, subtype, transaction: subscription, renewal: TestAppStore.renewalInfo())
        #expect(result.facts == [record(.purchase, subscription), reportedAutoRenew(true)])
        #expect(result.subscriberHint == TestAppStore.subscriberID.lowercased())
        #expect(result.originalTransactionID == "2000000000000001")
        #expect(result.transactionID == "2000000000000002")
        #expect(result.environment == .sandbox)
        #expect(result.signedDate == TestAppStore.signedDate)
        #expect(result.notificationUUID == "4a1e0c6e-7b1d-4f0e-9d7c-000000000042")
    }

    @Test func productionStaysProduction() async throws {
        var production = subscription
        production.environment = .production
        let result = try await mapped(.subscribed, .initialBuy, transaction: production, environment: .production)
        #expect(result.environment == .production)
        #expect(result.facts.map(\.environment) == [.production])
    }

    @Test func didRenewIsARenewal() async throws {
        let result = try await mapped(.didRenew, transaction: subscription, renewal: TestAppStore.renewalInfo())
        #expect(result.facts == [record(.renewal, subscription), reportedAutoRenew(true)])
    }

    @Test func didRenewAfterBillingRecoveryIsARenewal() async throws {
        let result = try await mapped(.didRenew, .billingRecovery, transaction: subscription, renewal: TestAppStore.renewalInfo())
        #expect(result.facts.map(\.type) == [.renewal, .autoRenewChange])
    }

    @Test(arguments: [(NotificationSubtype.autoRenewDisabled, false), (.autoRenewEnabled, true)])
    func renewalStatusChangeIsAnAutoRenewChange(_ subtype: NotificationSubtype, _ autoRenew: Bool) async throws {
        let result = try await mapped(.didChangeRenewalStatus, subtype, transaction: subscription,
                                      renewal: TestAppStore.renewalInfo(autoRenew: autoRenew))
        // Apple's latest transaction first (a missed renewal is recorded), then the change.
        #expect(result.facts == [record(.renewal, subscription, autoRenew: autoRenew),
                                 .autoRenewChange(.init(originalTransactionID: "2000000000000001", autoRenew: autoRenew,
                                                        productID: "com.example.pro.monthly", effectiveDate: TestAppStore.signedDate,
                                                        environment: .sandbox))])
    }

    @Test func renewalPreferenceDowngradeRecordsOnlyWhatTheLedgerMayLack() async throws {
        let result = try await mapped(.didChangeRenewalPreference, .downgrade, transaction: subscription, renewal: TestAppStore.renewalInfo())
        #expect(result.facts == [record(.renewal, subscription), reportedAutoRenew(true)])
        #expect(result.summary.contains("DID_CHANGE_RENEWAL_PREF/DOWNGRADE"))
        #expect(result.originalTransactionID == "2000000000000001")
    }

    @Test func renewalPreferenceUpgradeRecordsTheNewTransaction() async throws {
        let upgraded = TestAppStore.subscription(transactionID: "2000000000000003", productID: "com.example.pro.yearly")
        let result = try await mapped(.didChangeRenewalPreference, .upgrade, transaction: upgraded, renewal: TestAppStore.renewalInfo())
        #expect(result.facts == [record(.renewal, upgraded), reportedAutoRenew(true, productID: "com.example.pro.yearly")])
    }

    @Test func failureToRenewInGraceIsABillingIssueWithGrace() async throws {
        let graceEnd = TestAppStore.date("2025-04-17T11:59:00Z")
        let result = try await mapped(.didFailToRenew, .gracePeriod, transaction: subscription,
                                      renewal: TestAppStore.renewalInfo(gracePeriodExpiresDate: graceEnd))
        #expect(result.facts == [record(.renewal, subscription),
                                 .billingIssue(.init(originalTransactionID: "2000000000000001",
                                                     productID: "com.example.pro.monthly", gracePeriodExpiresDate: graceEnd,
                                                     effectiveDate: TestAppStore.signedDate, environment: .sandbox)),
                                 reportedAutoRenew(true)])
    }

    @Test func failureToRenewWithoutSubtypeIsABillingIssueWithoutGrace() async throws {
        // Even if the renewal info names a grace end, only the GRACE_PERIOD subtype grants it.
        let result = try await mapped(.didFailToRenew, transaction: subscription,
                                      renewal: TestAppStore.renewalInfo(gracePeriodExpiresDate: TestAppStore.date("2025-04-17T11:59:00Z")))
        #expect(result.facts.map(\.type) == [.renewal, .billingIssue, .autoRenewChange])
        #expect(result.facts[1].billingIssue?.gracePeriodExpiresDate == nil)
    }

    @Test func gracePeriodExpiredIsAnExpiryAtTheGraceEnd() async throws {
        let graceEnd = TestAppStore.date("2025-04-17T11:59:00Z")
        let result = try await mapped(.gracePeriodExpired, transaction: subscription,
                                      renewal: TestAppStore.renewalInfo(gracePeriodExpiresDate: graceEnd))
        // The renewal info in grace proves the grace period the notification ends.
        #expect(result.facts == [record(.renewal, subscription),
                                 .expiry(.init(.subscription(originalTransactionID: "2000000000000001", end: graceEnd),
                                               reason: "grace_period_expired", environment: .sandbox)),
                                 reportedAutoRenew(true), reportedGrace(graceEnd)])
    }

    @Test(arguments: [NotificationSubtype.voluntary, .billingRetry, .priceIncrease, .productNotForSale])
    func expiredIsAnExpiry(_ subtype: NotificationSubtype) async throws {
        let result = try await mapped(.expired, subtype, transaction: subscription, renewal: TestAppStore.renewalInfo(autoRenew: false))
        #expect(result.facts == [record(.renewal, subscription, autoRenew: false),
                                 .expiry(.init(.subscription(originalTransactionID: "2000000000000001", end: subscription.expiresDate),
                                               reason: subtype.rawValue.lowercased(), environment: .sandbox)),
                                 reportedAutoRenew(false)])
    }

    @Test func refundIsARefundAtTheRevocationDate() async throws {
        let revoked = TestAppStore.subscription(revocationDate: TestAppStore.date("2025-03-10T08:00:00Z"), revocationReason: 1)
        let result = try await mapped(.refund, transaction: revoked)
        #expect(result.facts == [record(.renewal, revoked, autoRenew: nil),
                                 .refund(.init(transactionID: "2000000000000002", originalTransactionID: "2000000000000001",
                                               revocationDate: revoked.revocationDate, reason: "refunded: an issue with the app",
                                               environment: .sandbox, details: AppleRevocationDetails(revocationReason: 1)))])
    }

    @Test func revokeIsARefund() async throws {
        let revoked = TestAppStore.subscription(revocationDate: TestAppStore.date("2025-03-10T08:00:00Z"))
        let result = try await mapped(.revoke, transaction: revoked)
        #expect(result.facts.map(\.type) == [.renewal, .refund])
        #expect(result.facts.last?.refund?.revocationDate == revoked.revocationDate)
        #expect(result.facts.last?.refund?.reason == "revoked: family sharing ended")
    }

    @Test func refundReversedIsARefundReversal() async throws {
        let result = try await mapped(.refundReversed, transaction: subscription, renewal: TestAppStore.renewalInfo())
        #expect(result.facts == [record(.renewal, subscription),
                                 .refundReversal(.init(transactionID: "2000000000000002", originalTransactionID: "2000000000000001",
                                                       effectiveDate: TestAppStore.signedDate, reason: "refund reversed",
                                                       environment: .sandbox)),
                                 reportedAutoRenew(true)])
    }

    @Test func renewalExtendedIsARenewalWithTheNewEnd() async throws {
        let extended = TestAppStore.subscription(expiresDate: TestAppStore.date("2025-04-15T11:59:00Z"))
        let result = try await mapped(.renewalExtended, transaction: extended, renewal: TestAppStore.renewalInfo())
        let expected = record(.renewal, extended, effectiveDate: TestAppStore.signedDate)
        #expect(result.facts == [expected, reportedAutoRenew(true)])
        #expect(result.facts.first?.renewal?.expiresDate == TestAppStore.date("2025-04-15T11:59:00Z"))
    }

    @Test func offerRedeemedIsAPurchaseOrARenewalByTransaction() async throws {
        let first = TestAppStore.subscription(transactionID: "2000000000000001")
        let initial = try await mapped(.offerRedeemed, .initialBuy, transaction: first, renewal: TestAppStore.renewalInfo())
        #expect(initial.facts == [record(.purchase, first), reportedAutoRenew(true)])
        let later = try await mapped(.offerRedeemed, .upgrade, transaction: subscription, renewal: TestAppStore.renewalInfo())
        #expect(later.facts == [record(.renewal, subscription), reportedAutoRenew(true)])
    }

    @Test func priceIncreaseRecordsOnlyWhatTheLedgerMayLack() async throws {
        let result = try await mapped(.priceIncrease, .accepted, transaction: subscription, renewal: TestAppStore.renewalInfo())
        #expect(result.facts == [record(.renewal, subscription), reportedAutoRenew(true)])
        #expect(result.subscriberHint == TestAppStore.subscriberID.lowercased())
    }

    @Test(arguments: [(TransactionInfo.ProductType.consumable, "com.example.coins.100", 3),
                      (.nonConsumable, "com.example.level2", 1), (.nonRenewing, "com.example.pass.30d", 1)])
    func oneTimeChargeIsAPurchase(_ type: TransactionInfo.ProductType, _ productID: String, _ quantity: Int) async throws {
        let charge = TransactionInfo(transactionID: "3000000000000001", originalTransactionID: "3000000000000001",
                                     bundleID: TestAppStore.bundleID, productID: productID,
                                     purchaseDate: TestAppStore.date("2025-03-01T11:00:00Z"), quantity: quantity, type: type,
                                     appAccountToken: TestAppStore.subscriberID, signedDate: TestAppStore.signedDate, environment: .sandbox)
        let result = try await mapped(.oneTimeCharge, transaction: charge)
        #expect(result.facts == [.purchase(.init(transactionID: "3000000000000001", originalTransactionID: "3000000000000001",
                                                 productID: productID, purchaseDate: charge.purchaseDate, quantity: quantity,
                                                 environment: .sandbox))])
    }

    @Test func testNotificationIsAcknowledgedWithoutFacts() async throws {
        let result = try await mapped(.test)
        #expect(result.facts.isEmpty)
        #expect(result.subscriberHint == nil)
        #expect(result.originalTransactionID == nil)
    }

    @Test func unknownTypesRecordOnlyTheirTransaction() async throws {
        let result = try await mapped(NotificationType(rawValue: "SOMETHING_APPLE_ADDS_LATER"), transaction: subscription)
        #expect(result.facts == [record(.renewal, subscription, autoRenew: nil)])
        #expect(result.notificationType.rawValue == "SOMETHING_APPLE_ADDS_LATER")
        #expect(result.originalTransactionID == "2000000000000001")
    }

    @Test func aTypeThatNeedsATransactionWithoutOneGivesNoFacts() async throws {
        let result = try await mapped(.didRenew)
        #expect(result.facts.isEmpty)
        #expect(result.summary.contains("no signedTransactionInfo"))
    }
}

/// The mapped facts are ones the ledger accepts, in the order Apple sends them.
@Suite struct NotificationLedgerTests {
    @Test func aSubscriptionsLifeThroughTheDecider() async throws {
        let store = try TestAppStore()
        let catalog = try Catalog(version: 1, products: [
            Product(id: "com.example.pro.monthly", type: .autoRenewable, group: "pro", entitlements: ["pro"]),
        ])
        let decider = Decider(catalog: catalog)
        let first = TestAppStore.subscription(transactionID: "2000000000000001", purchaseDate: TestAppStore.date("2025-02-01T11:59:00Z"),
                                              expiresDate: TestAppStore.date("2025-03-01T11:59:00Z"))
        // Apple signs each notification when it happens: the refund after its revocation.
        let revoked = TestAppStore.date("2025-03-05T00:00:00Z")
        let notifications: [(NotificationType, NotificationSubtype?, TransactionInfo, RenewalInfo, Date)] = [
            (.subscribed, .initialBuy, first, TestAppStore.renewalInfo(), TestAppStore.signedDate),
            (.didRenew, nil, TestAppStore.subscription(), TestAppStore.renewalInfo(), TestAppStore.signedDate),
            (.didChangeRenewalStatus, .autoRenewDisabled, TestAppStore.subscription(), TestAppStore.renewalInfo(autoRenew: false),
             TestAppStore.signedDate),
            (.refund, nil, TestAppStore.subscription(revocationDate: revoked, revocationReason: 0),
             TestAppStore.renewalInfo(autoRenew: false), revoked),
        ]
        var history: [RecordedLedgerEvent] = []
        let subscriberID = TestAppStore.subscriberID.lowercased()
        for (type, subtype, transaction, renewal, signedDate) in notifications {
            let signed = try store.signedNotification(type, subtype, transaction: transaction, renewal: renewal, signedDate: signedDate)
            let mapped = try await store.verifier.verifyNotification(signedPayload: signed).facts
            #expect(mapped.subscriberHint == subscriberID)
            for fact in mapped.facts {
                let decision = try decider.decide(fact, subscriberID: subscriberID, history: history, owner: { _ in nil },
                                                  now: mapped.signedDate, source: FactSource.appStore)
                // The latest transaction and the renewal info's state are duplicates when already recorded.
                #expect(decision.events.count <= 1, "\(type) gave \(decision.events)")
                for event in decision.events {
                    history.append(RecordedLedgerEvent(position: Int64(history.count + 1), recordedAt: mapped.signedDate, event: event))
                }
            }
        }
        #expect(history.count == 4)
        let state = SubscriberState.fold(history, subscriberID: subscriberID, catalog: catalog, at: TestAppStore.date("2025-03-06T00:00:00Z"),
                                         environment: .sandbox)
        #expect(state.subscriptions.first?.status == .revoked)
        #expect(state.entitlements.first?.active == false)
    }
}

/// The command inside a fact, when it is of that type.
private extension FactRequest {
    var renewal: Renewal? { if case .renewal(let renewal) = self { renewal } else { nil } }
    var refund: Refund? { if case .refund(let refund) = self { refund } else { nil } }
    var billingIssue: BillingIssue? { if case .billingIssue(let issue) = self { issue } else { nil } }
}
