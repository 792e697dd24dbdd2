import CLibPQ

// One statement per round trip, and the turning of a libpq result into rows
// or into the error it carries (the pipeline reuses both).
extension Connection {
    /// Runs one parameterised statement and returns its rows.
    @discardableResult
    public func query(_ query: PostgresQuery) async throws -> PostgresRows {
        try await run { [prepared] handle throws(PostgresError) in try Connection.execute(query, on: handle, prepared: prepared) }
    }

    /// Runs SQL text with no parameters, possibly several statements (migrations).
    public func execute(unsafeSQL sql: String) async throws {
        try await run { handle throws(PostgresError) in
            let result = PQexec(handle, sql)
            defer { PQclear(result) }
            _ = try Connection.rows(from: result, handle: handle, sql: sql)
        }
    }

    /// With `prepared`, a statement run before is prepared and run by name
    /// (see `PreparedStatements`).
    static func execute(_ query: PostgresQuery, on handle: OpaquePointer,
                        prepared: PreparedStatements? = nil) throws(PostgresError) -> PostgresRows {
        let result = try withParameters([query.binds]) { parameters throws(PostgresError) in
            let bound = parameters[0]
            switch prepared?.plan(query, parameters: bound) ?? .unnamed {
            case .unnamed:
                return PQexecParams(
                    handle, query.sql, bound.count, bound.types, bound.values, bound.lengths, bound.formats, 0)
            case .prepared(let name):
                return PQexecPrepared(handle, name, bound.count, bound.values, bound.lengths, bound.formats, 0)
            case .prepare(let name):
                let made = PQprepare(handle, name, query.sql, bound.count, bound.types)
                defer { PQclear(made) }
                do throws(PostgresError) {
                    _ = try rows(from: made, handle: handle, sql: query.sql)
                } catch {
                    prepared?.forget(query.sql)
                    throw error
                }
                return PQexecPrepared(handle, name, bound.count, bound.values, bound.lengths, bound.formats, 0)
            }
        }
        defer { PQclear(result) }
        do throws(PostgresError) {
            return try rows(from: result, handle: handle, sql: query.sql)
        } catch {
            if PreparedStatements.isStale(error) { prepared?.forgetAll() }
            throw error
        }
    }

    /// Converts a result into rows, or into the error it carries.
    static func rows(from result: OpaquePointer?, handle: OpaquePointer, sql: String) throws(PostgresError) -> PostgresRows {
        guard let result else {
            throw PostgresError(
                code: PQstatus(handle) == CONNECTION_OK ? .server : .connectionLost,
                message: errorMessage(handle), query: sql)
        }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            return extractRows(result)
        default:
            throw serverError(result, handle: handle, sql: sql)
        }
    }

    static func serverError(_ result: OpaquePointer, handle: OpaquePointer, sql: String) -> PostgresError {
        func field(_ code: Character) -> String? {
            guard let value = PQresultErrorField(result, Int32(code.asciiValue!)) else { return nil }
            return String(cString: value)
        }
        let sqlState = field("C").map(SQLState.init(rawValue:))
        let lost = PQstatus(handle) != CONNECTION_OK
        var message = field("M") ?? errorMessage(handle)
        if message.isEmpty { message = "statement failed" }
        return PostgresError(
            code: lost ? .connectionLost : .server, sqlState: sqlState, message: message,
            detail: field("D"), hint: field("H"), query: sql)
    }

    static func extractRows(_ result: OpaquePointer) -> PostgresRows {
        let columnCount = Int(PQnfields(result))
        let rowCount = Int(PQntuples(result))
        let names = (0..<columnCount).map { String(cString: PQfname(result, Int32($0))) }
        let index = ColumnIndex(names: names)
        var rows = [PostgresRow]()
        rows.reserveCapacity(rowCount)
        for row in 0..<rowCount {
            var values = [String?]()
            values.reserveCapacity(columnCount)
            for column in 0..<columnCount {
                if PQgetisnull(result, Int32(row), Int32(column)) == 1 {
                    values.append(nil)
                } else {
                    values.append(String(cString: PQgetvalue(result, Int32(row), Int32(column))))
                }
            }
            rows.append(PostgresRow(columnIndex: index, values: values))
        }
        let affected = PQcmdTuples(result).map { Int(String(cString: $0)) ?? 0 } ?? 0
        return PostgresRows(columns: names, rows: rows, affectedRows: affected)
    }
}
