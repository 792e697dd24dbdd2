import EventStore
import Foundation
import Hummingbird
import HummingbirdTesting
import JSON
import Ledger
import Postgres
@testable import SubledgerApp
import TestSupport
import Testing

/// A real `subledger serve` process, killed with SIGKILL while its
/// dispatcher has deliveries in flight: no change is lost, each arrives
/// (again) with the same id and body.
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
                ]
                process.standardOutput = FileHandle.nullDevice
                process.standardError = FileHandle.nullDevice
                try process.run()
                // Wait until the child has requests in flight, then kill it.
                let deadline = ContinuousClock.now + .seconds(60)
                while await receiver.arrived < 3 {
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
                let stored = try await fixture.changes()
                #expect(stored.count == 8 * 3, "purchased + gained for the pass, purchased for the coins: \(stored.count)")
                #expect(acceptedBeforeKill < stored.count, "deliveries were still to do when it died")
                try await fixture.pool.query("UPDATE webhook_deliveries SET next_attempt_at = now() WHERE status = 'pending'")
                try await fixture.dispatch(fixture.dispatcher()) { await receiver.acceptedIDs.count == stored.count }

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
            }
        }
    }
}
