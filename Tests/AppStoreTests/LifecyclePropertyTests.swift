import AppStore
import Foundation
import Ledger
import Testing
import TestSupport

/// Random lifecycles of one subscription as Apple runs them (renewals,
/// billing failures with and without grace, recoveries, auto-renew turned
/// off and on, voluntary expiry, refunds), told by Apple's notifications,
/// each carrying the latest signed transaction and renewal info when it was
/// signed. Any of them may be missed, retried or delivered out of order.
/// Whatever arrives, the ledger's state at every instant must be what the
/// latest transaction and renewal info among the delivered ones say.
///
/// Apple's rules, as the reference below applies them:
/// https://developer.apple.com/documentation/appstoreservernotifications/notificationtype
/// https://developer.apple.com/documentation/appstoreservernotifications/graceperiodexpiresdate
/// https://developer.apple.com/documentation/appstoreservernotifications/jwsrenewalinfodecodedpayload
struct LifecyclePropertyTests {
    static let lifecycles = 300
    static let original = "9000000000000001"
    static let productID = "com.example.pro.monthly"
    static let catalog = try! Catalog.decode(from: Data("""
        {"version": 1, "products": [
          {"id": "com.example.pro.monthly", "type": "auto-renewable", "group": "pro", "entitlements": ["pro"], "reminders": ["P3D"]}
        ]}
        """.utf8))
    static let day: TimeInterval = 86_400
    static let start = Date(timeIntervalSince1970: 1_740_830_340)  // 2025-03-01T11:59:00Z

    /// A lifecycle and the notifications Apple sent about it.
    struct Lifecycle {
        var notifications: [VerifiedNotification] = []
        var end: Date = LifecyclePropertyTests.start
    }

    @Test func theStateAtEveryInstantIsWhatTheDeliveredNotificationsSay() throws {
        for seed in 0..<UInt64(Self.lifecycles) {
            var random = SplitMix64(seed: seed)
            let lifecycle = Self.makeLifecycle(&random)
            let delivered = Self.deliver(lifecycle.notifications, &random)
            let ledger = try Self.apply(delivered, seed: seed)
            let instants = Self.instants(lifecycle, &random)
            for at in instants {
                let expected = Self.reference(delivered, at: at)
                let state = ledger.state(at: at, catalog: Self.catalog, environment: .sandbox)
                let subscription = state.subscriptions.first
                let entitled = state.entitlements.first { $0.id == "pro" }?.active ?? false
                #expect(subscription?.status == expected.status, "seed \(seed) at \(at): \(Self.describe(delivered))")
                #expect(entitled == (expected.status == .active || expected.status == .grace), "seed \(seed) at \(at)")
                if let status = expected.status, status == .active {
                    #expect(subscription?.expiresAt == expected.end, "seed \(seed) at \(at)")
                }
            }
        }
    }

    // MARK: Apple's side

    static func makeLifecycle(_ random: inout SplitMix64) -> Lifecycle {
        var lifecycle = Lifecycle()
        var autoRenew = true
        var periodStart = start
        var index = 1
        var grace: Date?
        func transaction(_ index: Int, _ start: Date, revoked: Date? = nil) -> TransactionInfo {
            var info = TransactionInfo(
                transactionID: index == 1 ? original : "90000000000000\(String(format: "%02d", index))", originalTransactionID: original,
                bundleID: "com.example.subledger", productID: productID, purchaseDate: start,
                expiresDate: start + 30 * day, type: .autoRenewable, signedDate: start, revocationDate: revoked, environment: .sandbox)
            info.webOrderLineItemID = "91000000000000\(String(format: "%02d", index))"
            if revoked != nil { info.revocationReason = 0 }
            return info
        }
        var latest = transaction(1, start)
        func send(_ type: NotificationType, _ subtype: NotificationSubtype?, at date: Date, transaction: TransactionInfo? = nil) {
            let renewal = RenewalInfo(originalTransactionID: original, productID: productID, autoRenewProductID: productID,
                                      autoRenewStatus: autoRenew ? 1 : 0, gracePeriodExpiresDate: grace,
                                      isInBillingRetryPeriod: grace != nil ? true : nil, signedDate: date, environment: .sandbox)
            let payload = NotificationPayload(notificationType: type, subtype: subtype,
                                              notificationUUID: "n-\(lifecycle.notifications.count)", signedDate: date,
                                              data: NotificationData(bundleID: "com.example.subledger", environment: .sandbox))
            lifecycle.notifications.append(VerifiedNotification(payload: payload, transaction: transaction ?? latest, renewalInfo: renewal))
        }
        send(.subscribed, .initialBuy, at: start + 60)
        while true {
            let periodEnd = periodStart + 30 * day
            // Auto-renew toggled during the period.
            if random.chance(0.3) {
                autoRenew.toggle()
                send(.didChangeRenewalStatus, autoRenew ? .autoRenewEnabled : .autoRenewDisabled,
                     at: periodStart + random.seconds(1 * day...20 * day))
            }
            if random.chance(0.1) {
                // Refunded mid-period: access ends then.
                let revoked = periodStart + random.seconds(1 * day...25 * day)
                latest = transaction(index, periodStart, revoked: revoked)
                send(.refund, nil, at: revoked + 1)
                lifecycle.end = revoked + 2 * day
                return lifecycle
            }
            if !autoRenew || index >= 6 {
                send(.expired, .voluntary, at: periodEnd + 60)
                lifecycle.end = periodEnd + 2 * day
                return lifecycle
            }
            if random.chance(0.5) {
                index += 1
                periodStart = periodEnd
                latest = transaction(index, periodStart)
                send(.didRenew, nil, at: periodStart + 60)
                continue
            }
            // The renewal fails to bill; Apple tells hours later.
            let withGrace = random.chance(0.6)
            let graceEnd = periodEnd + random.seconds(6 * day...16 * day)
            grace = withGrace ? graceEnd : nil
            let failedAt = periodEnd + random.seconds(3600...72_000)
            send(.didFailToRenew, withGrace ? .gracePeriod : nil, at: failedAt)
            if random.chance(0.5) {
                // Billing recovers: a new period from the recovery.
                let recovered = failedAt + random.seconds(3600...(5 * day))
                grace = nil
                index += 1
                periodStart = recovered
                latest = transaction(index, periodStart)
                send(.didRenew, .billingRecovery, at: recovered + 1)
                continue
            }
            if withGrace { send(.gracePeriodExpired, nil, at: graceEnd) }
            grace = nil
            autoRenew = false
            send(.expired, .billingRetry, at: periodEnd + 60 * day)
            lifecycle.end = periodEnd + 61 * day
            return lifecycle
        }
    }

