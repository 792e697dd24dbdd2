import EventStore
import AppStore
import Foundation
import Ledger
import Logging
import Postgres
import Prometheus

/// What the HTTP layer, the workers and the commands share.
public struct AppDependencies: Sendable {
    public var configuration: SubledgerConfiguration
    public var pool: ConnectionPool
    public var store: EventStore
    public var catalog: CatalogSource
    public var logger: Logger
    /// Rendered by `/metrics`; `main` bootstraps swift-metrics with it.
    public var metrics: PrometheusCollectorRegistry
    /// Consumers whose lag `/health` reports.
    public var consumers: [String]
    /// Verifies App Store notifications; nil: built from the configuration
    /// (`AppStoreIntegration.makeVerifier`).
    public var appStoreVerifier: AppStoreVerifier?
    /// Calls the App Store Server API; nil: built from the configuration when
    /// its key is set (`AppStoreAPIClient.make`).
    public var appStoreAPIClient: AppStoreAPIClient?
    /// Long ledgers kept in memory between requests, shared by the writers
    /// and readers built from these dependencies.
    public var ledgers = LedgerCache()
    /// Combines the router's concurrent one-fact writes into shared commits;
    /// its statistics say how (the benchmark prints them).
    public var writeCombiner = WriteCombiner()
    /// The connections listings across subscribers (support and console
    /// queries, stats) may hold at once: a quarter of the pool, so however
    /// many of them arrive, writes and Apple's notifications find one.
    public var listings: PoolShare
    /// Wakes the change feed's long-polls: one listening connection per
    /// instance, shared by every waiting request.
    public var changeSignal = ChangeSignal()
    /// Who read or changed which subscriber, buffered until `AuditService`
    /// writes it (`SUBLEDGER_AUDIT`).
    public var auditTrail: AuditTrail
    /// The standbys of `DATABASE_READ_URL` (a pool whose `primary` is
    /// `pool`); nil: the primary answers every read. See `ReadPath`.
    public var standbyPool: ConnectionPool?
    /// The consistency tokens of write answers.
    public var commitPositions: CommitPositions
    /// Asks Google Play; nil: the Play Developer API client the
    /// configuration describes (`GooglePlayIntegration.make`).
    public var googlePlaySource: (any GooglePlayPurchaseSource)?
    /// Google's keys for push tokens; nil: downloaded from `SUBLEDGER_GOOGLEPLAY_JWKS_URL`.
    public var googlePlayKeys: (@Sendable () async throws -> Data)?

    public init(configuration: SubledgerConfiguration, pool: ConnectionPool, catalog: CatalogSource,
                metrics: PrometheusCollectorRegistry = PrometheusCollectorRegistry(),
                consumers: [String] = [], logger: Logger) {
        self.configuration = configuration
        self.pool = pool
        self.store = EventStore(pool: pool, logger: logger)
        self.listings = PoolShare(of: pool, limit: max(1, pool.configuration.maximumConnections / 4))
        self.commitPositions = CommitPositions(pool: pool)
        self.catalog = catalog
        self.metrics = metrics
        self.consumers = consumers
        self.logger = logger
        self.auditTrail = AuditTrail(isEnabled: configuration.auditEnabled)
    }
}
