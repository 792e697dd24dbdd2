import CLibPQ
import Foundation

// Reading many rows without a `String` per value: a rebuild reads every
// event of the log, and copying each value into a `String` (and some into
// `Data` after that) cost more than decoding them.
extension Connection {
    /// Runs `query` and folds its rows into `initial` with `fold`, which reads
    /// each row's values in place (`PostgresRawRow`), on the connection's
    /// thread while the result is alive.
    ///
    /// With `binaryResults`, the server sends every value in its binary form:
    /// integers and timestamps then cost it no formatting and us no parsing
    /// (text columns are the same bytes either way).
    public func query<Result: Sendable>(
        _ query: PostgresQuery, into initial: Result, binaryResults: Bool = false,
        _ fold: @escaping @Sendable (inout Result, PostgresRawRow) throws(PostgresError) -> Void
    ) async throws -> Result {
        try await run { handle throws(PostgresError) in
            let result = try Connection.withParameters([query.binds]) { parameters in
                let bound = parameters[0]
                return PQexecParams(handle, query.sql, bound.count, bound.types, bound.values, bound.lengths, bound.formats,
                                    binaryResults ? 1 : 0)
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

/// One row of a result, read in place: the values libpq holds, in text or
/// binary form as the query asked, valid only during the fold that
/// receives the row.
public struct PostgresRawRow {
    private let result: OpaquePointer
    private let row: Int32

    init(result: OpaquePointer, row: Int32) {
        self.result = result
        self.row = row
    }

    public var columnCount: Int { Int(PQnfields(result)) }

    /// The value's bytes, empty for NULL; valid during the fold only. For a
    /// text column (`text`, or anything cast `::text`), its UTF-8 text in
    /// either form.
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

    private func isBinary(_ column: Int) -> Bool {
        PQfformat(result, Int32(column)) == 1
    }

    /// Decodes a non-NULL text-form column as `PostgresRow.decode(_:at:)` does.
    public func decode<T: PostgresDecodable>(_ type: T.Type = T.self, at column: Int) throws(PostgresError) -> T {
        let bytes = try nonNull(column, as: "\(T.self)")
        guard !isBinary(column) else { throw .decodingFailed("<binary>", as: "\(T.self)") }
        return try T(postgresText: String(decoding: bytes, as: UTF8.self))
    }

    /// An integer column (`bigint`, `integer`, `smallint`), read without a `String`.
    public func integer(at column: Int) throws(PostgresError) -> Int64 {
        let bytes = try nonNull(column, as: "Int64")
        if isBinary(column) {
            // Network byte order, as wide as the column's type.
            guard bytes.count == 8 || bytes.count == 4 || bytes.count == 2 else { throw .decodingFailed("<binary>", as: "Int64") }
            var value: Int64 = Int64(Int8(bitPattern: bytes[0]))
            for byte in bytes.dropFirst() { value = value << 8 | Int64(byte) }
            return value
        }
        var value: Int64 = 0
        let isNegative = bytes.first == UInt8(ascii: "-")
        var index = isNegative ? 1 : 0
        guard index < bytes.count else { throw .decodingFailed(String(decoding: bytes, as: UTF8.self), as: "Int64") }
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

    /// A `timestamptz` column, read without a `String`: the same `Date` as
    /// `Date(postgresText:)` gives for its text form.
    public func date(at column: Int) throws(PostgresError) -> Date {
        let bytes = try nonNull(column, as: "Date")
        if isBinary(column) {
            // Microseconds since 2000-01-01 UTC; the extremes are ±infinity.
            let microseconds = try integer(at: column)
            switch microseconds {
            case .max: return .distantFuture
            case .min: return .distantPast
            default:
                // Whole seconds and microseconds, combined as the text parser does.
                let (seconds, fraction) = microseconds.quotientAndRemainder(dividingBy: 1_000_000)
                let (whole, micros) = fraction < 0 ? (seconds - 1, fraction + 1_000_000) : (seconds, fraction)
                return Date(timeIntervalSince1970: Double(whole + Self.secondsFrom1970To2000) + Double(micros) / 1_000_000)
            }
        }
        if let date = TimestampParser.parse(utf8: bytes) { return date }
        // `infinity` and the like, and what does not parse.
        return try Date(postgresText: String(decoding: bytes, as: UTF8.self))
    }

    /// 2000-01-01T00:00:00Z, PostgreSQL's epoch, in seconds since 1970.
    static let secondsFrom1970To2000: Int64 = 946_684_800

    private func nonNull(_ column: Int, as type: String) throws(PostgresError) -> UnsafeBufferPointer<UInt8> {
        let bytes = try bytes(at: column)
        guard !isNull(at: column) else {
            throw PostgresError(code: .decoding, message: "column \(String(cString: PQfname(result, Int32(column)))) is NULL")
        }
        return bytes
    }
}
