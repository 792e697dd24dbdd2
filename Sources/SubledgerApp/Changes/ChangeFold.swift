import EventStore
import Foundation
import JSON
import Ledger

/// A change ready to be stored: its columns and its body, the contract's
/// `{"id", "sequence", "type", "subscriberId", "environment", "at",
/// "recordedAt", "data", "entitlements"}`, and `store` when the change
/// comes from a store's fact or product.
struct NewChange: Sendable, Encodable {
    var id: String
    var subscriber_id: String
    var sequence: Int64
    var type: String
    var environment: String
    var recorded_at: Date
    var body: String
}

/// The change body as served and delivered.
struct ChangeBody: Encodable {
    var id: String
    var sequence: Int64
    var type: String
    var subscriberId: String
    var environment: String
    var at: Date
    var recordedAt: Date
    var data: JSONValue
    var entitlements: [SubscriberState.Entitlement]
    /// The store whose fact this is (`app_store` | `google_play`), or that
    /// sold what gave the entitlement or what the reminder is about; absent
    /// for the ledger's own facts (devices, support grants, erasure).
    var store: String?
    /// A reminder's fields, also at the top level (as the reminder webhook
    /// has always sent them); absent from every other change.
    var group: String?
    var productId: String?
    var expiresAt: Date?
    var lead: String?
    var dueAt: Date?
}

/// One subscriber's feed moved along: ledger events become changes, and the
/// entitlements compared before and after each (and as time passes) become
/// `entitlement_gained`/`entitlement_lost`. The same steps for the consumer
/// (events) and the time sweeper (instants passing).
struct ChangeFold {
    /// Ledger event types that are bookkeeping of Subledger's own workers,
    /// not something a backend acts on: the reminder dispatcher's records.
    static let bookkeepingTypes: Set<String> = [LedgerEventType.reminderSent.rawValue, LedgerEventType.reminderFailed.rawValue]

    var ledger: SubscriberLedger
    var published: PublishedEntitlements
    var sequence: Int64
    var clock: Date
    var version: Int64
    var next: Date?
    var changes: [NewChange] = []
    let catalog: Catalog

    var subscriberID: String { ledger.subscriberID }

    init(ledger: SubscriberLedger, progress: ChangeProgress?, catalog: Catalog) {
        self.ledger = ledger
        self.published = progress?.published ?? PublishedEntitlements()
        self.sequence = progress?.sequence ?? 0
        self.clock = progress?.clock ?? .distantPast
        self.version = progress?.streamVersion ?? 0
        self.next = progress?.nextTransitionAt
        self.catalog = catalog
    }

    /// Time alone up to `until`: the transitions at each instant the rules
    /// may change the state (each at its own instant), published with ids
    /// from the subscriber, the entitlement and the instant.
    mutating func advanceTime(until: Date, recordedAt: Date) {
        guard until > clock else { return }
        let (found, next) = published.advanceByTime(ledger, from: clock, until: until, catalog: catalog)
        for (transition, state) in found {
            let id = "chg_" + Self.digest([subscriberID, transition.environment.rawValue, transition.entitlement,
                                          transition.kind.rawValue, RFC3339.format(transition.at)])
            append(id: id, type: transition.kind.rawValue, environment: transition.environment, at: transition.at,
                   recordedAt: recordedAt,
                   data: .object(["entitlement": .string(transition.entitlement), "reason": .string(Self.timeReason(transition))]),
                   entitlements: state.entitlements, store: Self.store(of: transition.entitlement, in: state.entitlements))
        }
        clock = until
        self.next = next
    }

    /// One new event of the stream: time up to its instant first, then the
    /// event's own change (unless bookkeeping), then the transitions it caused,
    /// with ids from the event's position.
    mutating func apply(_ recorded: RecordedLedgerEvent, version: Int64, type: String, data: Data) {
        let at = max(clock, recorded.recordedAt)
        advanceTime(until: at, recordedAt: recorded.recordedAt)
        ledger.apply(recorded)
        self.version = max(self.version, version)
        let environment = Self.environment(of: data)
        let (transitions, states) = published.advance(ledger, to: at, catalog: catalog, adding: environment)
        if !Self.bookkeepingTypes.contains(type) {
            let value = JSONValue(json: data) ?? .object([:])
            append(id: "chg_\(recorded.position)", type: type, environment: environment, at: at, recordedAt: recorded.recordedAt,
                   data: value, entitlements: states[environment]?.entitlements ?? [], store: Self.store(ofEvent: type, data: value))
        }
        for transition in transitions {
            append(id: "chg_\(recorded.position)_" + Self.digest([transition.environment.rawValue, transition.entitlement, transition.kind.rawValue]),
                   type: transition.kind.rawValue, environment: transition.environment, at: at, recordedAt: recorded.recordedAt,
                   data: .object(["entitlement": .string(transition.entitlement), "reason": .string(type)]),
                   entitlements: states[transition.environment]?.entitlements ?? [],
                   store: Self.store(of: transition.entitlement, in: states[transition.environment]?.entitlements ?? []))
        }
        clock = at
        next = ledger.nextChange(after: at, catalog: catalog, environments: published.environments)
    }

