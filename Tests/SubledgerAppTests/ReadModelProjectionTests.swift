import EventStore
import Foundation
import JSON
import Ledger
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
import TestSupport
import Testing

@Suite("Read-model projection")
struct ReadModelProjectionTests {
    /// Random histories written through the write path and projected in
    /// uneven batches while they grow: at many instants, what the tables say
    /// is active (by SQL range predicates) is what the fold says; the stored
    /// rows are the ledger's read model; a rebuild gives the same rows.
    @Test(arguments: [UInt64(1), 2, 3])
    func theTablesAgreeWithTheFoldAndARebuildEqualsTheLiveModels(seed: UInt64) async throws {
        let dependencies = try await makeDependencies()
        defer { Task { await dependencies.pool.close() } }
        let writer = LedgerWriter(dependencies)
        let projection = SubscriptionProjection(store: dependencies.store, catalog: dependencies.catalog.catalog)
        var history = RandomHistory(seed: seed)
        for _ in 0..<25 {
            let commands = (0..<history.int(1...6)).map { _ in history.next() }
            _ = try await writer.write(WriteBatch(commands, refusals: .skip))
            if history.chance(40) { try await dependencies.project(projection, batch: history.int(1...9)) }
        }
        try await dependencies.project(projection, batch: 5)

        let catalog = dependencies.catalog.catalog
        for subscriber in history.subscribers {
            let ledger = try await dependencies.ledger(of: subscriber)
            let model = ledger.readModel(catalog: catalog)
            var instants = (0..<40).map { _ in date("2025-01-01T00:00:00Z") + history.days(-5...260) }
            instants += model.entitlements.flatMap { [$0.start, $0.start - 0.001] + ($0.end.map { [$0, $0 - 0.001] } ?? []) }
            for environment in Environment.allCases {
                for at in instants {
                    let state = ledger.state(at: at, catalog: catalog, environment: environment)
                    let entitlements = try await dependencies.pool.query("""
                        SELECT entitlement FROM entitlements
                        WHERE environment = \(environment.rawValue) AND subscriber_id = \(subscriber)
                          AND tstzrange(starts_at, ends_at) @> \(at)::timestamptz
                        """).map { try $0.decode(String.self, at: 0) }
                    #expect(Set(entitlements) == Set(state.activeEntitlementIDs), "seed \(seed) \(subscriber) \(environment) \(RFC3339.format(at))")
                    let products = try await dependencies.pool.query("""
                        SELECT product_id FROM product_activity
                        WHERE environment = \(environment.rawValue) AND subscriber_id = \(subscriber)
                          AND tstzrange(starts_at, ends_at) @> \(at)::timestamptz
                        """).map { try $0.decode(String.self, at: 0) }
                    let active = state.subscriptions.filter { $0.status == .active || $0.status == .grace }.map(\.productID)
                        + state.purchases.filter { $0.type != .consumable && $0.revokedAt == nil }.map(\.productID)
                    #expect(Set(products) == Set(active), "seed \(seed) \(subscriber) \(environment) \(RFC3339.format(at))")
                }
            }
            // The current rows: what the fold lists once every fact took effect.
            let now = Date()
            for environment in Environment.allCases {
                let listed = try await dependencies.pool.query("""
                    SELECT "group", original_transaction_id,
                           subscription_status(\(now)::timestamptz, starts_at, expires_at, grace_ends_at, revoked_at)
                    FROM subscriptions WHERE environment = \(environment.rawValue) AND subscriber_id = \(subscriber)
                      AND type = 'auto-renewable'
                    ORDER BY 1, 2
                    """).map { "\(try $0.decode(String.self, at: 0))/\(try $0.decode(String.self, at: 1)):\(try $0.decode(String.self, at: 2))" }
                let folded = ledger.state(at: now, catalog: catalog, environment: environment).subscriptions
                    .filter { $0.type == .autoRenewable }.map { "\($0.group)/\($0.originalTransactionID):\($0.status.rawValue)" }
                #expect(listed == folded, "seed \(seed) \(subscriber) \(environment)")
            }
        }

        let live = try await dependencies.readModelRows()
        #expect(live.count > 20)
        let expected = try await expectedRows(history.subscribers, dependencies)
        #expect(live == expected)
        _ = try await dependencies.store.rebuild(projection, batchSize: 7)
        #expect(try await dependencies.readModelRows() == live)
    }

