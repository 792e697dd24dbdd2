import CLibPQ

/// The statements prepared on one connection, by SQL text.
///
/// PostgreSQL parses and plans an unnamed statement every time it runs: for
/// the request path's lookups (a handful of LATERAL probes) planning took
/// 0.3 ms against 0.07 ms of execution, so most of the server's work per
/// request was planning the same text again. A statement whose text is seen
/// a second time is prepared (`Parse` once, then only `Bind`/`Execute`);
/// one-off texts (DDL, generated table names) stay unnamed and never fill
/// the cache, which holds at most `capacity` statements.
///
/// Used only on the connection's thread (inside `Connection.run`), one job
/// at a time; not thread-safe by itself.
final class PreparedStatements: @unchecked Sendable {
    static let capacity = 256

    private var names: [String: String] = [:]
    /// Texts seen once, not prepared yet.
    private var seen: Set<String> = []
    private var counter = 0

    /// How a statement runs this time.
    enum Plan {
        /// Unnamed, parsed and planned for this run only.
        case unnamed
        /// Already prepared under `name`.
        case prepared(name: String)
        /// To be prepared under `name` first (it is registered until `forget`).
        case prepare(name: String)
    }

    /// How `sql` runs; `parameters` with a value sent in binary (a text
    /// holding a NUL) always run unnamed, as such a value's type is declared
    /// for that run only.
    func plan(_ query: PostgresQuery, parameters: Parameters) -> Plan {
        guard query.mayPrepare else { return .unnamed }
        let sql = query.sql
        if let name = names[sql] {
            return parameters.types.allSatisfy({ $0 == 0 }) ? .prepared(name: name) : .unnamed
        }
        guard Self.isPreparable(sql), parameters.types.allSatisfy({ $0 == 0 }), names.count < Self.capacity else { return .unnamed }
        guard seen.contains(sql) else {
            if seen.count >= Self.capacity * 4 { seen.removeAll() }
            seen.insert(sql)
            return .unnamed
        }
        seen.remove(sql)
        counter += 1
        // A fresh name each time: a statement whose preparation was lost in
        // an aborted pipeline may exist on the server, and is never reused.
        let name = "subledger_\(counter)"
        names[sql] = name
        return .prepare(name: name)
    }

    /// Forgets `sql`'s statement (its preparation failed or never ran).
    func forget(_ sql: String) {
        names[sql] = nil
    }

    /// Forgets every statement (the server refused one whose tables changed shape).
    func forgetAll() {
        names.removeAll()
    }

    /// Only these can be prepared (PostgreSQL plans nothing else).
    static func isPreparable(_ sql: String) -> Bool {
        var keyword = ""
        for character in sql.utf8 {
            if keyword.isEmpty, character == 32 || character == 10 || character == 9 || character == 13 || character == 40 { continue }
            guard (65...90).contains(character) || (97...122).contains(character), keyword.count < 7 else { break }
            keyword.append(Character(Unicode.Scalar(character | 0x20)))
        }
        return ["select", "with", "insert", "update", "delete", "values"].contains(keyword)
    }

    /// Whether `error` says a prepared statement's result changed shape
    /// (its tables were altered): every statement is prepared again then.
    static func isStale(_ error: PostgresError) -> Bool {
        error.sqlState?.rawValue == "0A000" && error.message.contains("cached plan")
    }
}
