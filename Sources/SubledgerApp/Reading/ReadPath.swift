import EventStore
import Postgres

/// Where the API's reads go: the standbys of `DATABASE_READ_URL` when it is
/// set, else the primary. `AppComponents` puts a GET route on this path by
/// building its store from `pool` (or `listings`, for listings across
/// subscribers) instead of the dependencies' own; nothing reached through
/// it may write.
///
/// A standby pool runs a read whose request carried a write's consistency
/// token (`ReadConsistency`) on the primary when its server has not
/// replayed that write within `PoolConfiguration.replayWait`, and every
/// read while no standby can be reached.
struct ReadPath: Sendable {
    /// The standby pool, or the primary's when there is none.
    let pool: ConnectionPool
    /// The share of `pool` listings across subscribers may hold at once.
    let listings: PoolShare
    let store: EventStore
    /// Reads states, explanations, timelines and transactions through `pool`.
    let reader: SubscriberReader

    /// The path of `dependencies`: their standby pool when they have one;
    /// `primaryReader` (the writer's side) otherwise.
    init(_ dependencies: AppDependencies, primaryReader: SubscriberReader) {
        guard let standby = dependencies.standbyPool else {
            pool = dependencies.pool
            listings = dependencies.listings
            store = dependencies.store
            reader = primaryReader
            return
        }
        pool = standby
        listings = PoolShare(of: standby, limit: max(1, standby.configuration.maximumConnections / 4))
        store = EventStore(pool: standby, logger: dependencies.logger)
        var reader = SubscriberReader(store: store, catalog: dependencies.catalog.catalog)
        reader.ledgerCache = dependencies.ledgers
        reader.combiner = ReadCombiner()
        reader.now = primaryReader.now
        reader.cacheFromVersion = primaryReader.cacheFromVersion
        reader.storesDerivedData = false
        self.reader = reader
    }
}
