import CLibPQ

// Bulk loads through COPY ... FROM STDIN: a rebuild writes hundreds of
// thousands of rows, which the server reads far more cheaply as COPY's
// binary format (`CopyBinaryRows`) than as one parameter it must parse as
// JSON and then cast.
extension Connection {
    /// Runs `sql`, a `COPY table (columns) FROM STDIN WITH (FORMAT binary)`
    /// statement the program wrote (no parameters: the values travel as the
    /// copy data), and sends `rows` as its input. Returns the number of rows
    /// copied. Runs in the caller's transaction, if any; an error in the data
    /// aborts the whole COPY.
    @discardableResult
    public func copy(unsafeSQL sql: String, rows: CopyBinaryRows) async throws -> Int {
        let data = rows.finished
        return try await run { handle throws(PostgresError) in try Connection.copy(sql, data: data, on: handle) }
    }

    private static func copy(_ sql: String, data: [UInt8], on handle: OpaquePointer) throws(PostgresError) -> Int {
        guard let started = PQexec(handle, sql) else {
            throw PostgresError(code: PQstatus(handle) == CONNECTION_OK ? .server : .connectionLost,
                                message: errorMessage(handle), query: sql)
        }
        guard PQresultStatus(started) == PGRES_COPY_IN else {
            let error = serverError(started, handle: handle, sql: sql)
            PQclear(started)
            while let result = PQgetResult(handle) { PQclear(result) }
            throw error
        }
        PQclear(started)
        // In pieces: libpq buffers each piece whole before sending it.
        let sent = data.withUnsafeBytes { raw -> Bool in
            var offset = 0
            while offset < raw.count {
                let length = min(1 << 20, raw.count - offset)
                guard PQputCopyData(handle, raw.baseAddress! + offset, Int32(length)) == 1 else { return false }
                offset += length
            }
            return true
        }
        guard sent, PQputCopyEnd(handle, nil) == 1 else {
            throw PostgresError(code: .connectionLost, message: errorMessage(handle), query: sql)
        }
        var copied = 0
        var firstError: PostgresError?
        while let result = PQgetResult(handle) {
            defer { PQclear(result) }
            if PQresultStatus(result) == PGRES_COMMAND_OK {
                copied = PQcmdTuples(result).map { Int(String(cString: $0)) ?? 0 } ?? 0
            } else if firstError == nil {
                firstError = serverError(result, handle: handle, sql: sql)
            }
        }
        if let firstError { throw firstError }
        return copied
    }
}
