import AppStore
import Foundation
import Ledger
import Logging
import Metrics
import Postgres

/// Takes verified App Store Server Notifications into the ledger: each stored
/// once by `notificationUUID`, attributed to a subscriber, its facts recorded
/// (source `appstore`) in the same transaction as its row.
///
/// A notification nobody can be found for yet is kept `pending` and applied
/// right after its original transaction is claimed, in a transaction of its
/// own (see `applyPending`). Applying it inside the claiming transaction would
/// make every purchase and restore decide App Store facts too; after the
/// commit, a crash in between only delays it: the next notification or claim
/// about that original sweeps it again, and applying twice is harmless
/// because every fact is idempotent and the row changes only from `pending`.
public struct NotificationService: Sendable {
    package let verifier: AppStoreVerifier
    /// Without a claim observer: this service sweeps its own claims.
    let writer: LedgerWriter
    let pool: ConnectionPool
    package let logger: Logger

    public init(verifier: AppStoreVerifier, writer: LedgerWriter, logger: Logger) {
        self.verifier = verifier
        var writer = writer
        writer.claimObserver = nil
        self.writer = writer
        self.pool = writer.pool
        self.logger = logger
    }

    /// What receiving a notification did.
    public struct Receipt: Sendable, Encodable {
        public var notificationUUID: String
        public var status: NotificationStatus
        public var duplicate: Bool
        public var subscriberID: String?

        enum CodingKeys: String, CodingKey {
            case notificationUUID, status, duplicate, subscriberID = "subscriberId"
        }
    }

    /// Stores and applies a verified notification; a retry of a stored one applies nothing.
    public func receive(_ verified: VerifiedNotification, signedPayload: String) async throws -> Receipt {
        let facts = verified.facts
        let type = Self.metricType(facts.notificationType)
        if let status = try await pool.withConnection({ try await NotificationStore.status(of: facts.notificationUUID, on: $0) }) {
            Self.count(type: type, outcome: "duplicate")
            return Receipt(notificationUUID: facts.notificationUUID, status: status, duplicate: true, subscriberID: nil)
        }
        let (subscriberID, attribution) = try await attribute(facts)
        var row = NotificationRow(facts: facts, signedPayload: signedPayload, subscriberID: subscriberID,
                                  attribution: attribution, status: .acknowledged)
        if facts.facts.isEmpty {
            row = try await pool.withTransaction { connection in
                // About an erased subscriber: kept without what names it.
                let stored = try await Self.isErased(row.subscriberID, on: connection) ? row.erased : row
                try await NotificationStore.insert(stored, ifAbsent: true, on: connection)
                return stored
            }
        } else if let subscriberID {
            row = try await apply(row, for: subscriberID)
        } else {
            row.status = .pending
            try await pool.withConnection { try await NotificationStore.insert(row, ifAbsent: true, on: $0) }
        }
        logger.info("app store notification", metadata: [
            "appstore.notification.uuid": "\(facts.notificationUUID)", "appstore.notification.type": "\(facts.notificationType)",
            "appstore.notification.subtype": "\(facts.subtype?.rawValue ?? "")", "appstore.notification.status": "\(row.status.rawValue)",
            "appstore.environment": "\(facts.environment.rawValue)", "subscriber.ref": "\(LogReference.subscriber(row.subscriberID ?? ""))",
            "appstore.summary": "\(facts.summary)",
        ])
        Self.count(type: type, outcome: row.status.rawValue)
        // A claim may have committed between the owner lookup and the pending
        // row, missing it in its sweep; and an applied notification may have
        // claimed the original others were waiting for. Sweep either way.
        if row.status == .pending || row.status == .applied, let original = facts.originalTransactionID {
            await applyPending(originalTransactionIDs: [facts.environment.ownershipKey(original)])
        }
        return Receipt(notificationUUID: facts.notificationUUID, status: row.status, duplicate: false,
                       subscriberID: row.error?.code == .erased ? nil : row.subscriberID)
    }

    /// Whether `subscriberID` names an erased subscriber (a stream without a
    /// key). While the key exists its row is locked (`FOR KEY SHARE`) until
    /// the caller's transaction ends, so an erasure waits for what it writes.
    static func isErased(_ subscriberID: String?, on connection: Connection) async throws -> Bool {
        guard let subscriberID else { return false }
        guard try await !SubscriberKeys.holdKey(of: subscriberID, on: connection) else { return false }
        if try await SubscriberKeys.streamVersion(of: subscriberID, on: connection) > 0 { return true }
        return try await StreamNaming.isErasedUnderEarlierName(subscriberID, on: connection)
    }

    /// The subscriber a notification is about: whoever owns its original
    /// transaction in its environment now (docs/appstore.md, "Who the
    /// notification is about") (after restores moved it, a
    /// refund still carries the buyer's `appAccountToken`); for an original
    /// nobody owns yet, the `appAccountToken`; else nobody yet.
    func attribute(_ facts: NotificationFacts) async throws -> (String?, NotificationAttribution) {
        if let original = facts.originalTransactionID,
           let owner = try await owner(of: original, transactionID: facts.transactionID, environment: facts.environment) {
            return (owner, .transactionOwner)
        }
        if let hint = facts.subscriberHint, let subscriberID = try? InputLimits.validateSubscriberID(hint) {
            return (subscriberID, .appAccountToken)
        }
        return (nil, facts.originalTransactionID == nil ? .none : .unattributed)
    }

