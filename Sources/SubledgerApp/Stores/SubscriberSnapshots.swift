import EventStore
import Foundation
import Ledger
import Postgres

/// Subscribers' ledgers, folded from their streams.
enum SubscriberSnapshots {
    /// The ledgers of many subscribers, in one query; a subscriber without
    /// events is absent.
    static func ledgers(of subscriberIDs: [String], store: EventStore, on connection: Connection) async throws -> [String: SubscriberLedger] {
        var wanted = [String: Int64]()
        for subscriberID in subscriberIDs { wanted[SubscriberStreams.streamID(for: subscriberID)] = 0 }
        let streams = try await store.readStreams(wanted, on: connection)
        var ledgers = [String: SubscriberLedger]()
        for subscriberID in subscriberIDs {
            guard let stored = streams[SubscriberStreams.streamID(for: subscriberID)] else { continue }
            var ledger = SubscriberLedger(subscriberID: subscriberID)
            for event in stored { ledger.apply(try SubscriberStreams.ledgerEvent(event)) }
            ledgers[subscriberID] = ledger
        }
        return ledgers
    }
}
