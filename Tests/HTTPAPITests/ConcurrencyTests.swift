import EventStore
import Foundation
import Hummingbird
import HummingbirdTesting
import JSON
import Ledger
import HTTPAPI
import SubledgerApp
import SubledgerAppTesting
import Testing

/// Concurrent requests on the real database: the retries inside the server
/// serialise them, so none is lost or applied twice.
@Suite("Concurrent writes")
struct ConcurrencyTests {
    @Test func fortyConcurrentPassPurchasesStackIntoFortyContiguousPeriods() async throws {
        try await withApp { client, _ in
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for index in 1...40 {
                    group.addTask {
                        try await client.post("/v1/subscribers/stacker/events", purchaseJSON("pass-\(index)")).status
                    }
                }
                return try await group.reduce(into: [HTTPResponse.Status]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == .created }.count == 40, "statuses: \(statuses)")

            let state = try await client.get("/v1/subscribers/stacker")
            let periods = state.json["nonRenewingPeriods"]?.array ?? []
            #expect(periods.count == 40)
            let spans = periods.compactMap { period -> (Date, Date)? in
                guard let start = period["start"]?.string.flatMap(RFC3339.parse),
                      let end = period["end"]?.string.flatMap(RFC3339.parse) else { return nil }
                return (start, end)
            }.sorted { $0.0 < $1.0 }
            #expect(spans.first?.0 == date("2025-01-01T00:00:00Z"))
            for (previous, next) in zip(spans, spans.dropFirst()) {
                #expect(next.0 == previous.1, "a gap or overlap between periods")
            }
            for span in spans { #expect(span.1.timeIntervalSince(span.0) == 30 * 86_400) }
            #expect(spans.last?.1 == date("2025-01-01T00:00:00Z").addingTimeInterval(40 * 30 * 86_400))
            let history = try await client.get("/v1/subscribers/stacker/history")
            #expect(history.json["events"]?.array.count == 40)
        }
    }

    @Test func twentyConcurrentCopiesOfOneFactGiveOneCreatedAndNineteenDuplicates() async throws {
        try await withApp { client, _ in
            let answers = try await withThrowingTaskGroup(of: (HTTPResponse.Status, Int64?, Bool?).self) { group in
                for _ in 1...20 {
                    group.addTask {
                        let response = try await client.post("/v1/subscribers/copier/events", purchaseJSON("same-1", device: "phone"))
                        return (response.status, response.json["position"]?.int, response.json["duplicate"]?.bool)
                    }
                }
                return try await group.reduce(into: [(HTTPResponse.Status, Int64?, Bool?)]()) { $0.append($1) }
            }
            #expect(answers.filter { $0.0 == .created }.count == 1)
            #expect(answers.filter { $0.0 == .ok }.count == 19)
            #expect(answers.filter { $0.0 == .ok }.allSatisfy { $0.2 == true })
            #expect(Set(answers.map(\.1)).count == 1, "every answer names the one stored position")
            let history = try await client.get("/v1/subscribers/copier/history")
            #expect(history.json["events"]?.array.count == 1)
        }
    }

    @Test func aTransferOnRestoreShowsInBothHistories() async throws {
        try await withApp { client, _ in
            #expect(try await client.post("/v1/subscribers/alice/events", purchaseJSON("L1", product: "com.example.level2")).status == .created)
            let restore = #"{"deviceId": "bobs-phone", "transactions": [{"transactionId": "L1", "productId": "com.example.level2", "purchaseDate": "2025-01-01T00:00:00Z"}]}"#
            let restored = try await client.post("/v1/subscribers/bob/restore", restore)
            #expect(restored.status == .ok)
            #expect(restored.json["entitlements"]?.array.first { $0["id"]?.string == "level2" }?["active"]?.bool == true)

            let alice = try await client.get("/v1/subscribers/alice/history").json["events"]?.array ?? []
            let bob = try await client.get("/v1/subscribers/bob/history").json["events"]?.array ?? []
            #expect(alice.map { $0["type"]?.string } == ["purchased", "transferred_out"])
            let bobTypes = bob.compactMap { $0["type"]?.string }
            #expect(bobTypes.contains("transferred_in"))
            #expect(alice.last?["data"]?["toSubscriberId"]?.string == "bob")
            let aliceState = try await client.get("/v1/subscribers/alice")
            #expect(aliceState.json["entitlements"]?.array.first { $0["id"]?.string == "level2" }?["active"]?.bool != true)
            let owner = try await client.get("/v1/transactions/L1", key: Keys.support)
            #expect(owner.json["subscriberId"]?.string == "bob")
            #expect(Set(owner.json["facts"]?.array.compactMap { $0["subscriberId"]?.string } ?? []) == ["alice", "bob"])

            // Restoring again on bob's side is a no-op; alice restoring takes it back.
            _ = try await client.post("/v1/subscribers/bob/restore", restore)
            #expect(try await client.get("/v1/subscribers/bob/history").json["events"]?.array.count == bob.count)
            _ = try await client.post("/v1/subscribers/alice/restore", restore)
            #expect(try await client.get("/v1/transactions/L1", key: Keys.support).json["subscriberId"]?.string == "alice")
        }
    }

    @Test func concurrentRestoresOfOneOriginalLeaveOneOwnerAndMatchingTransfers() async throws {
        try await withApp { client, dependencies in
            #expect(try await client.post("/v1/subscribers/owner/events", purchaseJSON("L9", product: "com.example.level2")).status == .created)
            let restore = #"{"transactions": [{"transactionId": "L9", "productId": "com.example.level2", "purchaseDate": "2025-01-01T00:00:00Z"}]}"#
            let subscribers = (1...8).map { "claimer-\($0)" }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for subscriber in subscribers {
                    group.addTask {
                        let response = try await client.post("/v1/subscribers/\(subscriber)/restore", restore)
                        #expect(response.status == .ok)
                    }
                }
                try await group.waitForAll()
            }
            let owner = try #require(try await client.get("/v1/transactions/L9", key: Keys.support).json["subscriberId"]?.string)
            #expect(subscribers.contains(owner))
            // Every transfer out has its transfer in, and the chain ends at the owner.
            var outs = 0, ins = 0
            for subscriber in ["owner"] + subscribers {
                let events = try await client.get("/v1/subscribers/\(subscriber)/history").json["events"]?.array ?? []
                outs += events.filter { $0["type"]?.string == "transferred_out" }.count
                ins += events.filter { $0["type"]?.string == "transferred_in" }.count
                let active = try await client.get("/v1/subscribers/\(subscriber)").json["entitlements"]?.array
                    .first { $0["id"]?.string == "level2" }?["active"]?.bool ?? false
                #expect(active == (subscriber == owner), "\(subscriber) active: \(active), owner: \(owner)")
            }
            #expect(outs == ins)
            #expect(ins == subscribers.count)
            let rows = try await dependencies.pool.query("SELECT count(*) FROM transaction_owners WHERE original_transaction_id = 'L9'")
            #expect(try rows.first?.decode(Int.self, at: 0) == 1)
        }
    }
}
