import EventStore
import Foundation
import Ledger
import Postgres
import SubledgerApp
import TestSupport

/// Random facts for a few subscribers, written through the one write path
/// (so the decider's rules hold), spread over 2025.
public struct RandomHistory {
    public var random: SplitMix64
    public var clock = date("2025-01-01T00:00:00Z")
    public var nextID = 1
    public var known: [(id: String, original: String, product: String, at: Date, expires: Date?, environment: Environment)] = []
    public let subscribers: [String]

    public init(seed: UInt64, subscribers: Int = 6) {
        random = SplitMix64(seed: seed)
        self.subscribers = (0..<subscribers).map { "rm\($0)" }
    }

    public mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }
    public mutating func chance(_ percent: Int) -> Bool { int(1...100) <= percent }
    public mutating func days(_ range: ClosedRange<Int>) -> TimeInterval { TimeInterval(int(range.lowerBound * 86_400...range.upperBound * 86_400)) }

    public mutating func newID() -> String {
        defer { nextID += 1 }
        return "t\(nextID)"
    }

    /// The next command (its subscriber and what it says).
    public mutating func next() -> WriteCommand {
        clock += days(0...3)
        let subscriber = subscribers[int(0...subscribers.count - 1)]
        let environment: Environment = chance(15) ? .sandbox : .production
        let at = clock - days(0...2)
        let request: WriteCommand.Request
        switch int(1...100) {
        case 1...30:
            let id = newID()
            let product = [Product.pass, Product.pass, Product.level2, Product.coins][int(0...3)]
            request = .fact(.purchase(.init(transactionID: id, productID: product, purchaseDate: at, environment: environment)))
            known.append((id, id, product, at, nil, environment))
        case 31...45:
            let id = newID()
            let expires = at + days(1...40)
            request = .fact(.purchase(.init(transactionID: id, productID: Product.monthly, purchaseDate: at, expiresDate: expires,
                                            autoRenew: chance(30) ? chance(50) : nil, environment: environment)))
            known.append((id, id, Product.monthly, at, expires, environment))
        case 46...60:
            guard let renewed = known.filter({ $0.expires != nil }).randomElement(using: &random) else { return next() }
            let id = newID()
            let start = max(at, renewed.at)
            let expires = start + days(1...40)
            request = .fact(.renewal(.init(transactionID: id, originalTransactionID: renewed.original, productID: Product.monthly,
                                           purchaseDate: start, expiresDate: expires, environment: renewed.environment)))
            known.append((id, renewed.original, Product.monthly, start, expires, renewed.environment))
        case 61...70:
            guard let refunded = known.randomElement(using: &random) else { return next() }
            request = .fact(.refund(.init(transactionID: refunded.id, revocationDate: max(refunded.at, clock - days(0...20)),
                                          environment: refunded.environment)))
        case 71...74:
            guard let reversed = known.randomElement(using: &random) else { return next() }
            request = .fact(.refundReversal(.init(transactionID: reversed.id, effectiveDate: clock, environment: reversed.environment)))
        case 75...82:
            guard let restored = known.randomElement(using: &random) else { return next() }
            request = .restore(RestoreRequest(deviceID: "d\(int(1...3))", transactions: [.init(
                transactionID: restored.id, originalTransactionID: restored.original, productID: restored.product,
                purchaseDate: restored.at, expiresDate: restored.expires, environment: restored.environment)]))
        default:
            guard let subscription = known.filter({ $0.expires != nil }).randomElement(using: &random) else { return next() }
            let original = subscription.original
            switch int(1...3) {
            case 1:
                request = .fact(.autoRenewChange(.init(originalTransactionID: original, autoRenew: chance(50), effectiveDate: clock,
                                                       environment: subscription.environment)))
            case 2:
                request = .fact(.billingIssue(.init(originalTransactionID: original,
                                                    gracePeriodExpiresDate: chance(70) ? clock + days(1...16) : nil,
                                                    effectiveDate: clock, environment: subscription.environment)))
            default:
                request = .fact(.expiry(.init(.subscription(originalTransactionID: original, end: nil),
                                              environment: subscription.environment)))
            }
        }
        return WriteCommand(subscriberID: subscriber, request: request)
    }

    public enum Product {
        public static let monthly = "com.example.pro.monthly"
        public static let pass = "com.example.pass.30d"
        public static let coins = "com.example.coins.100"
        public static let level2 = "com.example.level2"
    }
}

extension LedgerWriter {
    /// Writes `count` batches of `history`'s next facts, each of a size drawn
    /// from `sizes`, skipping what the rules refuse.
    public func writeRandomBatches(_ count: Int, of sizes: ClosedRange<Int>, from history: inout RandomHistory) async throws {
        for _ in 0..<count {
            _ = try await write(WriteBatch((0..<history.int(sizes)).map { _ in history.next() }, refusals: .skip))
        }
    }

