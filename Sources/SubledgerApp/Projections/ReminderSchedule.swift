import Foundation
import Ledger

/// A reminder as the projection keeps it: what the rules called for and
/// where it stands.
struct ScheduledReminder: Sendable, Equatable {
    var reminder: DesiredReminder
    var status: ReminderStatus
}

/// One subscriber's reminders and the projection's rule for moving them, as a
/// value: no clock, no I/O, so a replay makes the same moves as the live run.
///
/// - A reminder the rules call for that is new, or was cancelled, becomes
///   `pending`, or `skipped` when it is already due at `now` (never sent late).
/// - A `pending` one the rules no longer call for (coverage extended, refunded,
///   auto-renew back on) becomes `cancelled`.
/// - `sent`, `failed` and `skipped` stay as they are; the events of the
///   dispatcher (`reminder_sent`, `reminder_failed`) set the first two.
struct ReminderSchedule: Sendable, Equatable {
    private(set) var reminders: [String: ScheduledReminder]
    /// Ids whose row must be written.
    private(set) var changed: Set<String> = []

    init(_ reminders: [ScheduledReminder]) {
        self.reminders = Dictionary(reminders.map { ($0.reminder.id, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// Compares what the rules call for at `now` with what is scheduled.
    mutating func schedule(_ desired: [DesiredReminder], now: Date) {
        let wanted = Set(desired.map(\.id))
        for reminder in desired {
            let fresh: ReminderStatus = reminder.dueAt <= now ? .skipped : .pending
            if var existing = reminders[reminder.id] {
                var update = existing.reminder != reminder
                existing.reminder = reminder
                if existing.status == .cancelled {
                    existing.status = fresh
                    update = true
                }
                if update { set(existing) }
            } else {
                set(ScheduledReminder(reminder: reminder, status: fresh))
            }
        }
        for (id, existing) in reminders where existing.status == .pending && !wanted.contains(id) {
            set(ScheduledReminder(reminder: existing.reminder, status: .cancelled))
        }
    }

    /// A `reminder_sent` event: delivered, whatever the schedule says now.
    mutating func markSent(_ id: String) {
        guard var existing = reminders[id], existing.status != .sent else { return }
        existing.status = .sent
        set(existing)
    }

    /// A `reminder_failed` event: delivery gave up (unless it was sent).
    mutating func markFailed(_ id: String) {
        guard var existing = reminders[id], existing.status != .sent, existing.status != .failed else { return }
        existing.status = .failed
        set(existing)
    }

    private mutating func set(_ reminder: ScheduledReminder) {
        reminders[reminder.reminder.id] = reminder
        changed.insert(reminder.reminder.id)
    }

    /// The rows to write, in a stable order.
    var changedReminders: [ScheduledReminder] {
        changed.sorted().compactMap { reminders[$0] }
    }
}
