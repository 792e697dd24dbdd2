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
        let (loaded, erased) = try await SubscriberStreams.ledgers(of: events, on: connection)
        guard !loaded.isEmpty || !erased.isEmpty else { return }
        let models = (loaded.values.map(\.ledger) + erased.values).map { $0.readModel(catalog: catalog) }
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
            guard let (_, ledger) = try keyring.ledger(taking: &streams[index]) else { continue }
            models.append(ledger.readModel(catalog: catalog))
        }
        return models
    }

    public func insert(_ parts: [[SubscriberReadModel]], into tables: ProjectionTables, on connection: Connection) async throws {
        try await ReadModelRows.insert(parts.flatMap { $0 }, into: tables, on: connection)
    }
}

extension SubscriberKeyring {
    /// The ledger of a subscriber's whole stream, and its pseudonym (nil:
    /// not a subscriber's stream). An erased subscriber's ledger is named
    /// by its pseudonym and keeps its sealed fields sealed (the read models
    /// count none of them).
    ///
    /// The events are moved into the ledger, not copied: taken out of the
    /// page (its only holder), reversed, and popped off the end, each
    /// event's strings change hands without being retained for the ledger
    /// and released with the page.
    func ledger(taking stream: inout StreamEvents<RecordedLedgerEvent>) throws -> (pseudonym: String, ledger: SubscriberLedger)? {
        guard let pseudonym = SubscriberStreams.pseudonym(ofStream: stream.streamID) else { return nil }
        let entry = try entry(forPseudonym: pseudonym)
        var events: [RecordedLedgerEvent] = []
        swap(&events, &stream.events)
        var ledger = SubscriberLedger(subscriberID: entry?.subscriberID ?? pseudonym, capacity: events.count)
        events.reverseByMoving()
        if let key = entry?.key {
            while let event = events.popLast() { ledger.apply(try SubscriberStreams.opened(event, key: key, pseudonym: pseudonym)) }
        } else {
            while let event = events.popLast() { ledger.apply(event) }
        }
        return (pseudonym, ledger)
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
