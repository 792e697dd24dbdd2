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
/// from a standby): its statements (`ChangeFeedQueries`) write nothing.
///
/// A read examines at most `examined(limit)` changes of the order (of one
/// subscriber's changes with `subscriberID`), then keeps those the filter
/// wants: a `types` filter that matches nothing costs the same small read
/// each time, and the cursor moves past what was examined, so a consumer
/// reaches the end in `ceil(changes / examined)` reads. A page may hold fewer
/// than `limit` changes, or none, while more exist after its cursor.
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
        /// How many changes of the order the read looked at (kept or not).
        public var examined: Int = 0
    }

    /// Changes of the order one read looks at, at least: `max(limit, this)`.
    public static let examinedPerRead = 1000

    /// After a notification finds nothing new (an older transaction still
    /// hides the change), the first look again comes after this, each next
    /// one after twice as long, up to `longestRelook`.
    static let firstRelook: Duration = .milliseconds(250)
    static let longestRelook: Duration = .seconds(4)

    let pool: ConnectionPool
    let share: PoolShare
    let signal: ChangeSignal

    /// Reads through `listings` (a standby's share when `DATABASE_READ_URL`
    /// is set; the pool's support share by default). The long-poll listens on
    /// the primary: a standby cannot `LISTEN`, and notifications are not
    /// replicated.
    public init(_ dependencies: AppDependencies, listings: PoolShare? = nil) {
        pool = dependencies.pool
        share = listings ?? dependencies.listings
        signal = dependencies.changeSignal
    }

    /// The changes after the cursor; with `wait`, when there are none yet,
    /// holds until one is published or the time passes. A read that examined
    /// a whole window without keeping anything answers at once (empty, its
    /// cursor moved): the next read goes on from there. One that reached the
    /// end of what is visible waits on from its new cursor.
    public func page(_ filter: Filter) async throws -> Page {
        let deadline = ContinuousClock.now + filter.wait
        var filter = filter
        var relook: Duration? = nil
        while true {
            let ticket = filter.wait > .zero ? await signal.ticket(conninfo: pool.configuration.conninfo) : nil
            let page = try await read(filter)
            let remaining = deadline - .now
            guard page.changes.isEmpty, page.examined < Self.examined(filter.limit), let ticket, remaining > .zero else { return page }
            if page.next != filter.after {
                // Changes other than the wanted ones came: wait on from past them.
                filter.after = page.next
                relook = nil
            }
            // After a notification whose change an older running transaction
            // may still hide, look again soon, then less and less often.
            await signal.wait(after: ticket, timeout: min(remaining, relook ?? remaining))
            relook = relook.map { min($0 * 2, Self.longestRelook) } ?? Self.firstRelook
        }
    }

    /// How many changes of the order a read with this limit examines.
    static func examined(_ limit: Int) -> Int { max(limit, examinedPerRead) }

    func read(_ filter: Filter) async throws -> Page {
        let rows = try await ChangeFeedQueries.page(after: filter.after, subscriberID: filter.subscriberID, types: filter.types,
                                                    window: Self.examined(filter.limit), limit: filter.limit, on: share)
        var changes: [String] = []
        var lastKept: ChangeCursor?
        var lastExamined: ChangeCursor?
        var examined = 0
        for row in rows {
            examined = row.examined
            if row.isLast {
                lastExamined = row.cursor
            } else if let body = row.body {
                changes.append(body)
                lastKept = row.cursor
            }
        }
        // A full page ends at its last change (what follows it in the window
        // was not looked at for this page); otherwise past all examined.
        let next = (changes.count == filter.limit ? lastKept : lastExamined) ?? filter.after
        return Page(changes: changes, next: next, examined: examined)
    }
}