    /// Some missed, some retried, in an order of their own.
    static func deliver(_ notifications: [VerifiedNotification], _ random: inout SplitMix64) -> [VerifiedNotification] {
        var delivered: [VerifiedNotification] = []
        for notification in notifications where !random.chance(0.3) {
            delivered.append(notification)
            if random.chance(0.2) { delivered.append(notification) }
        }
        if random.chance(0.5) { delivered.shuffle(using: &random) }
        return delivered
    }

    /// Each delivered notification's facts decided and applied in turn, as
    /// the service does; duplicates by `notificationUUID` are stored once
    /// and apply nothing.
    static func apply(_ notifications: [VerifiedNotification], seed: UInt64) throws -> SubscriberLedger {
        let decider = Decider(catalog: catalog)
        var ledger = SubscriberLedger(subscriberID: "subscriber")
        var owners: [String: String] = [:]
        var seen = Set<String>()
        let now = Date(timeIntervalSince1970: 1_900_000_000)
        for notification in notifications where seen.insert(notification.payload.notificationUUID).inserted {
            let mapped = notification.facts
            var attempt = ledger
            var claims: [String] = []
            do {
                for fact in mapped.facts {
                    let decision = try decider.decide(fact, ledger: attempt, owner: { owners[$0] }, now: now, source: FactSource.appStore)
                    for event in decision.events {
                        attempt.apply(RecordedLedgerEvent(position: attempt.lastPosition + 1, recordedAt: now, event: event))
                    }
                    claims += decision.claims
                }
            } catch {
                Issue.record("seed \(seed): \(notification.payload.notificationType) refused: \(error)")
                continue
            }
            ledger = attempt
            for key in claims { owners[key] = "subscriber" }
        }
        return ledger
    }

    // MARK: The reference

    /// What the latest transaction and renewal info among the delivered
    /// notifications say at `at`: the transaction bought last by then is the
    /// period; before its end, active (revoked from a refund); after it, in
    /// grace until a grace end a renewal info reported for that period
    /// (signed before the next period began), else expired. nil: no transaction of it had begun.
    static func reference(_ delivered: [VerifiedNotification], at: Date) -> (status: SubscriptionStatus?, end: Date?) {
        let transactions = delivered.compactMap(\.transaction)
        guard let latest = transactions.filter({ $0.purchaseDate <= at }).max(by: { $0.purchaseDate < $1.purchaseDate }),
              let end = latest.expiresDate else { return (nil, nil) }
        let revoked = transactions.filter { $0.transactionID == latest.transactionID }.compactMap(\.revocationDate).min()
        if let revoked, revoked <= at { return (.revoked, end) }
        if at < end { return (.active, end) }
        // A grace reported once a later period had begun (a failure of a
        // later renewal) is about that period, not this one's end.
        let next = transactions.map(\.purchaseDate).filter { $0 > latest.purchaseDate }.min() ?? .distantFuture
        let graceEnds = delivered.filter {
            $0.payload.signedDate >= latest.purchaseDate && $0.payload.signedDate < next && $0.renewalInfo?.isInBillingRetryPeriod == true
        }.compactMap { $0.renewalInfo?.gracePeriodExpiresDate }
        if let grace = graceEnds.max(), at < grace { return (.grace, end) }
        return (.expired, end)
    }

    /// Instants across the lifecycle, and each period's edges.
    static func instants(_ lifecycle: Lifecycle, _ random: inout SplitMix64) -> [Date] {
        var instants: [Date] = []
        for notification in lifecycle.notifications {
            let signed = notification.payload.signedDate
            instants += [signed - 1, signed, signed + 1]
            if let transaction = notification.transaction {
                instants += [transaction.purchaseDate, transaction.purchaseDate + 1]
                if let end = transaction.expiresDate { instants += [end - 1, end, end + 3600] }
            }
            if let grace = notification.renewalInfo?.gracePeriodExpiresDate { instants += [grace - 1, grace] }
        }
        for _ in 0..<10 { instants.append(start + random.seconds(0...(lifecycle.end.timeIntervalSince(start)))) }
        return instants
    }

    static func describe(_ notifications: [VerifiedNotification]) -> String {
        notifications.map { "\($0.payload.notificationType)\($0.payload.subtype.map { "/\($0)" } ?? "")@\($0.payload.signedDate)" }
            .joined(separator: ", ")
    }
}

/// Seeded draws for the lifecycles: the same seed gives the same lifecycle.
extension SplitMix64 {
    mutating func chance(_ probability: Double) -> Bool { Double.random(in: 0..<1, using: &self) < probability }
    mutating func seconds(_ range: ClosedRange<TimeInterval>) -> TimeInterval {
        TimeInterval(Int.random(in: Int(range.lowerBound)...Int(range.upperBound), using: &self))
    }
}
