import Foundation
import Hummingbird
import HummingbirdTesting
import Ledger
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
import Testing

/// Listings across subscribers stay cheap however large the tables grow, and
/// cannot take the connections writes need.
@Suite struct SupportListingTests {
    /// The plan of `query` with its values bound, as the server would run it.
    static func plan(_ query: PostgresQuery, on connection: Connection) async throws -> String {
        var explain = PostgresQuery(unsafeSQL: "EXPLAIN " + query.sql, binds: query.binds)
        explain.mayPrepare = false
        return try await connection.query(explain).map { try $0.decode(String.self, at: 0) }.joined(separator: "\n")
    }

    /// Read in the index's order up to the limit: no whole-table scan, no sort.
    static func expectWalk(_ plan: String, of index: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(plan.contains(index), "\(plan)", sourceLocation: sourceLocation)
        #expect(!plan.contains("Seq Scan"), "\(plan)", sourceLocation: sourceLocation)
        #expect(!plan.contains("Sort"), "\(plan)", sourceLocation: sourceLocation)
    }

    @Test func everyListingWalksAnIndexOnTablesOf100kRows() async throws {
        let dependencies = try await makeDependencies(poolSize: 1)
        defer { Task { await dependencies.pool.close() } }
        try await dependencies.pool.withConnection { connection in
            try await connection.execute(unsafeSQL: """
                INSERT INTO appstore_notifications (notification_uuid, notification_type, signed_date, environment, subscriber_id,
                                                    attribution, status, summary, signed_payload, received_at)
                SELECT 'n' || i, 'DID_RENEW', now(), 'Production', 's' || (i % 10), 'app_account_token',
                       CASE WHEN i % 100 = 0 THEN 'pending' ELSE 'applied' END, '', '', now() - i * interval '1 second'
                FROM generate_series(1, 100000) i;
                INSERT INTO reminders (id, subscriber_id, "group", product_id, type, lead, expires_at, due_at, status, next_attempt_at)
                SELECT 'r' || i, 's' || (i % 5000), 'pass', 'com.example.pass.30d', 'renewal_reminder', 'P1D',
                       now() + i * interval '1 minute', now() + i * interval '1 minute',
                       (ARRAY['pending', 'sent', 'cancelled', 'skipped', 'failed'])[1 + i % 5], now() + i * interval '1 minute'
                FROM generate_series(1, 100000) i;
                INSERT INTO invalid_product_identifiers (identifier, reports, devices, first_reported_at, last_reported_at)
                SELECT 'bad.' || i, 1, 1, now() - i * interval '1 second', now() - i * interval '1 second'
                FROM generate_series(1, 100000) i;
                INSERT INTO subscriptions (environment, subscriber_id, "group", series, product_id, type, original_transaction_id,
                                           latest_transaction_id, starts_at, expires_at, auto_renew, entitlements)
                SELECT 'Production', 's' || i, 'g' || (i % 10), 'o' || i, 'com.example.pro.monthly', 'auto-renewable', 'o' || i,
                       'o' || i, now() - interval '1 day', now() + i * interval '1 minute', true, ARRAY['pro']
                FROM generate_series(1, 100000) i;
                ANALYZE appstore_notifications; ANALYZE reminders; ANALYZE invalid_product_identifiers; ANALYZE subscriptions;
                """)
            let notifications = "appstore_notifications_"
            Self.expectWalk(try await Self.plan(NotificationStore.listQuery(subscriberID: nil, status: nil, limit: 1000), on: connection),
                            of: notifications + "received")
            Self.expectWalk(try await Self.plan(NotificationStore.listQuery(subscriberID: "s4", status: nil, limit: 1000), on: connection),
                            of: notifications + "subscriber_received")
            Self.expectWalk(try await Self.plan(NotificationStore.listQuery(subscriberID: nil, status: .pending, limit: 1000), on: connection),
                            of: notifications + "status_received")

            let soon = Date() + 3600
            // At the route's default page of 1000.
            Self.expectWalk(try await Self.plan(ReminderStore.listQuery(status: nil, subscriberID: nil, dueAfter: nil, dueBefore: nil,
                                                                        limit: 1000), on: connection), of: "reminders_due_order")
            Self.expectWalk(try await Self.plan(ReminderStore.listQuery(status: .sent, subscriberID: nil, dueAfter: soon, dueBefore: nil,
                                                                        limit: 1000), on: connection), of: "Index Scan using reminders_")
            Self.expectWalk(try await Self.plan(ReminderStore.listQuery(status: nil, subscriberID: "s42", dueAfter: nil, dueBefore: soon,
                                                                        limit: 1000), on: connection), of: "reminders_subscriber")

            Self.expectWalk(try await Self.plan(InvalidProductStore.summariesQuery(limit: 1000), on: connection),
                            of: "invalid_product_identifiers_recent")

            // The product and status filters are computed per row (the current
            // period's product, the status at `now`): no index serves them, so
            // every filter rides the key's walk, cut at the scan budget.
            var filters: [ReadModelQueries.SubscriptionFilter] = []
            for change in [{ (_: inout ReadModelQueries.SubscriptionFilter) in },
                           { $0.entitlement = "pro" }, { $0.group = "g3" },
                           { $0.productID = "com.example.rare" }, { $0.status = .revoked },
                           { $0.expiresAfter = Date() }, { $0.expiresBefore = Date() + 86_400 * 30 },
                           { $0.cursor = SubscriptionCursor(subscriberID: "s5", group: "g5", series: "o5") }] {
                var filter = ReadModelQueries.SubscriptionFilter()
                filter.limit = 1000
                change(&filter)
                filters.append(filter)
            }
            for filter in filters {
                let plan = try await Self.plan(ReadModelQueries.subscriptionsQuery(filter, now: Date()), on: connection)
                Self.expectWalk(plan, of: "subscriptions_pkey")
                #expect(plan.contains("Limit"), "\(plan)")
            }
        }

        // A value no row has, or only one row far down the key order: each
        // page reads at most the budget and says where to go on, so a rare
        // filter costs pages, never a walk of the whole table.
        try await dependencies.pool.withConnection { connection in
            try await connection.execute(unsafeSQL: """
                UPDATE subscriptions SET product_id = 'com.example.rare' WHERE subscriber_id = 's99999';
                """)
        }
        let queries = ReadModelQueries(pool: dependencies.pool)
        for (productID, expected) in [("com.example.rare", ["s99999"]), ("com.example.none", [])] {
            var filter = ReadModelQueries.SubscriptionFilter()
            filter.productID = productID
            var found: [String] = []
            var pages = 0
            repeat {
                let (page, next) = try await queries.subscriptions(filter, now: Date())
                pages += 1
                found += page.map(\.subscriberID)
                filter.cursor = next
            } while filter.cursor != nil && pages < 100
            #expect(found == expected)
            // 100,000 rows, no page reading more than 10,000 of them.
            #expect(pages >= 10 && pages <= 11, "\(pages) pages")
        }
        // A full page still ends at its last row, as before.
        var common = ReadModelQueries.SubscriptionFilter()
        common.limit = 3
        let (page, next) = try await queries.subscriptions(common, now: Date())
        #expect(page.count == 3 && next?.subscriberID == page.last?.subscriberID)
    }

