import EventStore
import Foundation
import Ledger
import Postgres

/// The subscription read models (`subscriptions`, `non_renewing_periods`,
/// `entitlements`, `product_activity`; see `sql/0007_read_models.sql`).
///
/// A batch costs a constant number of round trips whatever it holds: the
/// ledgers of every subscriber it touches are loaded in one query (each a
/// snapshot and the tail of its stream), their
/// rows computed in memory by `SubscriberLedger.readModel` (a pure function
/// of the ledger and the catalog), and written with one DELETE and one
/// multi-row INSERT per table, pipelined. Because the rows depend only on the
/// ledger, never on the order or grouping of batches, a rebuild equals the
/// live projection, and replaying an event is harmless.
public struct SubscriptionProjection: EventConsumer {
    public static let consumerName = "subscriptions"

    public var name: String { Self.consumerName }
    let store: EventStore
    let catalog: Catalog
    /// Every key, for a streamwise rebuild (loaded by `prepareLoad`).
    let keyring = SubscriberKeyring()

    public init(store: EventStore, catalog: Catalog) {
        self.store = store
        self.catalog = catalog
    }

    public func handle(_ events: [RecordedEvent], into tables: ProjectionTables, on connection: Connection) async throws {
        var pseudonyms: [String] = []
        var seen = Set<String>()
        for event in events {
            guard let pseudonym = SubscriberStreams.pseudonym(ofStream: event.streamID), seen.insert(pseudonym).inserted else { continue }
            pseudonyms.append(pseudonym)
        }
        guard !pseudonyms.isEmpty else { return }
        // Resolved to subscribers in the reading statement.
        let loaded = try await SubscriberSnapshots.load(pseudonyms: pseudonyms, on: connection)
        var models = loaded.values.map { $0.ledger.readModel(catalog: catalog) }
        // An erased subscriber's rows are under its pseudonym (erasure moved
        // them): folded from its stream, sealed fields and all, as a rebuild does.
        let resolved = Set(loaded.keys.map(SubscriberPseudonyms.pseudonym(for:)))
        for pseudonym in pseudonyms where !resolved.contains(pseudonym) {
            models.append(try await SubscriberStreams.erasedLedger(pseudonym: pseudonym, on: connection).readModel(catalog: catalog))
        }
        // A ledger read with a long tail is stored again, in the same round trip.
        let snapshots = SubscriberSnapshots.saveStatement(loaded.values.filter(\.isSnapshotDue))
        try await ReadModelRows.replace(models, alongside: snapshots.map { [$0] } ?? [], into: tables, on: connection)
    }

    public func reset(on connection: Connection) async throws {
        try await ReadModelRows.deleteAll(on: connection)
    }
}

/// The rows are a function of each subscriber's stream alone, so a rebuild
/// reads the log stream by stream into shadow tables (`EventStore.rebuildStreamwise`).
extension SubscriptionProjection: StreamwiseConsumer {
    public var streamPrefix: String { SubscriberStreams.prefix }
    public var tables: [String] { ReadModelRows.tables }

    public func prepareLoad(on connection: Connection) async throws { try await keyring.load(on: connection) }
    public func finishLoad() { keyring.clear() }

    public func event(from row: StreamEventRow) throws -> RecordedLedgerEvent {
        try SubscriberStreams.ledgerEvent(row)
    }

    public func rows(for streams: consuming [StreamEvents<RecordedLedgerEvent>]) throws -> [SubscriberReadModel] {
        var models: [SubscriberReadModel] = []
        models.reserveCapacity(streams.count)
        for index in streams.indices {
            guard let pseudonym = SubscriberStreams.pseudonym(ofStream: streams[index].streamID) else { continue }
            // An erased subscriber's rows are under its pseudonym; its sealed
            // fields stay sealed (the read models count none of them).
            let entry = keyring.entry(forPseudonym: pseudonym)
            let subscriberID = entry?.subscriberID ?? pseudonym
            // The events are moved into the ledger, not copied: taken out of
            // the page (its only holder), reversed, and popped off the end,
            // each event's strings change hands without being retained for
            // the ledger and released with the page.
            var events: [RecordedLedgerEvent] = []
            swap(&events, &streams[index].events)
            var ledger = SubscriberLedger(subscriberID: subscriberID, capacity: events.count)
            events.reverseByMoving()
            if let key = entry?.key {
                while let event = events.popLast() { ledger.apply(try SubscriberStreams.opened(event, key: key, pseudonym: pseudonym)) }
            } else {
                while let event = events.popLast() { ledger.apply(event) }
            }
            models.append(ledger.readModel(catalog: catalog))
        }
        return models
    }

    public func insert(_ parts: [[SubscriberReadModel]], into tables: ProjectionTables, on connection: Connection) async throws {
        try await ReadModelRows.insert(parts.flatMap { $0 }, into: tables, on: connection)
    }
}

extension Array {
    /// `reverse()` without copies: the standard one swaps through copies of
    /// the elements (a retain of every string of an event, and a release);
    /// this moves their bits.
    mutating func reverseByMoving() {
        withUnsafeMutableBufferPointer { buffer in
            guard var low = buffer.baseAddress, buffer.count > 1 else { return }
            var high = low + (buffer.count - 1)
            while low < high {
                let moved = low.move()
                low.moveInitialize(from: high, count: 1)
                high.initialize(to: moved)
                low += 1
                high -= 1
            }
        }
    }
}
