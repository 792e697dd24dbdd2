import Foundation
import Postgres

/// The reads of the change feed (`sql/0022_change_feed.sql`): the pages of
/// `GET /v1/changes` (`ChangeFeedReader`) and the feed's lag
/// (`ChangeMetrics`). Reads only, so they may run on a standby; the
/// writers' statements are `ChangeRows`.
enum ChangeFeedQueries {
    /// A row of a page read: a kept change, or (`isLast`) the last change
    /// examined, kept or not, with no body.
    struct PageRow {
        var cursor: ChangeCursor
        var body: String?
        var isLast: Bool
        /// How many changes of the order the read examined.
        var examined: Int
    }

    /// Examines at most `window` changes of the order after `after` (of
    /// `subscriberID`'s alone, when given) and keeps up to `limit` of them
    /// whose type is in `types` (any, when empty), in order; then the last
    /// one examined.
    static func page(after: ChangeCursor, subscriberID: String?, types: [String], window: Int, limit: Int,
                     on share: PoolShare) async throws -> [PageRow] {
        let typesJSON = PostgresJSON(data: try JSONEncoder().encode(types))
        // Only transactions older than every running one: a change that
        // commits later always sorts after the cursor handed out now. Every
        // ORDER BY names a table's column: the output `transaction_id::text`
        // is also called `transaction_id`, and would sort as text ("1000" <
        // "999"). The last row (`last`) is the last one examined, kept or not.
        let rows = try await share.query("""
            WITH examined AS MATERIALIZED (
                SELECT changes.transaction_id, changes.feed_position, changes.type FROM changes
                WHERE (changes.transaction_id, changes.feed_position)
                      > (\(String(after.transactionID))::xid8, \(after.position))
                  AND changes.transaction_id < pg_snapshot_xmin(pg_current_snapshot())
                  AND (\(subscriberID == nil) OR changes.subscriber_id = \(subscriberID ?? ""))
                ORDER BY changes.transaction_id, changes.feed_position
                LIMIT \(window)
            ), kept AS (
                SELECT e.transaction_id, e.feed_position FROM examined e
                WHERE \(types.isEmpty) OR e.type IN (SELECT jsonb_array_elements_text(\(typesJSON)::jsonb))
                ORDER BY e.transaction_id, e.feed_position
                LIMIT \(limit)
            )
            SELECT r.transaction_id::text, r.feed_position, r.body, r.last, (SELECT count(*) FROM examined) FROM (
                SELECT k.transaction_id, k.feed_position, c.body::text AS body, false AS last
                FROM kept k JOIN changes c ON c.feed_position = k.feed_position
                UNION ALL
                (SELECT e.transaction_id, e.feed_position, NULL, true FROM examined e
                 ORDER BY e.transaction_id DESC, e.feed_position DESC LIMIT 1)
            ) r
            ORDER BY r.last, r.transaction_id, r.feed_position
            """)
        return try rows.map { row in
            let isLast = try row.decode(Bool.self, at: 3)
            return PageRow(
                cursor: ChangeCursor(transactionID: UInt64(try row.decode(String.self, at: 0)) ?? 0, position: try row.decode(Int64.self, at: 1)),
                body: isLast ? nil : try row.decode(String.self, at: 2), isLast: isLast,
                examined: Int(try row.decode(Int64.self, at: 4)))
        }
    }

    /// now − recorded_at of the first event after the feed consumer's checkpoint.
    static let lagStatement: PostgresQuery = """
        SELECT coalesce(extract(epoch FROM now() - (
            SELECT e.recorded_at FROM events e, consumer_checkpoints c
            WHERE c.name = \(ChangeFeedConsumer.consumerName) AND (e.transaction_id, e.position) > (c.transaction_id, c.position)
            ORDER BY e.transaction_id, e.position LIMIT 1)), 0)::float8
        """
}
