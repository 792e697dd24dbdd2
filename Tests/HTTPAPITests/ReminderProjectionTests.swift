import EventStore
import Foundation
import JSON
import Ledger
import Logging
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
@testable import HTTPAPI
import TestSupport
import Testing

@Suite("Reminder projection")
struct ReminderProjectionTests {
    @Test func aPurchaseThatExtendsCoverageCancelsAndReschedulesPendingReminders() async throws {
        try await ReminderFixture.with { fixture in
            let now = Date()
            try await fixture.append("alice", [ReminderFixture.pass("t1", at: now - 86_400)])
            try await fixture.project()
            let firstEnd = now - 86_400 + 30 * 86_400
            #expect(try await fixture.rows() == [
                .init(lead: "P7D", status: .pending, expiresAt: firstEnd),
                .init(lead: "P1D", status: .pending, expiresAt: firstEnd),
                .init(lead: "P0D", status: .pending, expiresAt: firstEnd),
            ])

            try await fixture.append("alice", [ReminderFixture.pass("t2", at: now)])
            try await fixture.project()
            let secondEnd = firstEnd + 30 * 86_400
            #expect(try await fixture.rows() == [
                .init(lead: "P7D", status: .cancelled, expiresAt: firstEnd),
                .init(lead: "P1D", status: .cancelled, expiresAt: firstEnd),
                .init(lead: "P0D", status: .cancelled, expiresAt: firstEnd),
                .init(lead: "P7D", status: .pending, expiresAt: secondEnd),
                .init(lead: "P1D", status: .pending, expiresAt: secondEnd),
                .init(lead: "P0D", status: .pending, expiresAt: secondEnd),
            ])

            // A refund of the second period brings back the first end: its
            // reminders are pending again, the second end's cancelled.
            try await fixture.append("alice", [.refunded(RefundFact(
                transactionID: "t2", originalTransactionID: "t2", productID: ReminderFixture.passProduct, revocationDate: now))])
            try await fixture.project()
            let statuses = try await fixture.rows().map { "\($0.lead)@\(abs($0.expiresAt.timeIntervalSince(firstEnd)) < 0.002 ? 1 : 2):\($0.status.rawValue)" }
            #expect(statuses == ["P7D@1:pending", "P1D@1:pending", "P0D@1:pending",
                                 "P7D@2:cancelled", "P1D@2:cancelled", "P0D@2:cancelled"])
        }
    }

    @Test func aLeadAlreadyPastWhenScheduledIsSkipped() async throws {
        try await ReminderFixture.with { fixture in
            let now = Date()
            // Coverage ends in 5 days: the 7-day reminder was due 2 days ago.
            try await fixture.append("bob", [ReminderFixture.pass("b1", at: now - 25 * 86_400)])
            try await fixture.project()
            #expect(try await fixture.rows().map { "\($0.lead):\($0.status.rawValue)" } == ["P7D:skipped", "P1D:pending", "P0D:pending"])
        }
    }

    @Test func autoRenewTurnedOffSchedulesThePromptAndTurnedBackOnCancelsIt() async throws {
        try await ReminderFixture.with { fixture in
            let now = Date()
            let expires = now + 10 * 86_400
            try await fixture.append("carol", [ReminderFixture.monthly("o1", at: now - 20 * 86_400, expires: expires)])
            try await fixture.project()
            #expect(try await fixture.rows().isEmpty, "auto-renew on: the store renews, nothing to remind")

            try await fixture.append("carol", [ReminderFixture.autoRenew("o1", false, at: now - 2)])
            try await fixture.project()
            #expect(try await fixture.rows() == [
                .init(lead: "P3D", status: .pending, expiresAt: expires, type: .renewalReminder),
                .init(lead: "P0D", status: .pending, expiresAt: expires, type: .expiryPrompt),
            ])

            try await fixture.append("carol", [ReminderFixture.autoRenew("o1", true, at: now - 1)])
            try await fixture.project()
            #expect(try await fixture.rows().map(\.status) == [.cancelled, .cancelled])

            // Off again: the same reminders (same ids) are pending again.
            try await fixture.append("carol", [ReminderFixture.autoRenew("o1", false, at: now)])
            try await fixture.project()
            #expect(try await fixture.rows().map(\.status) == [.pending, .pending])
        }
    }

    /// Random histories applied live in uneven batches (and partly while
    /// being appended), then rebuilt in one go: the same rows.
    @Test func aRebuiltProjectionEqualsTheLiveOne() async throws {
        try await ReminderFixture.with { fixture in
            var generator = SplitMix64(seed: 20261122)
            let now = Date()
            var sequence = 0
            for round in 0..<60 {
                let subscriber = "s\(Int.random(in: 0..<12, using: &generator))"
                sequence += 1
                let event: LedgerEvent
                switch Int.random(in: 0..<6, using: &generator) {
                case 0, 1:
                    event = ReminderFixture.pass("p\(sequence)", at: now - Double(Int.random(in: 0..<40, using: &generator)) * 86_400)
                case 2:
                    event = .refunded(RefundFact(transactionID: "p\(max(1, sequence - Int.random(in: 1...6, using: &generator)))",
                                                 originalTransactionID: "x", productID: ReminderFixture.passProduct, revocationDate: now))
                case 3:
                    event = ReminderFixture.monthly("m\(subscriber)", at: now - 20 * 86_400, expires: now + Double(round) * 3600, transactionID: "m\(sequence)")
                default:
                    event = ReminderFixture.autoRenew("m\(subscriber)", Bool.random(using: &generator), at: now - Double(100 - round))
                }
                try await fixture.append(subscriber, [event])
                if Int.random(in: 0..<4, using: &generator) == 0 { try await fixture.project(batch: Int.random(in: 1...5, using: &generator)) }
            }
            try await fixture.project(batch: 3)
            // A delivered and a failed reminder keep their status through the rebuild.
            let pending = try await fixture.dependencies.pool.query("SELECT id, subscriber_id FROM reminders WHERE status = 'pending' ORDER BY id LIMIT 2")
            for (index, row) in pending.enumerated() {
                let id = try row.decode(String.self, at: 0)
                let subscriber = try row.decode(String.self, at: 1)
                let delivery = ReminderDelivery(reminderID: id, type: .renewalReminder, group: "pass", productID: ReminderFixture.passProduct,
                                                expiresAt: now, lead: .zero, dueAt: now, date: now, attempt: 3, error: index == 1 ? "HTTP 500" : nil)
                try await fixture.append(subscriber, [index == 0 ? .reminderSent(delivery) : .reminderFailed(delivery)])
            }
            try await fixture.project()
            let live = try await fixture.snapshot()
            #expect(live.count > 10)
            #expect(live.contains { $0.hasSuffix("|sent") } && live.contains { $0.hasSuffix("|failed") })
            #expect(live.contains { $0.hasSuffix("|cancelled") } && live.contains { $0.hasSuffix("|skipped") })

            let replayed = try await fixture.dependencies.store.rebuild(fixture.projection, batchSize: 7)
            #expect(replayed == 62)
            #expect(try await fixture.snapshot() == live)
            // Stream by stream into shadow tables, swapped in: the same rows.
            let folded = try await fixture.dependencies.store.rebuildStreamwise(fixture.projection, chunkSize: 5)
            #expect(folded >= 62)
            #expect(try await fixture.snapshot() == live)
        }
    }

    /// The dispatcher's lease and retry count are not in the events: a rebuild
    /// must keep them, or a reminder being delivered could be claimed and sent
    /// again by another dispatcher.
    @Test(arguments: [false, true])
    func aRebuildKeepsTheDispatchersLeaseAndAttempts(streamwise: Bool) async throws {
        try await ReminderFixture.with { fixture in
            let now = Date()
            try await fixture.append("alice", [ReminderFixture.pass("t1", at: now - 10 * 86_400)])
            try await fixture.project()
            let pool = fixture.dependencies.pool
            let id = try #require(try await pool.query(
                "SELECT id FROM reminders WHERE status = 'pending' ORDER BY due_at LIMIT 1").first?.decode(String.self, at: 0))
            let token = UUID()
            try await pool.query("""
                UPDATE reminders SET attempts = 3, claim_token = \(token), next_attempt_at = now() + interval '1 hour',
                                     last_error = 'HTTP 500'
                WHERE id = \(id)
                """)
            let before = try await pool.query(
                "SELECT attempts, claim_token::text, next_attempt_at, last_error FROM reminders WHERE id = \(id)").first?.values
            if streamwise {
                try await fixture.dependencies.store.rebuildStreamwise(fixture.projection, chunkSize: 2)
            } else {
                try await fixture.dependencies.store.rebuild(fixture.projection, batchSize: 2)
            }
            let after = try await pool.query(
                "SELECT attempts, claim_token::text, next_attempt_at, last_error FROM reminders WHERE id = \(id)").first?.values
            #expect(before != nil && after == before)
        }
    }

    @Test func theScheduleIsAPureFunctionOfTheSequence() {
        let end = Date(timeIntervalSince1970: 1_800_000_000)
        func desired(_ lead: ISODuration, _ end: Date) -> DesiredReminder {
            DesiredReminder(id: Coverage.reminderID(subscriberID: "s", group: "g", end: end, lead: lead), type: lead.isZero ? .expiryPrompt : .renewalReminder,
                            subscriberID: "s", group: "g", productID: "p", expiresAt: end, lead: lead, dueAt: lead.subtracted(from: end))
        }
        var schedule = ReminderSchedule([])
        let week = ISODuration(days: 7)
        schedule.schedule([desired(week, end), desired(.zero, end)], now: end - 3 * 86_400)
        #expect(schedule.reminders.values.map(\.status).sorted { $0.rawValue < $1.rawValue } == [.pending, .skipped])
        schedule.markSent(desired(.zero, end).id)
        schedule.schedule([], now: end - 86_400)
        #expect(schedule.reminders[desired(.zero, end).id]?.status == .sent, "sent stays sent")
        #expect(schedule.reminders[desired(week, end).id]?.status == .skipped, "skipped is not cancelled")
    }
}


