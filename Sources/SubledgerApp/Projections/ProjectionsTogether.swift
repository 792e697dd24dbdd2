import EventStore
import Foundation
import Ledger
import Postgres

/// The three projections of subscriber streams rebuilt in one pass over the
/// log, as `subledger rebuild` does when no projection is named.
///
/// Each of them alone reads every page of the log, decodes every event,
/// opens its sealed fields and applies it to a ledger; together those steps
/// were about a third of each one's rebuild, done three times. Here a page
/// is read once and each stream is opened and folded once: the reminder fold
/// applies the events one by one (its schedule moves with each), and the
/// ledger it ends with is the whole stream's, from which the subscription
/// rows and the analytics contribution are made. An erased subscriber
/// (no key) has no reminders, and its ledger keeps its sealed fields sealed,
/// as each projection alone does.
///
/// Everything else is each projection's own: its tables get a shadow each,
/// the catch-up applies what was committed meanwhile with each one's batch
/// code, and the swap hands each live consumer's checkpoint over in one
/// transaction (`members`).
public struct ProjectionsTogether: StreamwiseConsumer {
    let reminders: ReminderProjection
    let subscriptions: SubscriptionProjection
    let analytics: AnalyticsProjection
    let catalog: Catalog
    let keyring = SubscriberKeyring()

    public init(store: EventStore, catalog: Catalog) {
        reminders = ReminderProjection(store: store, catalog: catalog)
        subscriptions = SubscriptionProjection(store: store, catalog: catalog)
        analytics = AnalyticsProjection(catalog: catalog)
        self.catalog = catalog
    }

    /// The three, in the order their steps run.
    private var parts: [any StreamwiseConsumer] { [reminders, subscriptions, analytics] }

    public var name: String { members.joined(separator: "+") }
    public var members: [String] { parts.map(\.name) }
    public var streamPrefix: String { SubscriberStreams.prefix }
    public var tables: [String] { parts.flatMap(\.tables) }

    public struct Rows: Sendable {
        var reminders = ReminderProjection.Rows()
        var subscriptions: [SubscriberReadModel] = []
        var analytics = AnalyticsProjection.LoadedPart()
    }

    public typealias StreamEvent = ReminderProjection.StreamEvent

    public func event(from row: StreamEventRow) throws -> StreamEvent {
        try reminders.event(from: row)
    }

    public func rows(for streams: consuming [StreamEvents<StreamEvent>]) throws -> Rows {
        var rows = Rows()
        rows.subscriptions.reserveCapacity(streams.count)
        for index in streams.indices {
            guard let pseudonym = SubscriberStreams.pseudonym(ofStream: streams[index].streamID) else { continue }
            let ledger: SubscriberLedger
            if let entry = try keyring.entry(forPseudonym: pseudonym) {
                let fold = try ReminderFold(wholeStream: &streams[index].events, of: entry, pseudonym: pseudonym, catalog: catalog)
                rows.reminders.add(fold, catalog: catalog)
                ledger = fold.ledger
            } else {
                // Erased: sealed fields stay sealed. Moved out of the page
                // (its only holder), as `SubscriberKeyring.ledger(taking:)` does.
                var events: [StreamEvent] = []
                swap(&events, &streams[index].events)
                var erased = SubscriberLedger(subscriberID: pseudonym, capacity: events.count)
                events.reverseByMoving()
                while case let (_, event)? = events.popLast() { erased.apply(event) }
                ledger = erased
            }
            rows.subscriptions.append(ledger.readModel(catalog: catalog))
            analytics.add(ledger, pseudonym: pseudonym, to: &rows.analytics)
        }
        return rows
    }

    public func insert(_ parts: [Rows], into tables: ProjectionTables, on connection: Connection) async throws {
        try await reminders.insert(parts.map(\.reminders), into: tables, on: connection)
        try await subscriptions.insert(parts.map(\.subscriptions), into: tables, on: connection)
        try await analytics.insert(parts.map(\.analytics), into: tables, on: connection)
    }

    public func handle(_ events: [RecordedEvent], into tables: ProjectionTables, on connection: Connection) async throws {
        for part in parts { try await part.handle(events, into: tables, on: connection) }
    }

    public func prepareLoad(on connection: Connection) async throws { try await keyring.load(on: connection) }

    public func finishLoad() {
        keyring.clear()
        analytics.finishLoad()
    }

    public func finishLoad(into tables: ProjectionTables, on connection: Connection) async throws {
        try await analytics.finishLoad(into: tables, on: connection)
    }

    public func prepareSwap(on connection: Connection) async throws {
        for part in parts { try await part.prepareSwap(on: connection) }
    }

    /// For a replay in commit order (`EventStore.rebuild`): each one's own.
    public func reset(on connection: Connection) async throws {
        for part in parts { try await part.reset(on: connection) }
    }

    public func finishRebuild(on connection: Connection) async throws {
        for part in parts { try await part.finishRebuild(on: connection) }
    }
}