    /// The owner of an original transaction of `environment` (ownership is
    /// per environment: a Sandbox notification never finds a Production owner).
    func owner(of original: String, transactionID: String?, environment: Ledger.Environment) async throws -> String? {
        let key = environment.ownershipKey(original)
        let ids = Set([original, transactionID].compactMap { $0.map(environment.ownershipKey) })
        let owners = try await OwnershipStore(pool: pool).owners(of: ids)
        return owners[key] ?? owners.values.first
    }

    /// Records the notification's facts for `subscriberID` in one batch, its
    /// row written in the same transaction. A fact the ledger refuses because
    /// the original is not recorded yet leaves it pending; any other refusal
    /// is stored as rejected (and answered 200: Apple's retries would not
    /// change it). Either way none of its facts is applied.
    private func apply(_ row: NotificationRow, for subscriberID: String) async throws -> NotificationRow {
        var row = row
        row.status = .applied
        let settled = row
        let commands = row.facts.facts.map { WriteCommand.fact($0, subscriberID: subscriberID, source: FactSource.appStore) }
        do {
            _ = try await writer.write(WriteBatch(commands, alongside: { connection in
                try await NotificationStore.insert(settled, ifAbsent: true, on: connection)
            }))
        } catch let error as LedgerError where error.code == .erased {
            // About an erased subscriber: acknowledged, not applied, and kept
            // without what names it (the payload holds its appAccountToken).
            row = row.erased
            try await pool.withConnection { try await NotificationStore.insert(row, ifAbsent: true, on: $0) }
        } catch let error as LedgerError {
            row.error = error
            row.status = error.code == .transactionNotFound ? .pending : .rejected
            try await pool.withConnection { try await NotificationStore.insert(row, ifAbsent: true, on: $0) }
        }
        return row
    }

    /// Applies the pending notifications about these original transactions
    /// (ownership keys, as claims name them) to whoever holds them now.
    /// Called after a purchase or restore claims an original, and after each
    /// notification. Failures are logged: the rows stay pending for the next
    /// sweep.
    public func applyPending(originalTransactionIDs keys: [String]) async {
        // Claims of Play tokens have no App Store notification waiting.
        let originalTransactionIDs = Array(Set(keys.map(Store.parseOwnershipKey).filter { $0.store == .appStore }.map(\.id)))
        guard !originalTransactionIDs.isEmpty else { return }
        do {
            let pending = try await pool.withConnection {
                try await NotificationStore.pending(originalTransactionIDs: originalTransactionIDs, on: $0)
            }
            for notification in pending {
                try await applyPending(uuid: notification.uuid, signedPayload: notification.signedPayload)
            }
        } catch {
            logger.error("applying pending app store notifications failed", metadata: [
                "appstore.original_transaction_ids": "\(originalTransactionIDs)", "error": "\(String(reflecting: error))",
            ])
        }
    }

    private func applyPending(uuid: String, signedPayload: String) async throws {
        let facts: NotificationFacts
        do throws(AppStoreVerificationError) {
            facts = try await verifier.verifyNotification(signedPayload: signedPayload).facts
        } catch {
            // Verified when it arrived; the roots changed since. Keep it, but stop retrying.
            _ = try await pool.withConnection {
                try await NotificationStore.settlePending(uuid, status: .rejected, subscriberID: nil, error: error.ledgerError, on: $0)
            }
            return
        }
        guard let original = facts.originalTransactionID,
              let owner = try await owner(of: original, transactionID: facts.transactionID, environment: facts.environment)
        else { return }
        var status = NotificationStatus.applied
        var refusal: LedgerError?
        let commands = facts.facts.map { WriteCommand.fact($0, subscriberID: owner, source: FactSource.appStore) }
        do {
            _ = try await writer.write(WriteBatch(commands, alongside: { connection in
                guard try await NotificationStore.settlePending(uuid, status: .applied, subscriberID: owner, error: nil, on: connection)
                else { throw NotificationAlreadySettled() }
            }))
        } catch is NotificationAlreadySettled {
            return
        } catch let error as LedgerError {
            // Still not recorded for the owner (e.g. a refund of a renewal it never sent): leave it pending.
            if error.code == .transactionNotFound { return }
            status = .rejected
            refusal = error
            _ = try await pool.withConnection {
                try await NotificationStore.settlePending(uuid, status: .rejected, subscriberID: owner, error: error, on: $0)
            }
        }
        logger.info("pending app store notification settled", metadata: [
            "appstore.notification.uuid": "\(uuid)", "appstore.notification.status": "\(status.rawValue)",
            "subscriber.ref": "\(LogReference.subscriber(owner))", "error": "\(refusal.map { $0.code } ?? "")",
        ])
        Self.count(type: Self.metricType(facts.notificationType), outcome: "pending_\(status.rawValue)")
    }

    // MARK: Metrics

    /// Known types by name; anything else is counted as OTHER so a stranger's
    /// type names cannot grow the metric without bound.
    static func metricType(_ type: NotificationType) -> String {
        knownTypes.contains(type) ? type.rawValue : "OTHER"
    }

    static let knownTypes: Set<NotificationType> = [
        .subscribed, .didRenew, .didChangeRenewalStatus, .didChangeRenewalPreference, .didFailToRenew, .gracePeriodExpired,
        .expired, .refund, .refundDeclined, .refundReversed, .revoke, .renewalExtended, .renewalExtension, .offerRedeemed,
        .priceIncrease, .oneTimeCharge, .consumptionRequest, .test, .externalPurchaseToken, .rescindConsent, .metadataUpdate,
        .migration, .priceChange,
    ]

    /// `subledger_appstore_notifications_total{type, outcome}`.
    package static func count(type: String, outcome: String) {
        Counter(label: "subledger_appstore_notifications_total", dimensions: [("type", type), ("outcome", outcome)]).increment()
    }
}
