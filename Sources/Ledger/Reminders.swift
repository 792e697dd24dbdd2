import Foundation

/// The two kinds of reminder webhook.
public enum ReminderType: String, Sendable, Hashable, Codable {
    /// Sent a lead before coverage ends.
    case renewalReminder = "renewal_reminder"
    /// Sent when coverage ends (lead `P0D`).
    case expiryPrompt = "expiry_prompt"
}

/// Where a subscriber's coverage in a group ends: the end of the last
/// stacked period of a non-renewing group, or the expiry of an
/// auto-renewable whose auto-renew is off.
public struct CoverageEnd: Sendable, Hashable {
    public var group: String
    public var productId: String
    public var type: ProductType
    /// Auto-renewable: its original transaction; non-renewing: the last period's.
    public var originalTransactionId: String
    public var end: Date
}

/// A reminder the rules call for; the reminder projection compares these
/// with what it has scheduled (cancel what disappeared, skip what is
/// already due when first scheduled).
public struct DesiredReminder: Sendable, Hashable, Encodable {
    /// Stable: the same subscriber, group, end and lead give the same id.
    public var id: String
    public var type: ReminderType
    public var subscriberId: String
    public var group: String
    public var productId: String
    public var expiresAt: Date
    public var lead: ISODuration
    public var dueAt: Date

    public init(id: String, type: ReminderType, subscriberId: String, group: String, productId: String,
                expiresAt: Date, lead: ISODuration, dueAt: Date) {
        self.id = id
        self.type = type
        self.subscriberId = subscriberId
        self.group = group
        self.productId = productId
        self.expiresAt = expiresAt
        self.lead = lead
        self.dueAt = dueAt
    }

    /// The webhook body: `{"id", "type", "subscriberId", "group", "productId",
    /// "expiresAt", "lead", "dueAt"}` with RFC 3339 dates.
    public func webhookBody() throws -> Data {
        try LedgerJSON.makeEncoder().encode(self)
    }
}

/// Coverage, reminders and Subledger's own expiry events, as pure functions
/// of a subscriber's history.
public enum Coverage {
    /// Coverage ends per group as known at `now`, sorted by group.
    public static func ends(of ledger: SubscriberLedger, catalog: Catalog, now: Date) -> [CoverageEnd] {
        let evaluation = Evaluation(ledger: ledger, catalog: catalog, at: now)
        var ends: [CoverageEnd] = []
        for group in evaluation.nonRenewingGroups {
            guard let last = group.periods.last else { continue }
            ends.append(CoverageEnd(group: group.group, productId: last.productID, type: .nonRenewing,
                                    originalTransactionId: last.originalTransactionID, end: last.end))
        }
        for subscription in evaluation.autoRenewables where !subscription.autoRenew && subscription.status != .revoked {
            let fact = subscription.latest.fact
            ends.append(CoverageEnd(group: subscription.group, productId: fact.productId, type: .autoRenewable,
                                    originalTransactionId: fact.originalTransactionId, end: subscription.end))
        }
        return ends.sorted { ($0.group, $0.originalTransactionId) < ($1.group, $1.originalTransactionId) }
    }

    /// As `ends(of:catalog:now:)`, from a history.
    public static func ends(history: [RecordedLedgerEvent], subscriberID: String, catalog: Catalog, now: Date) -> [CoverageEnd] {
        ends(of: SubscriberLedger(subscriberID: subscriberID, events: history), catalog: catalog, now: now)
    }

    /// One reminder per lead of the product's `reminders` for each coverage
    /// end, due at end − lead, sorted by due time then id. Includes ones
    /// already due; the projection decides to skip them.
    public static func desiredReminders(of ledger: SubscriberLedger, catalog: Catalog, now: Date) -> [DesiredReminder] {
        var reminders: [DesiredReminder] = []
        for end in ends(of: ledger, catalog: catalog, now: now) {
            for lead in catalog.product(id: end.productId)?.reminders ?? [] {
                reminders.append(DesiredReminder(
                    id: reminderID(subscriberID: ledger.subscriberID, group: end.group, end: end.end, lead: lead),
                    type: lead.isZero ? .expiryPrompt : .renewalReminder, subscriberId: ledger.subscriberID,
                    group: end.group, productId: end.productId, expiresAt: end.end, lead: lead,
                    dueAt: lead.subtracted(from: end.end)))
            }
        }
        return reminders.sorted { ($0.dueAt, $0.id) < ($1.dueAt, $1.id) }
    }

    /// As `desiredReminders(of:catalog:now:)`, from a history.
    public static func desiredReminders(history: [RecordedLedgerEvent], subscriberID: String, catalog: Catalog, now: Date) -> [DesiredReminder] {
        desiredReminders(of: SubscriberLedger(subscriberID: subscriberID, events: history), catalog: catalog, now: now)
    }

    /// `rem:<subscriber>:<group>:<end>:<lead>`.
    public static func reminderID(subscriberID: String, group: String, end: Date, lead: ISODuration) -> String {
        "rem:\(subscriberID):\(group):\(RFC3339.format(end)):\(lead)"
    }

    /// The `expired` events Subledger must append for non-renewing groups
    /// whose coverage (each contiguous run of periods) ended at or before
    /// `now` and was not yet recorded as expired. Keyed `expiry:` + group +
    /// `@` + end, so appending them is exactly once per coverage end.
    public static func dueExpiries(of ledger: SubscriberLedger, catalog: Catalog, now: Date) -> [LedgerEvent] {
        let evaluation = Evaluation(ledger: ledger, catalog: catalog, at: now)
        var events: [LedgerEvent] = []
        for group in evaluation.nonRenewingGroups {
            for (index, period) in group.periods.enumerated() where period.end <= now {
                let isRunEnd = index == group.periods.count - 1 || group.periods[index + 1].start != period.end
                guard isRunEnd else { continue }
                let event = LedgerEvent.expired(ExpiryFact(
                    originalTransactionId: nil, group: group.group, productId: period.productID, expiresDate: period.end,
                    reason: "coverage_ended", source: FactSource.subledger))
                if let key = event.idempotencyKey, !ledger.keys.contains(key) { events.append(event) }
            }
        }
        return events
    }

    /// As `dueExpiries(of:catalog:now:)`, from a history.
    public static func dueExpiries(history: [RecordedLedgerEvent], subscriberID: String, catalog: Catalog, now: Date) -> [LedgerEvent] {
        dueExpiries(of: SubscriberLedger(subscriberID: subscriberID, events: history), catalog: catalog, now: now)
    }
}

extension DesiredReminder {
    enum CodingKeys: String, CodingKey { case id, type, subscriberId, group, productId, expiresAt, lead, dueAt }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(type, forKey: .type)
        try container.encode(subscriberId, forKey: .subscriberId)
        try container.encode(group, forKey: .group)
        try container.encode(productId, forKey: .productId)
        try container.encode(RFC3339.format(expiresAt), forKey: .expiresAt)
        try container.encode(lead, forKey: .lead)
        try container.encode(RFC3339.format(dueAt), forKey: .dueAt)
    }
}
