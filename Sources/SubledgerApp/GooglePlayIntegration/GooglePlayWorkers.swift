import Foundation
import GooglePlay
import Ledger
import Logging
import Metrics
import Postgres
import ServiceLifecycle

/// Acknowledges every recorded Play purchase Google has not seen
/// acknowledged: Google refunds a purchase that is not acknowledged within
/// three days. Each is retried, with a growing wait, until Google accepts
/// it; several instances share the queue (each due row is leased by one).
/// https://developer.android.com/google/play/billing/integrate#process
/// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.subscriptions/acknowledge
/// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.products/acknowledge
public struct GooglePlayAcknowledger: Service {
    let source: any GooglePlayPurchaseSource
    let pool: ConnectionPool
    let logger: Logger
    public var interval: Duration = .seconds(10)
    /// How long a claimed acknowledgement is held before another instance may take it.
    public var lease: Duration = .seconds(60)
    public var batchSize = 50

    public init(source: any GooglePlayPurchaseSource, pool: ConnectionPool, logger: Logger) {
        self.source = source
        self.pool = pool
        self.logger = logger
    }

    public func run() async throws {
        await repeatRounds(every: interval, logger: logger, failure: "google play acknowledgements failed") {
            try await acknowledgeBacklog()
        }
    }

    /// Rounds one after another while each finds a full batch and Google
    /// accepts all of it (a launch day's purchases are not left to one batch
    /// per interval); a round with a failure waits for the next interval.
    @discardableResult
    public func acknowledgeBacklog() async throws -> Int {
        var total = 0
        while true {
            let (claimed, accepted) = try await round()
            total += accepted
            guard claimed == batchSize, accepted == claimed, !Task.isCancelled else { return total }
        }
    }

    /// One round: acknowledges what is due; how many Google accepted.
    @discardableResult
    public func acknowledgeDue() async throws -> Int { try await round().accepted }

    private func round() async throws -> (claimed: Int, accepted: Int) {
        let due = try await pool.withConnection { try await GooglePlayStore.claimDue(limit: batchSize, lease: lease, on: $0) }
        var accepted = 0
        for item in due {
            do {
                switch item.kind {
                case .subscription: try await source.acknowledgeSubscription(subscriptionID: item.productID, token: item.purchaseToken)
                case .product: try await source.acknowledgeProduct(productID: item.productID, token: item.purchaseToken)
                }
                try await pool.withConnection { try await GooglePlayStore.markAcknowledged(item, on: $0) }
                Self.count("acknowledged")
                accepted += 1
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                // 30 s, doubling to an hour: well inside Google's three days.
                let wait = Duration.seconds(min(3_600, 30 << min(item.attempts, 7)))
                try await pool.withConnection {
                    try await GooglePlayStore.markFailed(item, error: "\(error)", retryIn: wait, on: $0)
                }
                Self.count("failed")
                logger.warning("google play acknowledgement failed; retrying", metadata: [
                    "googleplay.purchase.ref": "\(LogReference.subscriber(item.purchaseToken))", "googleplay.attempt": "\(item.attempts + 1)",
                    "error": "\(error)",
                ])
            }
        }
        return (due.count, accepted)
    }

    /// `subledger_googleplay_acknowledgements_total{outcome}`.
    static func count(_ outcome: String) {
        Counter(label: "subledger_googleplay_acknowledgements_total", dimensions: [("outcome", outcome)]).increment()
    }
}

/// Walks Google's voided purchases (`voidedpurchases.list`, `type=1`:
/// subscriptions included) and revokes each one the ledger holds, from the
/// last walk's latest voiding on. One bad item is counted and logged and
/// never halts the walk; a page Google cannot give ends the walk without
/// moving the checkpoint.
/// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.voidedpurchases/list
public struct GooglePlayVoidedReconciler: Service {
    let source: any GooglePlayPurchaseSource
    let writer: LedgerWriter
    let pool: ConnectionPool
    let logger: Logger
    /// nil: the worker is off (`SUBLEDGER_GOOGLEPLAY_RECONCILE_INTERVAL=P0D`).
    public var interval: Duration?
    public var pageSize = 1000

    public init(source: any GooglePlayPurchaseSource, writer: LedgerWriter, interval: Duration?, logger: Logger) {
        self.source = source
        self.writer = writer
        self.pool = writer.pool
        self.interval = interval
        self.logger = logger
    }

