import Foundation
import Ledger
import Postgres

/// A place in the change feed's global order: `(transaction id, position)`
/// of the last change read, as an opaque token.
public struct ChangeCursor: Sendable, Equatable {
    public var transactionID: UInt64
    public var position: Int64

    public static let start = ChangeCursor(transactionID: 0, position: 0)

    public init(transactionID: UInt64, position: Int64) {
        self.transactionID = transactionID
        self.position = position
    }

    /// `c1.<transaction>.<position>`, base64url: opaque to clients.
    public var token: String {
        Data("c1.\(transactionID).\(position)".utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    public init?(token: String) {
        guard token.count <= 100 else { return nil }
        var base64 = token.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64) else { return nil }
        let parts = String(decoding: data, as: UTF8.self).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "c1", let transaction = UInt64(parts[1]), let position = Int64(parts[2]),
              position >= 0 else { return nil }
        self.init(transactionID: transaction, position: position)
    }
}

/// Reads the change feed (`GET /v1/changes`): one global order, keyset
/// pages, long-polls woken by `ChangeSignal`. Reads only (it may be served
/// from a standby): no statement here writes.
public struct ChangeFeedReader: Sendable {
    public struct Filter: Sendable {
        public var after = ChangeCursor.start
        public var limit = 100
        public var types: [String] = []
        public var subscriberID: String?
        public var wait: Duration = .zero

        public init() {}
    }

    public struct Page: Sendable {
        /// Each change's JSON, as stored.
        public var changes: [String]
        public var next: ChangeCursor
    }

    let pool: ConnectionPool
    let share: PoolShare
    let signal: ChangeSignal

    /// Reads through `listings` (a standby's share when `DATABASE_READ_URL`
    /// is set; the pool's support share by default). The long-poll listens on
    /// the primary: a standby cannot `LISTEN`, and notifications are not
    /// replicated.
    public init(_ dependencies: AppDependencies, listings: PoolShare? = nil) {
        pool = dependencies.pool
        share = listings ?? dependencies.supportReads
        signal = dependencies.changeSignal
    }

    /// The changes after the cursor; with `wait`, when there are none yet,
    /// holds until one is published or the time passes.
    public func page(_ filter: Filter) async throws -> Page {
        let deadline = ContinuousClock.now + filter.wait
        var notified = false
        while true {
            let ticket = filter.wait > .zero ? await signal.ticket(conninfo: pool.configuration.conninfo) : nil
            let page = try await read(filter)
            let remaining = deadline - .now
            guard page.changes.isEmpty, let ticket, remaining > .zero else { return page }
            // After a notification whose change an older running transaction
            // still hides, look again soon rather than at the next notification.
            await signal.wait(after: ticket, timeout: notified ? min(remaining, .milliseconds(250)) : remaining)
            notified = true
        }
    }

    func read(_ filter: Filter) async throws -> Page {
        let types = PostgresJSON(data: try JSONEncoder().encode(filter.types))
        // Only transactions older than every running one: a change that
        // commits later always sorts after the cursor handed out now.
        let rows = try await share.query("""
            SELECT transaction_id::text, feed_position, body::text FROM changes
            WHERE (transaction_id, feed_position) > (\(String(filter.after.transactionID))::xid8, \(filter.after.position))
              AND transaction_id < pg_snapshot_xmin(pg_current_snapshot())
              AND (\(filter.types.isEmpty) OR type IN (SELECT jsonb_array_elements_text(\(types)::jsonb)))
              AND (\(filter.subscriberID == nil) OR subscriber_id = \(filter.subscriberID ?? ""))
            ORDER BY transaction_id, feed_position
            LIMIT \(filter.limit)
            """)
        var next = filter.after
        var changes: [String] = []
        for row in rows {
            next = ChangeCursor(transactionID: UInt64(try row.decode(String.self, at: 0)) ?? 0, position: try row.decode(Int64.self, at: 1))
            changes.append(try row.decode(String.self, at: 2))
        }
        return Page(changes: changes, next: next)
    }
}
