import Foundation
import Postgres

/// What erasing one subscriber does to one store, run inside the erasure's
/// transaction: rewrite the store's rows from the subscriber id to its
/// pseudonym (rows that counts and statistics read) or delete them (caches,
/// copies of payloads). A step that throws rolls the whole erasure back.
public struct ErasureStep: Sendable {
    /// Named in errors and logs (never the subscriber).
    public var name: String
    public var run: @Sendable (_ subscriberID: String, _ pseudonym: String, _ connection: Connection) async throws -> Void

    public init(name: String,
                run: @escaping @Sendable (_ subscriberID: String, _ pseudonym: String, _ connection: Connection) async throws -> Void) {
        self.name = name
        self.run = run
    }
}

/// The one list of erasure steps. A store that keeps a subscriber id, a
/// device id or an `appAccountToken` outside the event log defines its step
/// beside its SQL and adds it to `ErasureSteps.standard`, and nowhere else
/// (docs/architecture.md, "Erasure steps").
public struct ErasureSteps: Sendable {
    /// Every store's step, in the order they run. The audit's is last: it
    /// locks the audit table until the commit (`AuditStore.erasureStep`).
    public static let standard = ErasureSteps([
        ReadModelRows.erasureStep,
        SubscriberSnapshots.erasureStep,
        SubscriberStateCache.erasureStep,
        ReminderRows.erasureStep,
        OwnershipStore.erasureStep,
        NotificationStore.erasureStep,
        GooglePlayStore.erasureStep,
        ParkedEventStore.erasureStep,
        ChangeRows.erasureStep,
        InvalidProductStore.erasureStep,
        AuditStore.erasureStep,
    ])

    public private(set) var steps: [ErasureStep]

    public init(_ steps: [ErasureStep]) { self.steps = steps }

    /// Adds a step after the others (tests; a store's step belongs in `standard`).
    public mutating func append(_ step: ErasureStep) { steps.append(step) }

    /// Runs every step in order on `connection`, which the caller holds in a
    /// transaction; the first failure stops it, named by its step.
    public func run(subscriberID: String, pseudonym: String, on connection: Connection) async throws {
        for step in steps {
            do {
                try await step.run(subscriberID, pseudonym, connection)
            } catch {
                throw ErasureStepError(step: step.name, underlying: error)
            }
        }
    }
}

/// An erasure step that failed (the transaction it ran in rolls back).
public struct ErasureStepError: Error, CustomStringConvertible {
    public var step: String
    public var underlying: any Error

    public var description: String { "erasure step \(step) failed: \(underlying)" }
}
