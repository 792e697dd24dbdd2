import EventStore

/// The one place the service is wired: every part a route, a worker's HTTP
/// face or the bench answers with is built here once, from `dependencies`
/// (what is given: the configuration, the pools, the catalog, the caches
/// and signals the parts share). The router only maps these to routes.
///
/// - The one write path: concurrent writes combined into shared commits, its
///   claims of original transactions applying the App Store notifications
///   waiting for them.
/// - The reader on the primary (the write path's side), and the read side
///   the GET routes use: the standbys' when `DATABASE_READ_URL` is set
///   (`ReadPath`), else the same reader.
/// - The store integrations, and the stores of the listings, the change
///   feed, webhooks, erasure and the audit.
public struct AppComponents: Sendable {
    public let dependencies: AppDependencies
    public let writer: LedgerWriter
    /// Reads on the primary, beside the writer (ledger cache shared).
    public let reader: SubscriberReader
    public let appStore: AppStoreIntegration
    /// Off (its routes answer 503) unless configured; a configuration that
    /// does not work has stopped `serve` before this is built.
    public let googlePlay: GooglePlayIntegration

    /// States, explanations, timelines and transactions for the GET routes,
    /// on the read side.
    public let stateReader: SubscriberReader
    /// Listings across subscribers, on the read side within its listings share.
    public let readModels: ReadModelQueries
    public let reminders: ReminderStore
    public let notifications: NotificationStore
    public let analytics: AnalyticsStore
    public let changeFeed: ChangeFeedReader

    /// On the primary: what writes or must see the newest rows.
    public let health: HealthStore
    public let invalidProducts: InvalidProductStore
    public let parked: ParkedEventStore
    /// The projections a parked event can be replayed into.
    public let replayConsumers: [any EventConsumer]
    public let webhooks: WebhookStore
    public let webhookDestinations: WebhookDestinations
    public let erasure: ErasureService
    public let audit: AuditStore

    public init(_ dependencies: AppDependencies) {
        let appStore = AppStoreIntegration(dependencies)
        var writer = LedgerWriter(dependencies)
        writer.claimObserver = appStore.claimObserver
        writer.combiner = dependencies.writeCombiner
        var reader = SubscriberReader(dependencies)
        reader.combiner = ReadCombiner()
        self.dependencies = dependencies
        self.writer = writer
        self.reader = reader
        self.appStore = appStore
        do {
            self.googlePlay = try GooglePlayIntegration.make(dependencies, writer: writer, reader: reader)
        } catch {
            self.googlePlay = GooglePlayIntegration(unavailable: "\(error)")
        }

        let reads = ReadPath(dependencies, primaryReader: reader)
        stateReader = reads.reader
        readModels = ReadModelQueries(pool: reads.pool, share: reads.listings)
        reminders = ReminderStore(pool: reads.pool, listings: reads.listings)
        notifications = NotificationStore(pool: reads.pool, listings: reads.listings)
        analytics = AnalyticsStore(pool: reads.pool, share: reads.listings)
        changeFeed = ChangeFeedReader(dependencies, listings: reads.listings)

        let configuration = dependencies.configuration
        health = HealthStore(dependencies)
        invalidProducts = InvalidProductStore(pool: dependencies.pool, listings: dependencies.listings)
        parked = ParkedEventStore(pool: dependencies.pool)
        replayConsumers = Projections.all(store: dependencies.store, catalog: dependencies.catalog.catalog)
        webhooks = WebhookStore(pool: dependencies.pool, sealing: WebhookSealingSource(configuration.secret))
        webhookDestinations = WebhookDestinations(allowPrivate: configuration.webhookAllowPrivate)
        erasure = ErasureService(dependencies)
        audit = AuditStore(pool: dependencies.pool)
    }
}
