import EventStore
import Foundation
import Ledger
import Logging
import Postgres

/// The `reminders` read model: for every subscriber a batch touches, the
/// reminders the rules call for after each of their new events, diffed with
/// what is scheduled (see `ReminderSchedule`), plus the earliest coverage end
/// the expiry sweeper has yet to record.
///
/// Deterministic, so a rebuild equals the live projection whatever the batch
/// sizes: each subscriber's events are applied one at a time in stream order
/// (reading the stream, so an event that commits in a later batch than a
/// newer one of the same stream is still applied in its place), and "now" is
/// the latest `recorded_at` seen in the stream, never the wall clock.
///
/// A batch costs two round trips whatever it holds: one pipeline reads every
/// touched subscriber's progress, ledger (from the latest snapshot not past
/// that progress) and new events, and their scheduled reminders; the
/// schedules are computed in memory; one pipeline writes the progress rows,
/// the changed reminders (multi-row upserts) and the dispatchers' wake-up.
public struct ReminderProjection: EventConsumer {
    public static let consumerName = "reminders"
    /// Notified when a reminder becomes pending; dispatchers listen.
    public static let notificationChannel = "subledger_reminders"

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
        // Streams are named by pseudonyms, resolved to subscribers in the
        // reading statements. An erased subscriber (no key) has no
        // reminders: erasure deleted them, and its stream schedules none.
        var through: [String: Int64] = [:]
        var order: [String] = []
        for event in events {
            guard let pseudonym = SubscriberStreams.pseudonym(ofStream: event.streamID) else { continue }
            if through[pseudonym] == nil { order.append(pseudonym) }
            through[pseudonym] = max(through[pseudonym] ?? 0, event.streamVersion)
        }
        guard !order.isEmpty else { return }
        let read = try await connection.pipeline([
            try SubscriberSnapshots.replayQuery(order.map { ($0, through[$0]!) }, progressTable: tables.name("reminder_subscribers"),
                                                resolvingPseudonyms: true),
            ReminderRows.scheduledQuery(of: order, in: tables, resolvingPseudonyms: true),
        ])
        let replays = try await SubscriberSnapshots.replays(read[0], through: through, throughByPseudonym: true, on: connection)
        let scheduled = try ReminderRows.scheduled(read[1])
        var progress: [ReminderRows.Progress] = []
        var changed: [ScheduledReminder] = []
        let subscribers = Dictionary(uniqueKeysWithValues: replays.keys.map { (SubscriberPseudonyms.pseudonym(for: $0), $0) })
        for pseudonym in order {
            guard let subscriberID = subscribers[pseudonym], let replay = replays[subscriberID] else { continue }
            var fold = ReminderFold(replay, scheduled: scheduled[subscriberID] ?? [])
            for (version, event) in replay.events { fold.apply(event, version: version, catalog: catalog) }
            progress.append(fold.progress(catalog: catalog))
            changed += fold.schedule.changedReminders
        }
        var writes = [try ReminderRows.saveProgressStatement(progress, in: tables), try ReminderRows.writeStatement(changed, in: tables)]
        if tables == .live && changed.contains(where: { $0.status == .pending }) {
            writes.append(ReminderRows.notifyStatement(channel: Self.notificationChannel))
        }
        let statements = writes.compactMap { $0 }
        if !statements.isEmpty { _ = try await connection.pipeline(statements) }
    }

    /// For the commit-order rebuild (`EventStore.rebuild`): the dispatcher's
    /// bookkeeping (attempts, lease, last error) is not in the events: it is
    /// set aside here and put back by `finishRebuild`, so a rebuild neither
    /// drops a running delivery's lease (which would let another dispatcher
    /// send it again) nor restarts its backoff.
    public func reset(on connection: Connection) async throws {
        try await ReminderRows.resetKeepingDeliveries(on: connection)
    }

    public func finishRebuild(on connection: Connection) async throws {
        try await ReminderRows.restoreDeliveries(on: connection)
    }

}

/// One subscriber's reminders moved along their stream, event by event: the
/// same pure steps for a live batch (from the stored progress) and a rebuild
/// (from nothing).
struct ReminderFold {
    var ledger: SubscriberLedger
    /// Versions up to this one were applied before: folded, not scheduled again.
    let applied: Int64
    var version: Int64
    var clock: Date
    var schedule: ReminderSchedule

    init(_ replay: LedgerReplay, scheduled: [ScheduledReminder]) {
        ledger = replay.ledger
        applied = replay.applied
        version = replay.applied
        clock = replay.clock
        schedule = ReminderSchedule(scheduled)
    }

