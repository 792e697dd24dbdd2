import Foundation
import Ledger
import Postgres

/// One fact for one subscriber: an API request, an import line, a
/// transaction of a receipt, a fact of an App Store notification.
public struct WriteCommand: Sendable {
    public enum Request: Sendable {
        case fact(FactRequest)
        case restore(RestoreRequest)
        /// A support grant; `grantID` is the new grant's id.
        case grant(GrantRequest, grantID: String, by: ActorStamp)
        case revokeGrant(GrantRevocationRequest, by: ActorStamp)
    }

    public var subscriberID: String
    public var request: Request
    /// Stored in the events (`api`, `import`, `appstore`).
    public var source: String

    public init(subscriberID: String, request: Request, source: String = FactSource.api) {
        self.subscriberID = subscriberID
        self.request = request
        self.source = source
    }

    /// The store environment the command's facts are in.
    var environment: Ledger.Environment {
        switch request {
        case .fact(let fact): fact.environment
        case .restore(let restore): restore.transactions.first?.environment ?? .production
        case .grant, .revokeGrant: .production
        }
    }

    /// A grant or a revocation, whose answer shows the grant as recorded.
    var isSupportAction: Bool {
        switch request {
        case .grant, .revokeGrant: true
        case .fact, .restore: false
        }
    }

    public static func fact(_ request: FactRequest, subscriberID: String, source: String = FactSource.api) -> WriteCommand {
        WriteCommand(subscriberID: subscriberID, request: .fact(request), source: source)
    }

    public static func restore(_ request: RestoreRequest, subscriberID: String, source: String = FactSource.api) -> WriteCommand {
        WriteCommand(subscriberID: subscriberID, request: .restore(request), source: source)
    }
}

/// What became of one command of a batch.
public enum WriteOutcome: Sendable, Equatable {
    /// Appended; the position of its last event in the subscriber's stream.
    case recorded(position: Int64)
    /// Already recorded; the position the first copy answered with.
    case duplicate(position: Int64)
    /// The rules refused it (only in batches that skip refusals).
    case rejected(LedgerError)
}

/// Commands written together: decided in order against the subscribers'
/// states in memory (a command sees the ones before it), appended in one
/// transaction.
public struct WriteBatch: Sendable {
    /// What a command the rules refuse does to the rest.
    public enum Refusals: Sendable {
        /// Reported in its outcome; the others are written (import).
        case skip
        /// Nothing is written and the refusal is thrown (an API request, a
        /// receipt, a notification: all of it or none of it).
        case abortAll
    }

    /// Work that must commit or roll back with the batch's events; runs in
    /// its transaction after them (an App Store notification's row). It runs
    /// even when every command is a duplicate.
    public typealias Alongside = @Sendable (Connection) async throws -> Void

    public var commands: [WriteCommand]
    public var refusals: Refusals
    public var alongside: Alongside?

    public init(_ commands: [WriteCommand], refusals: Refusals = .abortAll, alongside: Alongside? = nil) {
        self.commands = commands
        self.refusals = refusals
        self.alongside = alongside
    }
}

/// What a batch did.
public struct WriteBatchResult: Sendable {
    /// One per command, in order.
    public var outcomes: [WriteOutcome]
    /// Each touched subscriber's ledger after the commit; absent for a
    /// subscriber a concurrent writer also wrote to (read it again).
    var ledgers: [String: SubscriberLedger]
    /// How long the attempt that committed took in each phase.
    var phases = WritePhases()

    /// Whether the ledger of `subscriberID` after the write is known without reading it again.
    func knowsLedger(of subscriberID: String) -> Bool { ledgers[subscriberID] != nil }
}

/// Where the time of one write attempt went, on its leased connection.
public struct WritePhases: Sendable, Equatable {
    /// Reading the ledgers and owners the batch needs (one round trip).
    public var read = Duration.zero
    /// Deciding every command in memory (reading a transfer's previous
    /// owner when one is named) and encoding the new events.
    public var decide = Duration.zero
    /// Appending with the ownership rows, up to the acknowledged commit.
    public var commit = Duration.zero

    public init() {}

    static func += (sum: inout WritePhases, phases: WritePhases) {
        sum.read += phases.read
        sum.decide += phases.decide
        sum.commit += phases.commit
    }
}

/// What recording one fact did (`POST /v1/subscribers/{id}/events`).
public struct WriteResult: Sendable {
    /// The position of the fact's event (the first copy's for a duplicate).
    public var position: Int64
    public var isDuplicate: Bool
    /// The subscriber's state right after the write.
    public var state: SubscriberState
    /// The subscriber's ledger right after the write (what a support
    /// action answers with: the grant as recorded).
    public var ledger: SubscriberLedger? = nil
}

/// Too many concurrent writers kept changing what a batch read; nothing of
/// it was stored. Temporary: the caller may retry.
public struct WriteContention: Error, Sendable, CustomStringConvertible {
    public var subscriberIDs: [String]
    public var description: String {
        "too many concurrent writes to subscriber '\(subscriberIDs.first ?? "")'; retry the request"
    }
}
