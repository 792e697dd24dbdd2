import Postgres

/// Why the database refused a call, as the service's callers (the HTTP
/// edge, the audit) need to know it, without the driver's types: a value it
/// cannot store is the input's fault; a limit reached or the database away
/// is temporary. Every other error is not a database failure they answer.
public enum DatabaseFailure: Sendable, Equatable {
    /// A value the database cannot store or index, with its SQLSTATE.
    case unstorableValue(sqlState: String)
    case unavailable(DatabaseUnavailability)

    public init?(_ error: any Error) {
        switch error {
        case is WriteContention:
            self = .unavailable(.contention)
        case let error as PostgresError where error.isDataError:
            self = .unstorableValue(sqlState: error.sqlState?.rawValue ?? "?")
        case let error as PostgresError:
            guard let reason = error.unavailability else { return nil }
            self = .unavailable(reason)
        default:
            return nil
        }
    }
}

/// The kinds of unavailability (`subledger_database_unavailable_total`'s reasons).
public typealias DatabaseUnavailability = PostgresError.Unavailability

extension DatabaseUnavailability {
    /// Seconds a client should wait: soon for a limit a moment clears, later for an outage.
    public var retryAfter: Int {
        switch self {
        case .statementTimeout, .lockTimeout, .poolExhausted, .contention: 1
        case .insufficientResources, .readOnly, .connectionLost: 5
        }
    }
}
