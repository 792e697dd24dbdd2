import Foundation
import Hummingbird
import HummingbirdTesting
import Ledger
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
import TestSupport
import Testing

/// An erasure locks the audit table against audit batches only in its last
/// step (`AuditStore.erasureStep`): audit writes go on while the rest of it
/// runs (it may wait seconds for a webhook delivery under way), and still no
/// entry naming the erased id survives it.
@Suite("Erasure and audit writes", .timeLimit(.minutes(5)))
struct ErasureAuditLockTests {
    actor Flag {
        private(set) var isSet = false
        func set() { isSet = true }
    }

    @Test func auditWritesGoOnWhileAnErasureRunsAndNameItsSubscriberByThePseudonymAfter() async throws {
        try await withApp { client, dependencies in
            let id = "audited-" + UUID().uuidString.lowercased()
            let other = "other-" + UUID().uuidString.lowercased()
            for subscriber in [id, other] {
                #expect(try await client.post("/v1/subscribers/\(subscriber)/events", purchaseJSON("t-" + UUID().uuidString)).status == .created)
            }
            _ = try await dependencies.auditTrail.flush(to: dependencies.pool)

            // The erasure is held in its steps, its key and stream locks taken.
            let gate = Gate()
            var service = ErasureService(dependencies)
            service.steps = ErasureSteps([ErasureStep(name: "held") { _, _, _ in await gate.pass() }] + ErasureSteps.standard.steps)
            let erasing = service
            let erasure = Task {
                try await erasing.erase(id, request: ErasureRequest(reason: "audit"), by: ActorStamp(role: "admin", keyFingerprint: "t"))
            }
            let deadline = ContinuousClock.now + .seconds(30)
            while await gate.entered == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }

            // Audited reads meanwhile, of another subscriber and of the one being erased.
            #expect(try await client.get("/v1/subscribers/\(other)", key: Keys.support).status == .ok)
            #expect(try await client.get("/v1/subscribers/\(id)/history", key: Keys.support).status == .ok)
            let flushed = Flag()
            // Flushed until both entries are written (a request's entry is recorded after its answer).
            let flush = Task {
                var written = 0
                let until = ContinuousClock.now + .seconds(20)
                while written < 2, ContinuousClock.now < until {
                    written += try await dependencies.auditTrail.flush(to: dependencies.pool)
                    if written < 2 { try await Task.sleep(for: .milliseconds(20)) }
                }
                await flushed.set()
                return written
            }
            let waited = ContinuousClock.now + .seconds(20)
            while await !flushed.isSet, ContinuousClock.now < waited { try await Task.sleep(for: .milliseconds(10)) }
            #expect(await flushed.isSet, "an audit batch waited for the erasure")
            await gate.release()
            #expect(try await flush.value == 2)
            _ = try await erasure.value

            let plain = try await dependencies.pool.query("SELECT count(*) FROM audit_entries WHERE subscriber_id = \(id)")
            #expect(try plain.first!.decode(Int.self, at: 0) == 0, "the entry written during the erasure was moved")
            let moved = try await dependencies.pool.query(
                "SELECT count(*) FROM audit_entries WHERE subscriber_id = \(SubscriberPseudonyms.pseudonym(for: id)) AND action = 'history'")
            #expect(try moved.first!.decode(Int.self, at: 0) == 1)
        }
    }
}
