/// An error from the PostgreSQL layer.
///
/// `description` is deliberately generic (it may end up in logs or HTTP answers);
/// `debugDescription` carries the server's message, detail and the query text.
public struct PostgresError: Error, Sendable {
    /// What kind of failure this is; extensible without breaking callers.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// The server answered the statement with an error; see `sqlState`.
        public static let server = Code("server")
        /// A connection could not be established.
        public static let connectionFailed = Code("connectionFailed")
        /// An established connection broke (server restart, network, termination).
        public static let connectionLost = Code("connectionLost")
        /// No connection could be leased before the pool's lease timeout.
        public static let poolTimeout = Code("poolTimeout")
        /// The pool was shut down.
        public static let poolClosed = Code("poolClosed")
        /// A value could not be decoded into the requested Swift type.
        public static let decoding = Code("decoding")
        /// The statement was cancelled (task cancellation).
        public static let cancelled = Code("cancelled")
        /// The connection is in a state that does not allow the operation.
        public static let invalidState = Code("invalidState")
    }

    public var code: Code
    /// The five-character SQLSTATE the server reported, when there is one.
    public var sqlState: SQLState?
    public var message: String
    public var detail: String?
    public var hint: String?
    /// The statement text (never its bound values).
    public var query: String?

    public init(
        code: Code, sqlState: SQLState? = nil, message: String,
        detail: String? = nil, hint: String? = nil, query: String? = nil
    ) {
        self.code = code
        self.sqlState = sqlState
        self.message = message
        self.detail = detail
        self.hint = hint
        self.query = query
    }

    /// True when the server refused the statement for the values it carried
    /// (see `SQLState.isDataError`): the caller's input is at fault, an HTTP 400.
    public var isDataError: Bool {
        sqlState?.isDataError == true
    }

    /// Why the database could not do this now, when it is a limit or an
    /// outage rather than the statement's fault: the same request may succeed
    /// shortly (an HTTP 503 with `Retry-After`, not a 500). Nil otherwise.
    public var unavailability: Unavailability? {
        if code == .poolTimeout || code == .poolClosed { return .poolExhausted }
        // A refused connect (53300 read from its message) is a limit, not an outage.
        if sqlState?.rawValue.hasPrefix("53") == true { return .insufficientResources }
        if isConnectionBroken { return .connectionLost }
        guard let sqlState else { return nil }
        switch sqlState {
        case .queryCanceled: return .statementTimeout
        case .lockNotAvailable: return .lockTimeout
        case .readOnlySQLTransaction: return .readOnly
        case .serializationFailure, .deadlockDetected: return .contention
        default: return sqlState.rawValue.hasPrefix("53") ? .insufficientResources : nil
        }
    }

    /// The kinds of `unavailability`, each a label of the metric that counts them.
    public enum Unavailability: String, Sendable, CaseIterable {
        /// 57014: `statement_timeout` (or a cancel) ended the statement.
        case statementTimeout = "statement_timeout"
        /// 55P03: `lock_timeout` passed waiting for a lock.
        case lockTimeout = "lock_timeout"
        /// No pooled connection became free in time, or the pool is closing.
        case poolExhausted = "pool_exhausted"
        /// Class 53: too many connections (53300), out of memory or disk.
        case insufficientResources = "insufficient_resources"
        /// 25006: the server is a standby or was made read-only (a failover).
        case readOnly = "read_only"
        /// The connection broke or could not be opened (restart, network,
        /// failover, a server refusing connections).
        case connectionLost = "connection_lost"
        /// 40001 or 40P01: concurrent transactions collided past their retries.
        case contention
    }

    /// The SQLSTATE of a refused connect, read from the server's message:
    /// libpq reports no SQLSTATE for a connection that never opened, and a
    /// full server (`max_connections`, a role's `CONNECTION LIMIT`) must be
    /// told from one that is down. The server's messages are matched in
    /// English, its default `lc_messages`.
    public static func connectRefusal(_ message: String) -> SQLState? {
        if message.contains("too many connections") || message.contains("too many clients")
            || message.contains("remaining connection slots are reserved") {
            return .tooManyConnections
        }
        if message.contains("the database system is starting up") || message.contains("the database system is shutting down")
            || message.contains("the database system is in recovery mode") {
            return .cannotConnectNow
        }
        return nil
    }

    /// True when the connection this error came from can no longer be used.
    public var isConnectionBroken: Bool {
        code == .connectionLost || code == .connectionFailed
            || sqlState?.isConnectionTermination == true
    }
}

extension PostgresError: CustomStringConvertible, CustomDebugStringConvertible {
    public var description: String {
        if let sqlState { return "PostgresError(code: \(code), sqlState: \(sqlState.rawValue))" }
        return "PostgresError(code: \(code))"
    }

    public var debugDescription: String {
        var parts = ["code: \(code)"]
        if let sqlState { parts.append("sqlState: \(sqlState.rawValue)") }
        parts.append("message: \(message)")
        if let detail { parts.append("detail: \(detail)") }
        if let hint { parts.append("hint: \(hint)") }
        if let query { parts.append("query: \(query)") }
        return "PostgresError(\(parts.joined(separator: ", ")))"
    }
}

/// A SQLSTATE code, with names for the ones callers act on.
public struct SQLState: RawRepresentable, Hashable, Sendable {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }

    public static let uniqueViolation = SQLState("23505")
    public static let foreignKeyViolation = SQLState("23503")
    public static let checkViolation = SQLState("23514")
    public static let serializationFailure = SQLState("40001")
    public static let deadlockDetected = SQLState("40P01")
    public static let lockNotAvailable = SQLState("55P03")
    public static let queryCanceled = SQLState("57014")
    public static let adminShutdown = SQLState("57P01")
    public static let crashShutdown = SQLState("57P02")
    public static let cannotConnectNow = SQLState("57P03")
    public static let tooManyConnections = SQLState("53300")
    public static let readOnlySQLTransaction = SQLState("25006")
    public static let undefinedTable = SQLState("42P01")
    public static let stringDataRightTruncation = SQLState("22001")
    public static let divisionByZero = SQLState("22012")
    public static let invalidTextRepresentation = SQLState("22P02")
    /// A byte sequence invalid in the encoding, such as a NUL in text.
    public static let characterNotInRepertoire = SQLState("22021")
    public static let untranslatableCharacter = SQLState("22P05")
    /// A value over a server limit, such as an index entry too large for a btree page.
    public static let programLimitExceeded = SQLState("54000")

    /// Class 08 (connection exception) and the shutdown codes of class 57.
    public var isConnectionTermination: Bool {
        rawValue.hasPrefix("08") || self == .adminShutdown || self == .crashShutdown
            || self == .cannotConnectNow
    }

    /// Class 22 (data exception: a value too long, malformed, out of range,
    /// holding a NUL…) and 54000 (program limit exceeded: a value too large
    /// for an index entry): the statement was refused for the values it
    /// carried, so retrying it unchanged fails again. The rest of class 54
    /// (too many columns or arguments) is the statement's shape, not its data.
    public var isDataError: Bool {
        rawValue.hasPrefix("22") || self == .programLimitExceeded
    }

    /// Errors worth retrying the whole transaction for.
    public var isTransient: Bool {
        self == .serializationFailure || self == .deadlockDetected
    }
}
