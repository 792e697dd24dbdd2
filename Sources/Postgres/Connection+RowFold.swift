import CLibPQ
import Foundation

// Reading many rows without a `String` per value: a rebuild reads every
// event of the log, and copying each value into a `String` (and some into
// `Data` after that) cost more than decoding them.
extension Connection {
    /// Runs `query` and folds its rows into `initial` with `fold`, which reads
    /// each row's values in place (`PostgresRawRow`), on the connection's
    /// thread while the result is alive.
    public func query<Result: Sendable>(
        _ query: PostgresQuery, into initial: Result,
        _ fold: @escaping @Sendable (inout Result, PostgresRawRow) throws(PostgresError) -> Void
    ) async throws -> Result {
        try await run { handle throws(PostgresError) in
            let result = try Connection.withParameters([query.binds]) { parameters in
                let bound = parameters[0]
                return PQexecParams(handle, query.sql, bound.count, bound.types, bound.values, bound.lengths, bound.formats, 0)
            }
            defer { PQclear(result) }
            guard let result else {
                throw PostgresError(code: PQstatus(handle) == CONNECTION_OK ? .server : .connectionLost,
                                    message: Connection.errorMessage(handle), query: query.sql)
            }
            switch PQresultStatus(result) {
            case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY: break
            default: throw Connection.serverError(result, handle: handle, sql: query.sql)
            }
            var folded = initial
            for row in 0..<PQntuples(result) {
                try fold(&folded, PostgresRawRow(result: result, row: row))
            }
            return folded
        }
    }
}

/// One row of a result, read in place: the text-format values libpq holds,
/// valid only during the fold that receives the row.
public struct PostgresRawRow {
    private let result: OpaquePointer
    private let row: Int32

    init(result: OpaquePointer, row: Int32) {
        self.result = result
        self.row = row
    }

    public var columnCount: Int { Int(PQnfields(result)) }

    /// The value's bytes (UTF-8 text), empty for NULL; valid during the fold only.
    public func bytes(at column: Int) throws(PostgresError) -> UnsafeBufferPointer<UInt8> {
        guard column >= 0, column < columnCount else {
            throw PostgresError(code: .decoding, message: "no column at index \(column)")
        }
        let length = Int(PQgetlength(result, row, Int32(column)))
        // `char` and `UInt8` may alias: no rebinding needed.
        let start = UnsafeRawPointer(PQgetvalue(result, row, Int32(column))).assumingMemoryBound(to: UInt8.self)
        return UnsafeBufferPointer(start: start, count: length)
    }

    public func isNull(at column: Int) -> Bool {
        PQgetisnull(result, row, Int32(column)) == 1
    }

    /// Decodes a non-NULL column as `PostgresRow.decode(_:at:)` does.
    public func decode<T: PostgresDecodable>(_ type: T.Type = T.self, at column: Int) throws(PostgresError) -> T {
        let bytes = try bytes(at: column)
        guard !isNull(at: column) else {
            throw PostgresError(code: .decoding, message: "column \(String(cString: PQfname(result, Int32(column)))) is NULL")
        }
        return try T(postgresText: String(decoding: bytes, as: UTF8.self))
    }

    /// An integer column (`bigint`, `integer`), read without a `String`.
    public func integer(at column: Int) throws(PostgresError) -> Int64 {
        let bytes = try bytes(at: column)
        var value: Int64 = 0
        var index = 0
        let isNegative = bytes.first == UInt8(ascii: "-")
        if isNegative { index = 1 }
        guard index < bytes.count, !isNull(at: column) else { throw .decodingFailed(String(decoding: bytes, as: UTF8.self), as: "Int64") }
        while index < bytes.count {
            let digit = bytes[index] &- UInt8(ascii: "0")
            let (times10, overflow) = value.multipliedReportingOverflow(by: 10)
            let (next, overflowAgain) = isNegative ? times10.subtractingReportingOverflow(Int64(digit))
                : times10.addingReportingOverflow(Int64(digit))
            guard digit < 10, !overflow, !overflowAgain else {
                throw .decodingFailed(String(decoding: bytes, as: UTF8.self), as: "Int64")
            }
            value = next
            index += 1
        }
        return value
    }

    /// A `timestamptz` column, read without a `String`.
    public func date(at column: Int) throws(PostgresError) -> Date {
        let bytes = try bytes(at: column)
        guard !isNull(at: column) else { throw .decodingFailed("NULL", as: "Date") }
        if let date = TimestampParser.parse(utf8: bytes) { return date }
        // `infinity` and the like, and what does not parse.
        return try Date(postgresText: String(decoding: bytes, as: UTF8.self))
    }
}