/// A fresh database with the reminder projection, and helpers to append facts
/// and look at the rows.
struct ReminderFixture: Sendable {
    static let passProduct = "com.example.pass.30d"
    static let monthlyProduct = "com.example.pro.monthly"
    static let catalogJSON = """
        { "version": 1, "products": [
            {"id": "com.example.pro.monthly", "type": "auto-renewable", "group": "pro", "entitlements": ["pro"], "reminders": ["P3D", "P0D"]},
            {"id": "com.example.pass.30d", "type": "non-renewing", "duration": "P30D", "group": "pass", "entitlements": ["pro"], "reminders": ["P7D", "P1D", "P0D"]}
        ] }
        """

    let dependencies: AppDependencies
    let conninfo: String
    let projection: ReminderProjection

    static func with(webhookURL: String? = nil, _ body: (ReminderFixture) async throws -> Void) async throws {
        let conninfo = try await TestDatabase.make()
        var configuration = SubledgerConfiguration()
        configuration.apiKeys = APIKeys([(.ingest, Keys.ingest), (.support, Keys.support), (.admin, Keys.admin)])
        configuration.webhookURL = webhookURL
        configuration.webhookSecret = "whsec-test"
        let logger = Logger(label: "reminder-tests")
        let pool = ConnectionPool(configuration: PoolConfiguration(conninfo: conninfo, maximumConnections: 12, leaseTimeout: .seconds(30)),
                                  logger: logger)
        let data = Data(catalogJSON.utf8)
        let catalog = CatalogSource(catalog: try Catalog.decode(from: data), modified: Date(), raw: data)
        let dependencies = AppDependencies(configuration: configuration, pool: pool, catalog: catalog,
                                           consumers: Projections.reportedByHealth, logger: logger)
        let fixture = ReminderFixture(dependencies: dependencies, conninfo: conninfo,
                                      projection: ReminderProjection(store: dependencies.store, catalog: catalog.catalog))
        do {
            try await body(fixture)
            await pool.close()
        } catch {
            await pool.close()
            throw error
        }
    }