    @Test func aBatchCostsTheSameRoundTripsWhateverItsSubscribers() async throws {
        let dependencies = try await makeDependencies()
        defer { Task { await dependencies.pool.close() } }
        let writer = LedgerWriter(dependencies)
        let start = date("2025-03-01T00:00:00Z")
        let commands = (0..<300).map { index in
            WriteCommand.fact(.purchase(.init(transactionID: "bulk\(index)", productID: "com.example.pass.30d",
                                              purchaseDate: start + Double(index) * 60)), subscriberID: "bulk-\(index % 150)")
        }
        _ = try await writer.write(WriteBatch(commands, refusals: .skip))
        let counter = StatementCounter()
        let projection = CountingConsumer(inner: SubscriptionProjection(store: dependencies.store, catalog: dependencies.catalog.catalog),
                                          counter: counter)
        try await dependencies.project(projection, batch: 1000)
        // One read (the touched ledgers) and one pipeline (the writes), for 150 subscribers.
        #expect(await counter.batches == 1)
        #expect(await counter.roundTrips == [2])
        #expect(try await dependencies.pool.query("SELECT count(*) FROM non_renewing_periods").first?.decode(Int.self, at: 0) == 300)
        #expect(try await dependencies.pool.query("SELECT count(DISTINCT subscriber_id) FROM entitlements").first?.decode(Int.self, at: 0) == 150)
    }

    /// The read models' environment, type and store are enums (sql/0046):
    /// they read as the same words, compare with literals and untyped
    /// parameters, need a cast against `text`, and refuse a word outside
    /// their vocabulary (docs/api.md).
    @Test func theVocabulariesReadAsWordsAndRefuseOthers() async throws {
        let dependencies = try await makeDependencies()
        defer { Task { await dependencies.pool.close() } }
        let writer = LedgerWriter(dependencies)
        let purchase = WriteCommand.fact(.purchase(.init(transactionID: "v1", productID: "com.example.pass.30d",
                                                         purchaseDate: date("2025-03-01T00:00:00Z"))), subscriberID: "vocabulary")
        _ = try await writer.write(WriteBatch([purchase], refusals: .skip))
        try await dependencies.project(SubscriptionProjection(store: dependencies.store, catalog: dependencies.catalog.catalog), batch: 10)
        let pool = dependencies.pool
        let words = try await pool.query("""
            SELECT environment, type, store FROM subscriptions WHERE environment = 'Production' AND subscriber_id = 'vocabulary'
            """).map { [try $0.decode(String.self, at: 0), try $0.decode(String.self, at: 1), try $0.decode(String.self, at: 2)] }
        #expect(words == [["Production", "non-renewing", "app_store"]])
        let products = try await pool.query("""
            SELECT type FROM product_activity WHERE environment = \("Production") AND subscriber_id = 'vocabulary'
            """).map { try $0.decode(String.self, at: 0) }
        #expect(products == ["non-renewing"])
        #expect(try await pool.query("SELECT count(*) FROM entitlements WHERE environment = 'Sandbox'").first?.decode(Int.self, at: 0) == 0)
        // Against a value typed text, the column is cast.
        #expect(try await pool.query("""
            SELECT count(*) FROM entitlements WHERE environment::text = \("Production")::text AND subscriber_id = 'vocabulary'
            """).first?.decode(Int.self, at: 0) == 1)
        await #expect(throws: PostgresError.self) {
            try await pool.query("SELECT count(*) FROM entitlements WHERE environment = \("Production")::text")
        }
        // A word outside the vocabulary is refused, and nothing is written.
        await #expect(throws: PostgresError.self) {
            try await pool.query("""
                INSERT INTO entitlements (environment, subscriber_id, entitlement, starts_at, product_id, source_transaction_id)
                VALUES ('production', 'vocabulary', 'pro', now(), 'p', 't')
                """)
        }
        #expect(try await pool.query("SELECT count(*) FROM entitlements WHERE subscriber_id = 'vocabulary'").first?.decode(Int.self, at: 0) == 1)
    }

    /// The read model of each subscriber, as the tables would hold it.
    func expectedRows(_ subscribers: [String], _ dependencies: AppDependencies) async throws -> [String] {
        let scratch = try await makeDependencies()
        defer { Task { await scratch.pool.close() } }
        var models: [SubscriberReadModel] = []
        for subscriber in subscribers {
            models.append(try await dependencies.ledger(of: subscriber).readModel(catalog: dependencies.catalog.catalog))
        }
        try await scratch.pool.withTransaction { try await ReadModelRows.replace(models, on: $0) }
        return try await scratch.readModelRows()
    }
}

/// Counts the batches a consumer handles and the round trips each cost.
actor StatementCounter {
    private(set) var roundTrips: [UInt64] = []
    var batches: Int { roundTrips.count }
    func count(_ roundTrips: UInt64) { self.roundTrips.append(roundTrips) }
}

struct CountingConsumer<Inner: EventConsumer>: EventConsumer {
    let inner: Inner
    let counter: StatementCounter
    var name: String { inner.name }

    func handle(_ events: [RecordedEvent], on connection: Connection) async throws {
        let before = connection.roundTrips
        try await inner.handle(events, on: connection)
        await counter.count(connection.roundTrips - before)
    }

    func reset(on connection: Connection) async throws { try await inner.reset(on: connection) }
}
