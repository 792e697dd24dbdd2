import Foundation
import Ledger
import Postgres

/// Product identifiers the store reported invalid on devices
/// (`invalid_product_reports`).
public struct InvalidProductStore: Sendable {
    let pool: ConnectionPool

    /// Where listings across subscribers run: the support reads' share of
    /// the pool (`AppDependencies.supportReads`), or else all of it.
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

    /// Records that `identifiers` were reported invalid on a device.
    public func record(_ identifiers: [String], deviceID: String?) async throws {
        try await pool.query("""
            INSERT INTO invalid_product_reports (identifier, device_id)
            SELECT value, \(deviceID)::text FROM jsonb_array_elements_text(\(JSONArgument.strings(identifiers))::jsonb)
            """)
    }

    /// Every reported identifier, most recently reported first.
    public func summaries(catalog: Catalog, limit: Int = 1000) async throws -> [Summary] {
        let rows = try await listings.query("""
            SELECT identifier, count(*), count(DISTINCT device_id), min(reported_at), max(reported_at)
            FROM invalid_product_reports GROUP BY identifier ORDER BY max(reported_at) DESC, identifier LIMIT \(limit)
            """)
        return try rows.map { row in
            let identifier = try row.decode(String.self, at: 0)
            return Summary(identifier: identifier, inCatalog: catalog.product(id: identifier) != nil,
                           reports: try row.decode(Int.self, at: 1), devices: try row.decode(Int.self, at: 2),
                           firstReportedAt: try row.decode(Date.self, at: 3), lastReportedAt: try row.decode(Date.self, at: 4))
        }
    }
}
