import EventStore
import Foundation
import Ledger
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
import TestSupport
import Testing

@Suite("Projection batches: round trips")
struct BatchRoundTripTests {
    /// A batch of events of `subscribers` subscribers (first events, then
    /// more for the same subscribers, with snapshots stored between): every
    /// batch of either projection costs the same two round trips, whether it
    /// touches 10 subscribers or 300.
    @Test(arguments: [10, 300])
    func aBatchCostsTwoRoundTripsWhateverItsSubscribers(subscribers: Int) async throws {
        let dependencies = try await makeDependencies()
        defer { Task { await dependencies.pool.close() } }
        let writer = LedgerWriter(dependencies)
        let catalog = dependencies.catalog.catalog
        let counter = StatementCounter()
        let projections: [any EventConsumer] = [
            CountingConsumer(inner: ReminderProjection(store: dependencies.store, catalog: catalog), counter: counter),
            CountingConsumer(inner: SubscriptionProjection(store: dependencies.store, catalog: catalog), counter: counter),
        ]
        let start = Date() - 10 * 86_400
        for round in 0..<2 {
            // The second round follows 70 renewals each, so its ledgers come from snapshots.
            let commands = (0..<subscribers).flatMap { index in
                let subscriber = "rt-\(index)"
                var commands = [WriteCommand.fact(.purchase(.init(
                    transactionID: "p\(round)-\(index)", productID: "com.example.pass.30d",
                    purchaseDate: start + Double(round * 3600 + index))), subscriberID: subscriber)]
                if round == 0 {
                    commands.append(.fact(.purchase(.init(transactionID: "m-\(index)", productID: "com.example.pro.monthly",
                                                          purchaseDate: start, expiresDate: start + 3600)), subscriberID: subscriber))
                    commands += (1...70).map { month in
                        .fact(.renewal(.init(transactionID: "m-\(index)-\(month)", originalTransactionID: "m-\(index)",
                                             productID: "com.example.pro.monthly", purchaseDate: start + Double(month) * 3600,
                                             expiresDate: start + Double(month + 1) * 3600)), subscriberID: subscriber)
                    }
                }
                return commands
            }
            for chunk in stride(from: 0, to: commands.count, by: 2000) {
                _ = try await writer.write(WriteBatch(Array(commands[chunk..<min(chunk + 2000, commands.count)]), refusals: .skip))
            }
            for projection in projections {
                try await dependencies.project(projection, batch: 100_000)
            }
        }
        await dependencies.ledgers.snapshotsSaved()  // stored off the write path
        let snapshots = try await dependencies.pool.query("SELECT count(*) FROM subscriber_snapshots").first?.decode(Int.self, at: 0)
        #expect(snapshots == subscribers)
        // Two rounds × two projections, each batch two round trips. (Usually one
        // batch each; a transaction of a test running beside this one can hold
        // the commit horizon back and split a round into more batches.)
        let trips = await counter.roundTrips
        #expect(trips.count >= 4 && trips.allSatisfy { $0 == 2 }, "round trips per batch: \(trips)")
        #expect(try await dependencies.pool.query("SELECT count(DISTINCT subscriber_id) FROM reminders").first?.decode(Int.self, at: 0)
            == subscribers)
    }
}
