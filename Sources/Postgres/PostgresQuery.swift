import Foundation

/// A statement and its bind values. Every interpolated value becomes a `$n`
/// parameter; raw SQL must be spelled `unsafeRaw:` so it stands out in review.
///
///     let rows = try await connection.query("select * from streams where stream_id = \(stream)")
public struct PostgresQuery: Sendable, ExpressibleByStringInterpolation {
    public var sql: String
    /// Parameters in text format; `nil` is SQL NULL. A value is sent whole,
    /// so one holding a NUL is refused by the server rather than cut short.
    public var binds: [String?]
    /// Whether a connection may prepare the statement once it has run it
    /// before (`PreparedStatements`). Off for a statement over tables that
    /// start empty and grow under it: a plan made while they were empty
    /// (a sequential scan) would be kept, where planning each run follows
    /// their growth.
    public var mayPrepare = true

    public init(unsafeSQL sql: String, binds: [String?] = []) {
        self.sql = sql
        self.binds = binds
    }

    public init(stringLiteral value: String) {
        self.sql = value
        self.binds = []
    }

    public init(stringInterpolation: StringInterpolation) {
        self.sql = stringInterpolation.sql
        self.binds = stringInterpolation.binds
    }

    public struct StringInterpolation: StringInterpolationProtocol {
        var sql = ""
        var binds: [String?] = []

        public init(literalCapacity: Int, interpolationCount: Int) {
            sql.reserveCapacity(literalCapacity + interpolationCount * 3)
            binds.reserveCapacity(interpolationCount)
        }

        public mutating func appendLiteral(_ literal: String) { sql += literal }

        public mutating func appendInterpolation(_ value: some PostgresEncodable) {
            binds.append(value.postgresText)
            sql += "$\(binds.count)"
        }

        public mutating func appendInterpolation(_ value: (some PostgresEncodable)?) {
            binds.append(value?.postgresText)
            sql += "$\(binds.count)"
        }

        /// Splices SQL text in verbatim. Only for identifiers and fragments the
        /// program itself chose, never for input.
        public mutating func appendInterpolation(unsafeRaw fragment: String) { sql += fragment }
    }
}
