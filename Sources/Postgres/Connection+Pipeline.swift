import CLibPQ
import Foundation

// Batches in libpq's pipeline mode: the event store appends many statements
// at once, and one round trip instead of one per statement is the point.
extension Connection {
    /// Sends every statement before reading any result (libpq's pipeline mode):
    /// one round trip for the lot. Up to the implicit sync they run as one
    /// transaction unless the statements open their own; the first error aborts
    /// the rest and is thrown.
    public func pipeline(_ queries: [PostgresQuery]) async throws -> [PostgresRows] {
        guard !queries.isEmpty else { return [] }
        return try await run { [prepared] handle throws(PostgresError) in
            try Connection.runPipeline(queries, on: handle, prepared: prepared)
        }
    }

    /// With `prepared`, statements run before are prepared and run by name
    /// (see `PreparedStatements`); a statement prepared in a pipeline that
    /// fails is forgotten, whether or not its preparation ran.
    static func runPipeline(_ queries: [PostgresQuery], on handle: OpaquePointer,
                            prepared: PreparedStatements? = nil) throws(PostgresError) -> [PostgresRows] {
        try withParameters(queries.map(\.binds)) { parameters throws(PostgresError) in
            let plans = zip(queries, parameters).map { query, bound in
                prepared?.plan(query, parameters: bound) ?? .unnamed
            }
            do throws(PostgresError) {
                return try runPipeline(queries, parameters: parameters, plans: plans, on: handle)
            } catch {
                for (query, plan) in zip(queries, plans) {
                    if case .prepare = plan { prepared?.forget(query.sql) }
                }
                if PreparedStatements.isStale(error) { prepared?.forgetAll() }
                throw error
            }
        }
    }

    private static func runPipeline(
        _ queries: [PostgresQuery], parameters: [Parameters], plans: [PreparedStatements.Plan], on handle: OpaquePointer
    ) throws(PostgresError) -> [PostgresRows] {
        guard PQenterPipelineMode(handle) == 1 else {
            throw PostgresError(code: .invalidState, message: errorMessage(handle))
        }
        defer { PQexitPipelineMode(handle) }
        // Non-blocking while sending, so a full socket buffer cannot deadlock us
        // against a server that is busy writing results we have not read yet.
        PQsetnonblocking(handle, 1)
        for ((query, bound), plan) in zip(zip(queries, parameters), plans) {
            var sent: Int32
            switch plan {
            case .unnamed:
                sent = PQsendQueryParams(
                    handle, query.sql, bound.count, bound.types, bound.values, bound.lengths, bound.formats, 0)
            case .prepared(let name):
                sent = PQsendQueryPrepared(handle, name, bound.count, bound.values, bound.lengths, bound.formats, 0)
            case .prepare(let name):
                sent = PQsendPrepare(handle, name, query.sql, bound.count, bound.types)
                if sent == 1 { sent = PQsendQueryPrepared(handle, name, bound.count, bound.values, bound.lengths, bound.formats, 0) }
            }
            guard sent == 1 else {
                PQsetnonblocking(handle, 0)
                throw PostgresError(code: .connectionLost, message: errorMessage(handle), query: query.sql)
            }
        }
        guard PQpipelineSync(handle) == 1 else {
            PQsetnonblocking(handle, 0)
            throw PostgresError(code: .connectionLost, message: errorMessage(handle))
        }
        while true {
            let flushed = PQflush(handle)
            if flushed == 0 { break }
            if flushed < 0 {
                PQsetnonblocking(handle, 0)
                throw PostgresError(code: .connectionLost, message: errorMessage(handle))
            }
            var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN | POLLOUT), revents: 0)
            _ = poll(&descriptor, 1, -1)
            if descriptor.revents & Int16(POLLIN) != 0, PQconsumeInput(handle) != 1 {
                PQsetnonblocking(handle, 0)
                throw PostgresError(code: .connectionLost, message: errorMessage(handle))
            }
        }
        PQsetnonblocking(handle, 0)

        var outputs = [PostgresRows]()
        outputs.reserveCapacity(queries.count)
        var firstError: PostgresError?
        for (query, plan) in zip(queries, plans) {
            if case .prepare = plan {
                // The preparation's own result comes first.
                while let result = PQgetResult(handle) {
                    defer { PQclear(result) }
                    let status = PQresultStatus(result)
                    if status != PGRES_COMMAND_OK, status != PGRES_PIPELINE_ABORTED, firstError == nil {
                        firstError = serverError(result, handle: handle, sql: query.sql)
                    }
                }
            }
            var rows = PostgresRows(columns: [], rows: [], affectedRows: 0)
            while let result = PQgetResult(handle) {
                defer { PQclear(result) }
                switch PQresultStatus(result) {
                case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
                    rows = extractRows(result)
                case PGRES_PIPELINE_ABORTED:
                    break
                default:
                    if firstError == nil { firstError = serverError(result, handle: handle, sql: query.sql) }
                }
            }
            outputs.append(rows)
        }
        // Drain up to and including the sync point.
        while let result = PQgetResult(handle) {
            let status = PQresultStatus(result)
            PQclear(result)
            if status == PGRES_PIPELINE_SYNC { break }
        }
        if PQstatus(handle) != CONNECTION_OK {
            throw PostgresError(code: .connectionLost, message: errorMessage(handle))
        }
        if let firstError { throw firstError }
        return outputs
    }
}
