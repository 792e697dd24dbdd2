import EventStore
import Foundation
import Hummingbird
import HummingbirdTesting
import JSON
import Ledger
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
import TestSupport
import Testing

/// A real `subledger serve` process, killed with SIGKILL while its
/// dispatcher has deliveries in flight (changes, and reminders to
/// `SUBLEDGER_WEBHOOK_URL`): no change is lost, each arrives (again) with the
/// same id and body, and each reminder is recorded sent once.
@Suite("Change feed crash", .timeLimit(.minutes(3)))
struct ChangeFeedCrashTests {
    static var executable: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".build/debug/subledger")
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: ChangeFeedCrashTests.executable.path),
                   "needs the built subledger executable (swift build --build-tests builds it)"))
    func aKilledServiceLosesNoDeliveryAndResendsWithTheSameIds() async throws {
        try await ChangeFixture.with { client, fixture in
            // Slow answers: deliveries are in flight when the process dies.
            let receiver = ChangeReceiver(delay: .milliseconds(1500))
            try await withChangeReceiver(receiver) { url in
                #expect(try await client.post("/v1/webhooks", #"{"url": "\#(url)"}"#, key: Keys.admin).status == .created)
                let start = Date() - 5 * 86_400
                for index in 0..<8 {
                    #expect(try await client.post("/v1/subscribers/k\(index)/events", purchaseJSON("k\(index)", at: RFC3339.format(start)))
                        .status == .created)
                    #expect(try await client.post("/v1/subscribers/k\(index)/events",
                                                  purchaseJSON("k\(index)c", product: "com.example.coins.100", at: RFC3339.format(start)))
                        .status == .created)
                }
                // Two subscribers with a reminder due (projected and made due
                // here; the service publishes and delivers them).
                for index in 0..<2 {
                    #expect(try await client.post("/v1/subscribers/r\(index)/events",
                                                  purchaseJSON("r\(index)", at: RFC3339.format(Date() - 25 * 86_400))).status == .created)
                }
                let reminders = ReminderProjection(store: fixture.dependencies.store, catalog: fixture.dependencies.catalog.catalog)
                while try await fixture.dependencies.store.lag(of: ReminderProjection.consumerName) > 0 {
                    if try await fixture.pool.withConnection({ try await fixture.dependencies.store.processBatch(reminders, limit: 500, on: $0) }) == 0 {
                        try await Task.sleep(for: .milliseconds(20))
                    }
                }
                try await fixture.pool.query("UPDATE reminders SET next_attempt_at = now() WHERE status = 'pending' AND lead = 'P1D' AND subscriber_id LIKE 'r%'")
                let dueReminders = try await fixture.pool.query("SELECT id FROM reminders WHERE status = 'pending' AND lead = 'P1D' AND subscriber_id LIKE 'r%'")
                    .map { try $0.decode(String.self, at: 0) }
                #expect(dueReminders.count == 2)

                let folder = FileManager.default.temporaryDirectory.appendingPathComponent("changes-crash-\(UUID().uuidString)")
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
                defer { try? FileManager.default.removeItem(at: folder) }
                let catalog = folder.appendingPathComponent("products.json")
                try Data(exampleCatalogJSON.utf8).write(to: catalog)
                let process = Process()
                process.executableURL = Self.executable
                process.arguments = ["serve"]
                process.currentDirectoryURL = Self.executable.deletingLastPathComponent()
                process.environment = [
                    "DATABASE_URL": fixture.pool.configuration.conninfo, "HOST": "127.0.0.1", "PORT": "0",
                    "SUBLEDGER_PRODUCTS": catalog.path, "SUBLEDGER_SQL_DIR": TestDatabase.sqlDirectory.path,
                    "SUBLEDGER_DATA_DIR": folder.path, "LOG_LEVEL": "error",
                    "SUBLEDGER_WEBHOOK_URL": url, "SUBLEDGER_WEBHOOK_SECRET": "whsec-crash", "SUBLEDGER_CHANGES_SWEEP_INTERVAL": "1",
                    // The receiver is on http://127.0.0.1.
                    "SUBLEDGER_WEBHOOK_ALLOW_PRIVATE": "true",
                ]
                process.standardOutput = FileHandle.nullDevice
                process.standardError = FileHandle.nullDevice
                try process.run()
                // Wait until the child has requests in flight, then kill it.
                let deadline = ContinuousClock.now + .seconds(60)
                while await receiver.inFlight(changes: 3, reminders: 1) == false {
                    guard ContinuousClock.now < deadline, process.isRunning else {
                        process.terminate()
                        Issue.record("the service delivered nothing in time")
                        return
                    }
                    try await Task.sleep(for: .milliseconds(20))
                }
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                #expect(process.terminationReason == .uncaughtSignal)
                let acceptedBeforeKill = await receiver.acceptedIDs.count

                // Whatever the consumer had not published yet, then every
                // delivery it leased: its lease's end brought forward.
                try await fixture.project()
                var sweeper = fixture.sweeper()
                sweeper.reminderWebhook = ReminderWebhook(url: url, secret: "whsec-crash")
                while try await sweeper.sweepOnce() > 0 {}
                let stored = try await fixture.changes()
                let expectedCount = 8 * 3 + 2 * 3
                #expect(stored.count == expectedCount,
                        "purchased + gained for each pass, purchased for the coins, the due reminders: \(stored.count)")
                let publishedReminders: [String] = stored.filter { $0.type == "renewal_reminder" }.map { $0.id }
                #expect(Set(publishedReminders) == Set(dueReminders))
                #expect(acceptedBeforeKill < stored.count, "deliveries were still to do when it died")
                try await fixture.pool.query("UPDATE webhook_deliveries SET next_attempt_at = now() WHERE status = 'pending'")
                // On two cores beside every other suite the receiver can take
                // longer than the fixture's 5 s to answer (four such timeouts
                // in one CI run), and each timeout is a retry with backoff:
                // the redelivery is what is tested here, not the timeout.
                var dispatcher = fixture.dispatcher()
                dispatcher.settings.requestTimeout = .seconds(90)
                dispatcher.settings.lease = .seconds(180)
                try await fixture.dispatch(dispatcher) {
                    let pending = try await fixture.pendingDeliveries()
                    let accepted = await receiver.acceptedIDs.count
                    return accepted == stored.count && pending == 0
                }

                let requests = await receiver.requests
                #expect(await receiver.acceptedIDs == Set(stored.map(\.id)), "every change arrived")
                let bodies = Dictionary(stored.map { ($0.id, $0.body) }, uniquingKeysWith: { first, _ in first })
                for request in requests {
                    let sent = try #require(JSONSerialization.jsonObject(with: request.body) as? NSDictionary)
                    let expected = try #require(JSONSerialization.jsonObject(with: Data(bodies[request.id]!.utf8)) as? NSDictionary)
                    #expect(sent == expected, "a resent change is the same change")
                }
                for index in 0..<8 {
                    let accepted = requests.filter { $0.subscriberID == "k\(index)" && $0.status == 200 }.map(\.sequence)
                    #expect(accepted == accepted.sorted(), "in order per subscriber: \(accepted)")
                }
                #expect(try await fixture.pendingDeliveries() == 0)
                // Each reminder sent once in its history, whatever was resent.
                for id in dueReminders {
                    let status = try await fixture.pool.query("SELECT status FROM reminders WHERE id = \(id)").first?.decode(String.self, at: 0)
                    #expect(status == "sent")
                }
                let sentEvents = try await fixture.pool.query("SELECT count(*) FROM events WHERE type = 'reminder_sent'").first!.decode(Int.self, at: 0)
                #expect(sentEvents == dueReminders.count, "one reminder_sent per reminder")
                for id in dueReminders {
                    let signed = requests.filter { request in
                        request.id == id && request.status == 200
                            && WebhookSignature.isValid(header: request.signature ?? "", body: request.body, secret: "whsec-crash")
                    }
                    #expect(!signed.isEmpty, "\(id) accepted from the reminder webhook, signed with SUBLEDGER_WEBHOOK_SECRET")
                }
            }
        }
    }
}
