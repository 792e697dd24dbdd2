/// Limits the server enforces on a session, set on each connection as it opens.
///
/// `nil` leaves the server's setting (or the role's or database's) in force;
/// zero turns a limit off, as it does in PostgreSQL. Which limits suit the
/// service is the caller's decision, so every one defaults to `nil` here.
public struct SessionTimeouts: Sendable, Hashable {
    /// `statement_timeout`: a statement running longer is cancelled with
    /// SQLSTATE 57014; the connection stays usable.
    public var statementTimeout: Duration?
    /// `lock_timeout`: a statement waiting longer for a lock fails with 55P03,
    /// instead of queueing every later writer behind it.
    public var lockTimeout: Duration?
    /// `idle_in_transaction_session_timeout`: a session idle longer inside an
    /// open transaction is ended (25P03), releasing the locks it holds.
    public var idleInTransactionSessionTimeout: Duration?

    public init(
        statementTimeout: Duration? = nil, lockTimeout: Duration? = nil,
        idleInTransactionSessionTimeout: Duration? = nil
    ) {
        self.statementTimeout = statementTimeout
        self.lockTimeout = lockTimeout
        self.idleInTransactionSessionTimeout = idleInTransactionSessionTimeout
    }

    /// The `SET` commands for the limits given.
    ///
    /// Set after connecting rather than through the conninfo's `options`: a
    /// second `options` keyword would replace the one a deployment's conninfo
    /// may already carry (or be replaced by it), poolers such as PgBouncer
    /// refuse the `options` startup parameter unless told to ignore it, and the
    /// commands share the round trip of the session setup the connection runs
    /// anyway.
    var setCommands: [String] {
        [
            ("statement_timeout", statementTimeout),
            ("lock_timeout", lockTimeout),
            ("idle_in_transaction_session_timeout", idleInTransactionSessionTimeout),
        ].compactMap { name, duration in
            duration.map { "SET \(name) = '\(Self.milliseconds($0))ms'" }
        }
    }

    /// Whole milliseconds, rounded up so a positive limit never becomes 0 (which
    /// would turn it off). A negative one stays negative and an oversized one
    /// stays oversized, for the server to refuse when the connection opens.
    static func milliseconds(_ duration: Duration) -> Int64 {
        guard duration >= .zero else { return -1 }
        let (seconds, attoseconds) = duration.components
        let whole = min(seconds, Int64(Int32.max)) * 1000
        return whole + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
    }
}