    init(subscriberID: String) {
        self.init(LedgerReplay(ledger: SubscriberLedger(subscriberID: subscriberID), applied: 0, clock: .distantPast, events: []),
                  scheduled: [])
    }

    /// A subscriber's whole stream folded from nothing, each event opened
    /// with their key (a streamwise rebuild). The events are moved out of
    /// `events`, which is left empty: taken off the end of the reversed
    /// array, none is copied.
    init(wholeStream events: inout [ReminderProjection.StreamEvent], of entry: SubscriberKeys.Entry, pseudonym: String,
         catalog: Catalog) throws {
        self.init(LedgerReplay(ledger: SubscriberLedger(subscriberID: entry.subscriberID, capacity: events.count), applied: 0,
                               clock: .distantPast, events: []),
                  scheduled: [])
        events.reverseByMoving()
        while case let (version, event)? = events.popLast() {
            apply(try SubscriberStreams.opened(event, key: entry.key, pseudonym: pseudonym), version: version, catalog: catalog)
        }
    }

    mutating func apply(_ recorded: RecordedLedgerEvent, version: Int64, catalog: Catalog) {
        ledger.apply(recorded)
        guard version > applied else { return }
        self.version = max(self.version, version)
        clock = max(clock, recorded.recordedAt)
        switch recorded.event {
        case .reminderSent(let delivery):
            schedule.markSent(delivery.reminderID)
        case .reminderFailed(let delivery):
            schedule.markFailed(delivery.reminderID)
        default:
            schedule.schedule(Coverage.desiredReminders(of: ledger, catalog: catalog, now: clock), now: clock)
        }
    }

    /// The progress row: version, clock and the earliest unrecorded coverage end.
    func progress(catalog: Catalog) -> ReminderRows.Progress {
        let nextExpiry = Coverage.dueExpiries(of: ledger, catalog: catalog, now: .distantFuture)
            .compactMap { event -> Date? in
                if case .expired(let expiry) = event { return expiry.expiresDate }
                return nil
            }
            .min()
        return ReminderRows.Progress(subscriber_id: ledger.subscriberID, stream_version: version, clock: clock, next_expiry_at: nextExpiry)
    }
}

/// Each subscriber's reminders are a function of their stream alone (in
/// stream order, with the stream's own clock), so a rebuild folds the log
/// stream by stream into shadow tables (`EventStore.rebuildStreamwise`).
extension ReminderProjection: StreamwiseConsumer {
    public struct Rows: Sendable {
        var progress: [ReminderRows.Progress] = []
        var reminders: [ScheduledReminder] = []

        /// A subscriber's rows once their whole stream is folded.
        mutating func add(_ fold: ReminderFold, catalog: Catalog) {
            progress.append(fold.progress(catalog: catalog))
            reminders += fold.schedule.changedReminders
        }
    }

    public var streamPrefix: String { SubscriberStreams.prefix }
    public var tables: [String] { ReminderRows.tables }

    public func prepareLoad(on connection: Connection) async throws { try await keyring.load(on: connection) }
    public func finishLoad() { keyring.clear() }

    /// An event and its version in the stream (the fold's clock).
    public typealias StreamEvent = (version: Int64, event: RecordedLedgerEvent)

    public func event(from row: StreamEventRow) throws -> StreamEvent {
        (row.streamVersion, try SubscriberStreams.ledgerEvent(row))
    }

    public func rows(for streams: consuming [StreamEvents<StreamEvent>]) throws -> Rows {
        var rows = Rows()
        for index in streams.indices {
            // An erased subscriber (no key) has no reminders, as live.
            guard let pseudonym = SubscriberStreams.pseudonym(ofStream: streams[index].streamID),
                  let entry = try keyring.entry(forPseudonym: pseudonym) else { continue }
            rows.add(try ReminderFold(wholeStream: &streams[index].events, of: entry, pseudonym: pseudonym, catalog: catalog),
                     catalog: catalog)
        }
        return rows
    }

    public func insert(_ parts: [Rows], into tables: ProjectionTables, on connection: Connection) async throws {
        let statements = [
            try ReminderRows.saveProgressStatement(parts.flatMap(\.progress), in: tables, upsert: false),
            try ReminderRows.writeStatement(parts.flatMap(\.reminders), in: tables, upsert: false),
        ].compactMap { $0 }
        if !statements.isEmpty { _ = try await connection.pipeline(statements) }
    }

    /// Carries the dispatcher's bookkeeping over, and wakes the dispatchers
    /// when the swap commits (the catch-up into the shadow notified nobody).
    public func prepareSwap(on connection: Connection) async throws {
        try await ReminderRows.carryDeliveriesToShadow(on: connection)
        try await connection.query(ReminderRows.notifyStatement(channel: Self.notificationChannel))
    }
}
