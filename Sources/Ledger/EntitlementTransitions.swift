import Foundation
import JSON

/// An entitlement a subscriber gained or lost, in one environment, at an instant.
public struct EntitlementTransition: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        case gained = "entitlement_gained"
        case lost = "entitlement_lost"
    }

    public var kind: Kind
    public var entitlement: String
    public var environment: Environment
    public var at: Date

    public init(kind: Kind, entitlement: String, environment: Environment, at: Date) {
        self.kind = kind
        self.entitlement = entitlement
        self.environment = environment
        self.at = at
    }
}

/// The entitlements last published to a subscriber's change feed: the active
/// ids per environment. Comparing them with the ledger's state at an instant
/// gives the transitions to publish; a pure function of values, so the feed's
/// consumer and its time sweeper compute the same thing.
public struct PublishedEntitlements: Sendable, Equatable {
    public var active: [Environment: Set<String>]

    public init(active: [Environment: Set<String>] = [:]) {
        self.active = active
    }

    /// The environments the feed follows for this subscriber.
    public var environments: [Environment] {
        Environment.allCases.filter { active[$0] != nil }
    }

    /// The states of `ledger` at `at` in each followed environment (plus
    /// `adding`), the transitions from what was published, in a stable order
    /// (losses first, then gains, each by entitlement id). Updates `self`.
    public mutating func advance(_ ledger: SubscriberLedger, to at: Date, catalog: Catalog,
                                 adding: Environment? = nil) -> (transitions: [EntitlementTransition], states: [Environment: SubscriberState]) {
        if let adding, active[adding] == nil { active[adding] = [] }
        var transitions: [EntitlementTransition] = []
        var states: [Environment: SubscriberState] = [:]
        for environment in environments {
            let state = ledger.state(at: at, catalog: catalog, environment: environment)
            states[environment] = state
            let now = Set(state.activeEntitlementIDs)
            let before = active[environment] ?? []
            transitions += before.subtracting(now).sorted().map {
                EntitlementTransition(kind: .lost, entitlement: $0, environment: environment, at: at)
            }
            transitions += now.subtracting(before).sorted().map {
                EntitlementTransition(kind: .gained, entitlement: $0, environment: environment, at: at)
            }
            active[environment] = now
        }
        return (transitions, states)
    }

    /// Publishes the transitions that time alone brings between the
    /// subscriber's last evaluated instant `from` and `until` (inclusive), in
    /// order of their instants: at each instant the rules may change the state
    /// (`SubscriberLedger.nextChange(after:catalog:)`), the state is compared
    /// with what was published. Returns them with the instant reached and the
    /// states there, and the next instant to look at after `until`.
    public mutating func advanceByTime(_ ledger: SubscriberLedger, from: Date, until: Date, catalog: Catalog)
        -> (transitions: [(EntitlementTransition, SubscriberState)], next: Date?)
    {
        var transitions: [(EntitlementTransition, SubscriberState)] = []
        var at = from
        while let next = ledger.nextChange(after: at, catalog: catalog, environments: environments), next <= until {
            let (found, states) = advance(ledger, to: next, catalog: catalog)
            transitions += found.map { ($0, states[$0.environment]!) }
            at = next
        }
        return (transitions, ledger.nextChange(after: max(at, until), catalog: catalog, environments: environments))
    }

    /// The JSON stored in `change_subscribers.entitlements`: `{"Production": ["pro"], ...}`.
    public var storedJSON: String {
        let fields = environments.map { environment -> String in
            let ids = (active[environment] ?? []).sorted().map(JSONStringLiteral.quoted)
            return "\"\(environment.rawValue)\":[" + ids.joined(separator: ",") + "]"
        }
        return "{" + fields.joined(separator: ",") + "}"
    }

    public init(storedJSON data: Data) throws {
        let decoded = try JSONDecoder().decode([String: [String]].self, from: data)
        var active: [Environment: Set<String>] = [:]
        for (key, ids) in decoded {
            guard let environment = Environment(rawValue: key) else { continue }
            active[environment] = Set(ids)
        }
        self.init(active: active)
    }
}
