import Foundation
import Ledger
import Postgres

/// Product identifiers the store reported invalid on devices
/// (`invalid_product_reports`).
public struct InvalidProductStore: Sendable {
    let pool: ConnectionPool

    /// Where listings across subscribers run: the support reads' share of
    /// the pool (`AppDependencies.listings`), or else all of it.
    let listings: PoolShare

    public init(pool: ConnectionPool, listings: PoolShare? = nil) {
        self.pool = pool
        self.listings = listings ?? PoolShare(of: pool, limit: pool.configuration.maximumConnections)
    }

    /// One identifier's reports.
    public struct Summary: Sendable, Encodable {
        public var identifier: String
        public var inCatalog: Bool
        public var reports: Int
        public var devices: Int
        public var firstReportedAt: Date
        public var lastReportedAt: Date
    }

    /// Records that `identifiers` were reported invalid on a device, and
    /// keeps each identifier's summary row (what the listing reads) in step.
    public func record(_ identifiers: [String], deviceID: String?) async throws {
        let list = JSONArgument.strings(identifiers)
        try await pool.query("""
            WITH stored AS (
                INSERT INTO invalid_product_reports (identifier, device_id)
                SELECT value, \(deviceID)::text FROM jsonb_array_elements_text(\(list)::jsonb)
                RETURNING identifier, reported_at
            ), new_devices AS (
                INSERT INTO invalid_product_devices (identifier, device_id)
                SELECT DISTINCT value, \(deviceID)::text FROM jsonb_array_elements_text(\(list)::jsonb)
                WHERE \(deviceID)::text IS NOT NULL
                ON CONFLICT DO NOTHING
                RETURNING identifier
            )
            INSERT INTO invalid_product_identifiers AS i (identifier, reports, devices, first_reported_at, last_reported_at)
            SELECT s.identifier, count(*), (SELECT count(*) FROM new_devices d WHERE d.identifier = s.identifier),
                   min(s.reported_at), max(s.reported_at)
            FROM stored s GROUP BY s.identifier
            ON CONFLICT (identifier) DO UPDATE SET
                reports = i.reports + EXCLUDED.reports, devices = i.devices + EXCLUDED.devices,
                last_reported_at = greatest(i.last_reported_at, EXCLUDED.last_reported_at)
            """)
    }

    /// The listing's statement: a walk of `invalid_product_identifiers_recent`.
    static func summariesQuery(limit: Int) -> PostgresQuery {
        """
        SELECT identifier, reports, devices, first_reported_at, last_reported_at FROM invalid_product_identifiers
        ORDER BY last_reported_at DESC, identifier LIMIT \(limit)
        """
    }

    /// Every reported identifier, most recently reported first.
    public func summaries(catalog: Catalog, limit: Int = 1000) async throws -> [Summary] {
        let rows = try await listings.query(Self.summariesQuery(limit: limit))
        return try rows.map { row in
            let identifier = try row.decode(String.self, at: 0)
            return Summary(identifier: identifier, inCatalog: catalog.product(id: identifier) != nil,
                           reports: try row.decode(Int.self, at: 1), devices: try row.decode(Int.self, at: 2),
                           firstReportedAt: try row.decode(Date.self, at: 3), lastReportedAt: try row.decode(Date.self, at: 4))
        }
    }
}
