import Foundation
import JSON

/// The two kinds of reminder webhook.
public enum ReminderType: String, Sendable, Hashable, Codable, CaseIterable {
    /// Sent a lead before coverage ends.
    case renewalReminder = "renewal_reminder"
    /// Sent when coverage ends (lead `P0D`).
    case expiryPrompt = "expiry_prompt"
}

/// Where a subscriber's coverage in a group ends: the end of the last
/// stacked period of a non-renewing group, or the expiry of an
/// auto-renewable whose auto-renew is off, or the end of its billing grace
/// period while a failed renewal is retried.
public struct CoverageEnd: Sendable, Hashable {
    public var group: String
    public var productID: String
    public var type: ProductType
    /// Auto-renewable: its original transaction; non-renewing: the last period's.
    public var originalTransactionID: String
    public var end: Date
    public var environment: Environment = .production
}

/// A reminder the rules call for; the reminder projection compares these
/// with what it has scheduled (cancel what disappeared, skip what is
/// already due when first scheduled).
public struct DesiredReminder: Sendable, Hashable, Codable {
    /// Stable: the same subscriber, group, end and lead give the same id.
    public var id: String
    public var type: ReminderType
    public var subscriberID: String
    public var group: String
    public var productID: String
    public var expiresAt: Date
    public var lead: ISODuration
    public var dueAt: Date
    /// The store environment of the coverage it is about.
    public var environment: Environment

    public init(id: String, type: ReminderType, subscriberID: String, group: String, productID: String,
                expiresAt: Date, lead: ISODuration, dueAt: Date, environment: Environment = .production) {
        self.environment = environment
        self.id = id
        self.type = type
        self.subscriberID = subscriberID
        self.group = group
        self.productID = productID
        self.expiresAt = expiresAt
        self.lead = lead
        self.dueAt = dueAt
    }

    /// The webhook body: `{"id", "type", "subscriberId", "group", "productId",
    /// "expiresAt", "lead", "dueAt"}` with RFC 3339 dates.
    public func webhookBody() throws -> Data {
        try LedgerJSON.makeEncoder().encode(self)
    }

    enum CodingKeys: String, CodingKey {
        case id, type, subscriberID = "subscriberId", group, productID = "productId", expiresAt, lead, dueAt, environment
    }
}

/// Coverage, reminders and Subledger's own expiry events, as pure functions
/// of a subscriber's history.
public enum Coverage {
    /// Coverage ends per group as known at `now`, sorted by group.
    /// Each environment's coverage is its own (a sandbox pass never extends a
    /// production one).
    public static func ends(of ledger: SubscriberLedger, catalog: Catalog, now: Date) -> [CoverageEnd] {
        var ends: [CoverageEnd] = []
        for environment in Environment.allCases {
            let evaluation = Evaluation(ledger: ledger, catalog: catalog, at: now, environment: environment, includingGrants: false)
            for group in evaluation.nonRenewingGroups {
                guard let last = group.periods.last else { continue }
                ends.append(CoverageEnd(group: group.group, productID: last.productID, type: .nonRenewing,
                                        originalTransactionID: last.originalTransactionID, end: last.end, environment: environment))
            }
            // One that will not renew, or whose renewal failed and is in grace.
            for subscription in evaluation.autoRenewables
            where (!subscription.autoRenew || subscription.graceEnd != nil) && subscription.status != .revoked {
                let fact = subscription.latest.fact
                // In a billing grace period (its end always after the period's), access and
                // so the prompt end with the grace.
                let end = subscription.graceEnd ?? subscription.end
                ends.append(CoverageEnd(group: subscription.group, productID: fact.productID, type: .autoRenewable,
                                        originalTransactionID: fact.originalTransactionID, end: end,
                                        environment: environment))
            }
        }
        return ends.sorted { ($0.group, $0.originalTransactionID) < ($1.group, $1.originalTransactionID) }
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
            // The Decider refuses facts that would need a reminder outside the
            // range; one from an older history is never scheduled.
            for lead in catalog.product(id: end.productID)?.reminders ?? []
            where InputLimits.contains(end.end) && InputLimits.contains(lead.subtracted(from: end.end)) {
                reminders.append(DesiredReminder(
                    id: reminderID(subscriberID: ledger.subscriberID, group: end.group, end: end.end, lead: lead,
                                   environment: end.environment),
                    type: lead.isZero ? .expiryPrompt : .renewalReminder, subscriberID: ledger.subscriberID,
                    group: end.group, productID: end.productID, expiresAt: end.end, lead: lead,
                    dueAt: lead.subtracted(from: end.end), environment: end.environment))
            }
        }
        return reminders.sorted { ($0.dueAt, $0.id) < ($1.dueAt, $1.id) }
    }

    /// As `desiredReminders(of:catalog:now:)`, from a history.
    public static func desiredReminders(history: [RecordedLedgerEvent], subscriberID: String, catalog: Catalog, now: Date) -> [DesiredReminder] {
        desiredReminders(of: SubscriberLedger(subscriberID: subscriberID, events: history), catalog: catalog, now: now)
    }

    /// `rem:<subscriber>:<group>:<end>:<lead>`, with `:Sandbox` after it for sandbox coverage.
    public static func reminderID(subscriberID: String, group: String, end: Date, lead: ISODuration,
                                  environment: Environment = .production) -> String {
        "rem:\(subscriberID):\(group):\(RFC3339.format(end)):\(lead)" + (environment == .production ? "" : ":\(environment.rawValue)")
    }

    /// The `expired` events Subledger must append for non-renewing groups
    /// whose coverage (each contiguous run of periods) ended at or before
    /// `now` and was not yet recorded as expired. Keyed `expiry:` + group +
    /// `@` + end, so appending them is exactly once per coverage end.
    public static func dueExpiries(of ledger: SubscriberLedger, catalog: Catalog, now: Date) -> [LedgerEvent] {
        var events: [LedgerEvent] = []
        for environment in Environment.allCases {
            let evaluation = Evaluation(ledger: ledger, catalog: catalog, at: now, environment: environment, includingGrants: false)
            events += dueExpiries(evaluation, ledger: ledger, now: now)
        }
        return events
    }

    private static func dueExpiries(_ evaluation: Evaluation, ledger: SubscriberLedger, now: Date) -> [LedgerEvent] {
        var events: [LedgerEvent] = []
        for group in evaluation.nonRenewingGroups {
            for (index, period) in group.periods.enumerated() where period.end <= now {
                let isRunEnd = index == group.periods.count - 1 || group.periods[index + 1].start != period.end
                guard isRunEnd else { continue }
                let event = LedgerEvent.expired(ExpiryFact(
                    originalTransactionID: nil, group: group.group, productID: period.productID, expiresDate: period.end,
                    reason: "coverage_ended", environment: evaluation.environment, source: FactSource.subledger))
                if let key = event.idempotencyKey, ledger.position(ofKey: key) == nil { events.append(event) }
            }
        }
        return events
    }

    /// As `dueExpiries(of:catalog:now:)`, from a history.
    public static func dueExpiries(history: [RecordedLedgerEvent], subscriberID: String, catalog: Catalog, now: Date) -> [LedgerEvent] {
        dueExpiries(of: SubscriberLedger(subscriberID: subscriberID, events: history), catalog: catalog, now: now)
    }
}