    public struct Report: Sendable, Equatable, Encodable {
        public var pages = 0
        public var voided = 0
        public var revoked = 0
        public var alreadyRevoked = 0
        public var notHeld = 0
        public var failed = 0
        /// Another instance was walking; this one did nothing.
        public var anotherWalkRunning = false
    }

    public func run() async throws {
        guard let interval else { return }
        await repeatRounds(every: interval, logger: logger, failure: "google play voided-purchase reconciliation failed") {
            _ = try await reconcile()
        }
    }

    /// One walk, unless another instance is walking (one at a time, under
    /// an advisory lock, so a fleet spends Google's quota once). `since`
    /// overrides the checkpoint (`--since`); Google keeps 30 days of voided
    /// purchases.
    public func reconcile(since: Date? = nil) async throws -> Report {
        try await pool.withConnection { connection in
            guard try await connection.tryLock(.googlePlayVoidedWalk) else {
                var report = Report()
                report.anotherWalkRunning = true
                return report
            }
            do {
                let report = try await walk(since: since)
                try await connection.unlock(.googlePlayVoidedWalk)
                return report
            } catch {
                // A broken connection ends its session and the lock with it.
                try? await connection.unlock(.googlePlayVoidedWalk)
                throw error
            }
        }
    }

    private func walk(since: Date?) async throws -> Report {
        let checkpoint = try await pool.withConnection { try await GooglePlayStore.voidedSince(on: $0) }
        // Google keeps (and answers for) 30 days of voided purchases.
        let oldest = Date().addingTimeInterval(-30 * 86_400 + 300)
        let start = max(since ?? checkpoint ?? oldest, oldest)
        var report = Report()
        var pageToken: String?
        var latest = start
        repeat {
            let page: VoidedPurchasesPage
            do {
                page = try await source.voidedPage(startTime: start, pageToken: pageToken, maxResults: pageSize)
            } catch let error as CancellationError {
                throw error
            } catch {
                throw ServiceError(.upstreamUnavailable, code: .googlePlayUnavailable,
                                   message: "Google Play's voided purchases could not be read: \(error)")
            }
            report.pages += 1
            for failure in page.failures {
                report.failed += 1
                Self.count("malformed")
                logger.warning("google play voided purchase unreadable; skipped", metadata: [
                    "googleplay.item": "\(failure.index)", "error.field": "\(failure.field)", "error": "\(failure.message)",
                ])
            }
            for void in page.voids {
                report.voided += 1
                latest = max(latest, void.voidedAt)
                do {
                    try await revoke(void, into: &report)
                } catch is CancellationError {
                    throw CancellationError()
                } catch {
                    report.failed += 1
                    Self.count("failed")
                    logger.warning("google play voided purchase not recorded; skipped", metadata: [
                        "googleplay.purchase.ref": "\(LogReference.subscriber(void.purchaseToken))", "error": "\(error)",
                    ])
                }
            }
            pageToken = page.nextPageToken
        } while pageToken != nil
        let reached = latest
        try await pool.withConnection { try await GooglePlayStore.setVoidedSince(reached, on: $0) }
        return report
    }

    /// Revokes one voided purchase for whoever holds its token (in either
    /// environment: the list does not say which).
    private func revoke(_ void: GooglePlayVoid, into report: inout Report) async throws {
        let keys = Ledger.Environment.allCases.map { (Store.googlePlay.ownershipKey(void.purchaseToken, environment: $0), $0) }
        let owners = try await OwnershipStore(pool: pool).owners(of: Set(keys.map(\.0)))
        guard let (key, environment) = keys.first(where: { owners[$0.0] != nil }), let owner = owners[key] else {
            report.notHeld += 1
            Self.count("not_held")
            return
        }
        var fact = void
        fact.environment = environment
        let result = try await writer.write(WriteBatch([.fact(.googlePlayVoid(fact), subscriberID: owner, source: FactSource.googlePlay)]))
        if case .duplicate? = result.outcomes.first {
            report.alreadyRevoked += 1
            Self.count("duplicate")
        } else {
            report.revoked += 1
            Self.count("revoked")
        }
    }

    /// `subledger_googleplay_voided_total{outcome}`.
    static func count(_ outcome: String) {
        Counter(label: "subledger_googleplay_voided_total", dimensions: [("outcome", outcome)]).increment()
    }
}