    /// Writes `batches` one after another, `pause` apart, in a task of
    /// their own: writes going on while a test does something else.
    public func writeInBackground(_ batches: [[WriteCommand]], pause: Duration) -> Task<Void, any Error> {
        Task {
            for batch in batches {
                _ = try await write(WriteBatch(batch, refusals: .skip))
                try await Task.sleep(for: pause)
            }
        }
    }
}

extension AppDependencies {
    /// Live runners in a task of their own until it is cancelled: batches of
    /// at most `limit` events for each consumer in turn, `pause` apart.
    public func runInBackground(_ consumers: [any EventConsumer], limit: Int, pause: Duration) -> Task<Void, Never> {
        Task {
            while !Task.isCancelled {
                for consumer in consumers {
                    _ = try? await pool.withConnection { try await store.processBatch(consumer, limit: limit, on: $0) }
                }
                try? await Task.sleep(for: pause)
            }
        }
    }

    /// Runs `consumer` until it has handled everything appended, in batches
    /// of `batch`; gives up after 90 s without progress. The events wait
    /// below the cluster's oldest running transaction (the commit horizon),
    /// which another suite's transaction can hold for a while on a loaded
    /// machine; a long projection that progresses is not cut short by it,
    /// and the error names the transactions that held the horizon.
    public func project(_ consumer: some EventConsumer, batch: Int = 100) async throws {
        let patience = Duration.seconds(90)
        var deadline = ContinuousClock.now + patience
        while try await store.lag(of: consumer.name) > 0 {
            let handled = try await pool.withConnection { try await store.processBatch(consumer, limit: batch, on: $0) }
            if handled == 0 {
                guard ContinuousClock.now < deadline else {
                    throw ProjectionTimeout(holders: try await oldestRunningTransactions())
                }
                try await Task.sleep(for: .milliseconds(20))
            } else {
                deadline = ContinuousClock.now + patience
            }
        }
    }

    /// The cluster's oldest transactions that hold an id (the commit
    /// horizon's lower edge), with how long each has run and its statement.
    public func oldestRunningTransactions() async throws -> [String] {
        try await pool.query("""
            SELECT concat_ws(' | ', datname, state, round(extract(epoch FROM now() - xact_start))::text || ' s', left(query, 160))
            FROM pg_stat_activity WHERE backend_xid IS NOT NULL
            ORDER BY age(backend_xid) DESC LIMIT 3
            """).map { try $0.decode(String.self, at: 0) }
    }

    /// Every row of the read models, as comparable text.
    public func readModelRows() async throws -> [String] {
        var rows: [String] = []
        for (table, columns) in [
            ("subscriptions", #"environment, subscriber_id, "group", series, product_id, type, original_transaction_id, latest_transaction_id, starts_at, expires_at, grace_ends_at, revoked_at, auto_renew, entitlements"#),
            ("non_renewing_periods", #"environment, subscriber_id, transaction_id, "group", product_id, original_transaction_id, starts_at, ends_at"#),
            ("entitlements", "environment, subscriber_id, entitlement, starts_at, ends_at, product_id, source_transaction_id"),
            ("product_activity", #"environment, subscriber_id, product_id, starts_at, ends_at, type, "group", source_transaction_id"#),
        ] {
            let text = columns.split(separator: ",").map { "coalesce((\($0.trimmingCharacters(in: .whitespaces)))::text, '-')" }
                .joined(separator: ", ")
            rows += try await pool.query("SELECT \(unsafeRaw: "'\(table)'"), concat_ws('|', \(unsafeRaw: text)) FROM \(unsafeRaw: table) ORDER BY 2")
                .map { "\(try $0.decode(String.self, at: 0)): \(try $0.decode(String.self, at: 1))" }
        }
        return rows
    }

    /// A subscriber's ledger folded from their whole stream.
    public func ledger(of subscriberID: String) async throws -> SubscriberLedger {
        let stored = try await store.readStream(SubscriberStreams.streamID(for: subscriberID))
        return SubscriberLedger(subscriberID: subscriberID, events: try stored.map(SubscriberStreams.ledgerEvent))
    }
}

/// A projection did not catch up with the log in the time a test allows;
/// `holders` are the oldest transactions running in the cluster then.
public struct ProjectionTimeout: Error, CustomStringConvertible {
    public var holders: [String]
    public init(holders: [String] = []) { self.holders = holders }
    public var description: String {
        "ProjectionTimeout: no progress; oldest running transactions: " + (holders.isEmpty ? "none" : holders.joined(separator: "; "))
    }
}