    /// A reminder that became due: time up to `at` first, then the reminder
    /// as a change whose id is the reminder's and whose fields are the
    /// reminder webhook's (in `data` and at the top level).
    mutating func publish(_ reminder: DesiredReminder, at: Date, recordedAt: Date) {
        advanceTime(until: at, recordedAt: recordedAt)
        let at = max(clock, at)
        let state = ledger.state(at: at, catalog: catalog, environment: reminder.environment)
        let data = (try? reminder.webhookBody()).flatMap { JSONValue(json: $0) } ?? .object([:])
        append(id: reminder.id, type: reminder.type.rawValue, environment: reminder.environment, at: at, recordedAt: recordedAt,
               data: data, entitlements: state.entitlements, store: catalog.product(id: reminder.productID)?.store, reminder: reminder)
        clock = at
    }

    private mutating func append(id: String, type: String, environment: Ledger.Environment, at: Date, recordedAt: Date,
                                 data: JSONValue, entitlements: [SubscriberState.Entitlement], store: Store?,
                                 reminder: DesiredReminder? = nil) {
        sequence += 1
        var body = ChangeBody(id: id, sequence: sequence, type: type, subscriberId: subscriberID, environment: environment.rawValue,
                              at: at, recordedAt: recordedAt, data: data, entitlements: entitlements, store: store?.rawValue)
        if let reminder {
            body.group = reminder.group
            body.productId = reminder.productID
            body.expiresAt = reminder.expiresAt
            body.lead = reminder.lead.description
            body.dueAt = reminder.dueAt
        }
        let text = (try? LedgerJSON.makeEncoder().encode(body)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        changes.append(NewChange(id: id, subscriber_id: subscriberID, sequence: sequence, type: type,
                                 environment: environment.rawValue, recorded_at: recordedAt, body: text))
    }

    var progress: ChangeProgress {
        ChangeProgress(subscriberID: subscriberID, streamVersion: version, clock: clock, sequence: sequence,
                       published: published, nextTransitionAt: next)
    }

    /// Why an entitlement changed when no event did.
    static func timeReason(_ transition: EntitlementTransition) -> String {
        transition.kind == .lost ? "ended" : "started"
    }

    /// The App Store's event types (their facts say no store: they were
    /// all the App Store's before Google Play came).
    static let appStoreTypes: Set<String> = [
        LedgerEventType.purchased, .renewed, .restored, .refunded, .refundReversed, .renewalExtended, .expired,
        .autoRenewChanged, .billingIssue, .transferredOut, .transferredIn,
    ].reduce(into: []) { $0.insert($1.rawValue) }

    /// The store of a stored fact: its `store` field, else Google Play's
    /// event types and the App Store's; nil for the ledger's own facts.
    static func store(ofEvent type: String, data: JSONValue) -> Store? {
        if case .string(let text)? = data["store"], let store = Store(rawValue: text) { return store }
        if type == LedgerEventType.googlePlayPurchase.rawValue || type == LedgerEventType.googlePlayVoided.rawValue { return .googlePlay }
        return appStoreTypes.contains(type) ? .appStore : nil
    }

    /// The store that sold what gives `entitlement` in `entitlements`.
    static func store(of entitlement: String, in entitlements: [SubscriberState.Entitlement]) -> Store? {
        entitlements.first { $0.id == entitlement }?.store
    }

    /// The `environment` field of a stored fact; Production when it has none.
    static func environment(of data: Data) -> Ledger.Environment {
        guard let value = JSONValue(json: data), case .string(let text)? = value["environment"],
              let environment = Ledger.Environment(rawValue: text) else { return .production }
        return environment
    }

    /// 32 hex digits of the installation's digest of the parts (HMAC under
    /// `SUBLEDGER_SECRET`, else SHA-256): ids that carry no subscriber id in
    /// clear, the same whichever instance computes them, and from which
    /// whoever reads the feed of an erased subscriber cannot confirm a
    /// guessed id without the secret.
    static func digest(_ parts: [String]) -> String {
        InstallationSecret.current.digest(parts.joined(separator: "\u{1F}").utf8, for: .changeID, hexDigits: 32)
    }
}

/// A row of `change_subscribers`.
struct ChangeProgress: Sendable {
    var subscriberID: String
    var streamVersion: Int64
    var clock: Date
    var sequence: Int64
    var published: PublishedEntitlements
    var nextTransitionAt: Date?
}