    static func pass(_ transactionID: String, at purchaseDate: Date) -> LedgerEvent {
        .purchased(TransactionFact(transactionID: transactionID, originalTransactionID: transactionID, productID: passProduct,
                                   productType: .nonRenewing, group: "pass", duration: ISODuration(days: 30), purchaseDate: purchaseDate))
    }

    static func monthly(_ original: String, at purchaseDate: Date, expires: Date, transactionID: String? = nil) -> LedgerEvent {
        .purchased(TransactionFact(transactionID: transactionID ?? original, originalTransactionID: original, productID: monthlyProduct,
                                   productType: .autoRenewable, group: "pro", purchaseDate: purchaseDate, expiresDate: expires,
                                   autoRenew: true))
    }

    static func autoRenew(_ original: String, _ on: Bool, at date: Date) -> LedgerEvent {
        .autoRenewChanged(AutoRenewChange(originalTransactionID: original, productID: monthlyProduct, autoRenew: on, effectiveDate: date))
    }

    func append(_ subscriberID: String, _ events: [LedgerEvent]) async throws {
        let key = try await dependencies.pool.withConnection { try await SubscriberKeys.key(for: subscriberID, on: $0) }
        _ = try await dependencies.store.append(
            to: SubscriberStreams.streamID(for: subscriberID),
            events: try SubscriberStreams.newEvents(events, subscriberID: subscriberID, key: key, source: FactSource.api))
    }