    /// Counts at an instant and time series read the rows still open then
    /// through their end, not each table whole, when most rows have ended (an
    /// app with churn: every lapsed subscriber's stretches stay).
    @Test func statsReadTheOpenRowsThroughTheirEndOnTablesOf100kRows() async throws {
        let dependencies = try await makeDependencies(poolSize: 1)
        defer { Task { await dependencies.pool.close() } }
        try await dependencies.pool.withConnection { connection in
            // 100,000 stretches of each table; one in fifty still open.
            try await connection.execute(unsafeSQL: """
                INSERT INTO entitlements (environment, subscriber_id, entitlement, starts_at, ends_at, product_id, source_transaction_id)
                SELECT 'Production', 's' || i, 'pro', now() - interval '400 days' + i * interval '1 minute',
                       CASE WHEN i % 50 = 0 THEN now() + interval '20 days' ELSE now() - interval '300 days' + i * interval '1 minute' END,
                       'com.example.pro.monthly', 't' || i
                FROM generate_series(1, 100000) i;
                INSERT INTO product_activity (environment, subscriber_id, product_id, starts_at, ends_at, type, "group", source_transaction_id)
                SELECT environment, subscriber_id, product_id, starts_at, ends_at, 'auto-renewable', 'pro', source_transaction_id
                FROM entitlements;
                ANALYZE entitlements; ANALYZE product_activity;
                """)
            let now = Date()
            for plan in [try await Self.plan(ReadModelQueries.statsQuery(at: now, environment: .production), on: connection),
                         try await Self.plan(ReadModelQueries.activeSeriesQuery(from: now - 86_400 * 7, to: now, interval: .day,
                                                                                entitlement: "pro", environment: .production),
                                             on: connection)] {
                #expect(plan.contains("entitlements_ends") || plan.contains("product_activity_ends"), "\(plan)")
                #expect(!plan.contains("Seq Scan on entitlements") && !plan.contains("Seq Scan on product_activity"), "\(plan)")
            }
        }
        // And the counts are those of the open rows.
        let stats = try await ReadModelQueries(pool: dependencies.pool).stats(at: Date(), environment: .production)
        #expect(stats.activeSubscribers == 2_000 && stats.entitlements.first?.active == 2_000, "\(stats)")
    }

    @Test func listingsWaitForTheirShareAndWritesStillFindAConnection() async throws {
        let dependencies = try await makeDependencies(poolSize: 4) { $0.leaseTimeout = .milliseconds(300) }
        #expect(dependencies.listings.limit == 1)
        try await withRouter(dependencies) { client in
            // A slow listing holds the share's one connection.
            try await whileHolding({ try await dependencies.listings.withConnection($0) }) {
                let listing = try await client.get("/v1/reminders", key: Keys.support)
                #expect(listing.status == .serviceUnavailable, "\(listing.status) \(listing.text)")
                #expect(listing.headers[.retryAfter] != nil)
                let write = try await client.post("/v1/subscribers/share-1/events", purchaseJSON("share-t1"))
                #expect(write.status == .created, "\(write.text)")
                #expect(try await client.get("/v1/subscribers/share-1").status == .ok)
            }
            #expect(try await client.get("/v1/reminders", key: Keys.support).status == .ok)
        }
    }
}
