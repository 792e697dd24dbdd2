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
public struct ReminderProjection: EventConsumer {
    public static let consumerName = "reminders"
    /// Notified when a reminder becomes pending; dispatchers listen.
    public static let notificationChannel = "subledger_reminders"

    public var name: String { Self.consumerName }
    let store: EventStore
    let catalog: Catalog

    public init(store: EventStore, catalog: Catalog) {
        self.store = store
        self.catalog = catalog
    }

    public func handle(_ events: [RecordedEvent], on connection: Connection) async throws {
        var through: [String: Int64] = [:]
        var order: [String] = []
        for event in events {
            guard let subscriberID = Self.subscriberID(ofStream: event.streamID) else { continue }
            if through[subscriberID] == nil { order.append(subscriberID) }
            through[subscriberID] = max(through[subscriberID] ?? 0, event.streamVersion)
        }
        var notify = false
        for subscriberID in order {
            notify = try await update(subscriberID: subscriberID, through: through[subscriberID]!, on: connection) || notify
        }
        if notify {
            try await ReminderRows.notifyDispatchers(channel: Self.notificationChannel, on: connection)
        }
    }

    /// The dispatcher's bookkeeping (attempts, lease, last error) is not in
    /// the events: it is set aside here and put back by `finishRebuild`, so a
    /// rebuild neither drops a running delivery's lease (which would let
    /// another dispatcher send it again) nor restarts its backoff.
    public func reset(on connection: Connection) async throws {
        try await ReminderRows.resetKeepingDeliveries(on: connection)
    }

    public func finishRebuild(on connection: Connection) async throws {
        try await ReminderRows.restoreDeliveries(on: connection)
    }

    static func subscriberID(ofStream streamID: String) -> String? {
        let prefix = SubscriberStreams.streamID(for: "")
        guard streamID.hasPrefix(prefix) else { return nil }
        return String(streamID.dropFirst(prefix.count))
    }

    /// Applies the subscriber's events up to stream version `through`; returns
    /// whether a reminder became pending.
    private func update(subscriberID: String, through: Int64, on connection: Connection) async throws -> Bool {
        let progress = try await ReminderRows.progress(of: subscriberID, on: connection)
        let applied = progress?.streamVersion ?? 0
        guard through > applied else { return false }
        var clock = progress?.clock ?? .distantPast

        let stored = try await store.readStream(SubscriberStreams.streamID(for: subscriberID), on: connection)
            .filter { $0.streamVersion <= through }
        var ledger = SubscriberLedger(subscriberID: subscriberID)
        var schedule = ReminderSchedule(try await ReminderRows.scheduled(of: subscriberID, on: connection))
        for event in stored {
            let recorded = try SubscriberStreams.ledgerEvent(event)
            ledger.apply(recorded)
            guard event.streamVersion > applied else { continue }
            clock = max(clock, event.recordedAt)
            switch recorded.event {
            case .reminderSent(let delivery):
                schedule.markSent(delivery.reminderID)
            case .reminderFailed(let delivery):
                schedule.markFailed(delivery.reminderID)
            default:
                schedule.schedule(Coverage.desiredReminders(of: ledger, catalog: catalog, now: clock), now: clock)
            }
        }
        let nextExpiry = Coverage.dueExpiries(of: ledger, catalog: catalog, now: .distantFuture)
            .compactMap { event -> Date? in
                if case .expired(let expiry) = event { return expiry.expiresDate }
                return nil
            }
            .min()
        try await ReminderRows.saveProgress(of: subscriberID, streamVersion: through, clock: clock, nextExpiry: nextExpiry,
                                            on: connection)
        let changed = schedule.changedReminders
        try await ReminderRows.write(changed, subscriberID: subscriberID, on: connection)
        return changed.contains { $0.status == .pending }
    }
}