    /// Runs the projection until it has read everything appended.
    func project(batch: Int = 100) async throws {
        try await dependencies.project(projection, batch: batch)
    }

    struct Row: Equatable, CustomStringConvertible {
        var lead: String
        var status: ReminderStatus
        var expiresAt: Date
        var type: ReminderType? = nil

        static func == (lhs: Row, rhs: Row) -> Bool {
            lhs.lead == rhs.lead && lhs.status == rhs.status && abs(lhs.expiresAt.timeIntervalSince(rhs.expiresAt)) < 0.002
                && (lhs.type == nil || rhs.type == nil || lhs.type == rhs.type)
        }

        var description: String { "\(lead) \(status.rawValue) \(RFC3339.format(expiresAt)) \(type?.rawValue ?? "")" }
    }

    /// Every reminder, by end then due time.
    func rows() async throws -> [Row] {
        try await dependencies.pool.query("SELECT lead, status, expires_at, type FROM reminders ORDER BY expires_at, due_at").map {
            Row(lead: try $0.decode(String.self, at: 0), status: ReminderStatus(rawValue: try $0.decode(String.self, at: 1))!,
                expiresAt: try $0.decode(Date.self, at: 2), type: ReminderType(rawValue: try $0.decode(String.self, at: 3)))
        }
    }

    /// The projection's columns (not the delivery bookkeeping), comparable.
    func snapshot() async throws -> [String] {
        let reminders = try await dependencies.pool.query("""
            SELECT concat_ws('|', id, subscriber_id, "group", product_id, type, lead, expires_at, due_at, status)
            FROM reminders ORDER BY id
            """).map { try $0.decode(String.self, at: 0) }
        let subscribers = try await dependencies.pool.query("""
            SELECT concat_ws('|', subscriber_id, stream_version, clock, coalesce(next_expiry_at::text, '-'))
            FROM reminder_subscribers ORDER BY subscriber_id
            """).map { try $0.decode(String.self, at: 0) }
        return reminders + subscribers
    }
}
