import EventStore
import Foundation
import Ledger
import Logging
import Postgres

/// Turns the event log into the change feed: for each new event of a
/// subscriber, its change (bookkeeping types aside, see
/// `ChangeFold.bookkeepingTypes`) and the entitlement transitions it caused,
/// with the transitions time brought since the last one first. Event types
/// are passed through by name, so a type this build does not know is
/// published like any other.
///
/// Runs on the consumer machinery (one leader across instances, checkpointed):
/// the changes, their deliveries and the progress rows commit with the
/// checkpoint. Not a projection: it is never rebuilt, and a replayed batch
/// publishes nothing again (events at or below a subscriber's stored
/// progress only rebuild the ledger in memory), so a change keeps its id and
/// sequence forever.
public struct ChangeFeedConsumer: EventConsumer {
    public static let consumerName = "changes"
    public var name: String { Self.consumerName }
    let catalog: Catalog

    public init(catalog: Catalog) {
        self.catalog = catalog
    }

    public func handle(_ events: [RecordedEvent], on connection: Connection) async throws {
        // An erased subscriber publishes nothing more: no key resolves its
        // stream, and its published changes are under its pseudonym.
        let resolved = try await SubscriberStreams.subscribers(of: events, on: connection)
        var through: [String: Int64] = [:]
        var order: [String] = []
        var raw: [Int64: RecordedEvent] = [:]
        for event in events {
            guard let pseudonym = SubscriberStreams.pseudonym(ofStream: event.streamID),
                  let subscriberID = resolved[pseudonym] else { continue }
            if through[subscriberID] == nil { order.append(subscriberID) }
            through[subscriberID] = max(through[subscriberID] ?? 0, event.streamVersion)
            raw[event.position] = event
        }
        guard !order.isEmpty else { return }
        let progress = try await ChangeRows.lockProgress(of: order.sorted(), on: connection)
        let read = try await connection.query(
            try SubscriberSnapshots.replayQuery(order.map { ($0, through[$0]!) }, progressTable: "change_subscribers"))
        let replays = try await SubscriberSnapshots.replays(read, through: through, on: connection)
        var folds: [ChangeFold] = []
        for subscriberID in order {
            guard let replay = replays[subscriberID] else { continue }
            var fold = ChangeFold(ledger: replay.ledger, progress: progress[subscriberID], catalog: catalog)
            // A transfer's other party by its id (its pseudonym once erased).
            let resolved = try await SubscriberStreams.resolvingCounterparts(replay.events.map(\.event), on: connection)
            for ((version, _), event) in zip(replay.events, resolved) {
                guard version > fold.version else {
                    fold.ledger.apply(event)
                    continue
                }
                let stored = raw[event.position]
                // A change carries the event's data as the subscriber's
                // backend knows it (`shownData`).
                fold.apply(event, version: version, type: stored?.type ?? event.event.type,
                           data: try stored?.shownData(of: event.event) ?? event.event.encodedData())
            }
            folds.append(fold)
        }
        try await ChangeRows.write(folds, on: connection)
    }

    /// The feed is not rebuilt: published changes stay as they are. A replay
    /// through `EventStore.rebuild` publishes nothing again (see the type).
    public func reset(on connection: Connection) async throws {}
}
