/// The rows of one statement's result, copied out of libpq so the `PGresult`
/// can be freed at once.
public struct PostgresRows: Sendable, Sequence {
    public let columns: [String]
    public let rows: [PostgresRow]
    /// `PQcmdTuples`: rows inserted, updated or deleted, when the command reports it.
    public let affectedRows: Int

    public init(columns: [String], rows: [PostgresRow], affectedRows: Int) {
        self.columns = columns
        self.rows = rows
        self.affectedRows = affectedRows
    }

    public var count: Int { rows.count }
    public var first: PostgresRow? { rows.first }
    public var isEmpty: Bool { rows.isEmpty }
    public func makeIterator() -> IndexingIterator<[PostgresRow]> { rows.makeIterator() }
}

/// One result row; values in PostgreSQL's text format, `nil` for NULL.
public struct PostgresRow: Sendable {
    let columnIndex: ColumnIndex
    public let values: [String?]

    init(columnIndex: ColumnIndex, values: [String?]) {
        self.columnIndex = columnIndex
        self.values = values
    }

    /// Decodes a non-NULL column.
    public func decode<T: PostgresDecodable>(_ type: T.Type = T.self, at index: Int) throws(PostgresError) -> T {
        guard index < values.count else {
            throw PostgresError(code: .decoding, message: "no column at index \(index)")
        }
        guard let text = values[index] else {
            throw PostgresError(code: .decoding, message: "column \(columnIndex.names[index]) is NULL")
        }
        return try T(postgresText: text)
    }

    /// Decodes a column that may be NULL.
    public func decode<T: PostgresDecodable>(_ type: T?.Type = T?.self, at index: Int) throws(PostgresError) -> T? {
        guard index < values.count else {
            throw PostgresError(code: .decoding, message: "no column at index \(index)")
        }
        guard let text = values[index] else { return nil }
        return try T(postgresText: text)
    }

    public func decode<T: PostgresDecodable>(_ type: T.Type = T.self, column name: String) throws(PostgresError) -> T {
        try decode(type, at: try columnIndex.index(of: name))
    }

    public func decode<T: PostgresDecodable>(_ type: T?.Type = T?.self, column name: String) throws(PostgresError) -> T? {
        try decode(type, at: try columnIndex.index(of: name))
    }
}

/// Column names shared by all rows of a result.
final class ColumnIndex: Sendable {
    let names: [String]
    let positions: [String: Int]

    init(names: [String]) {
        self.names = names
        var positions = [String: Int]()
        for (index, name) in names.enumerated() where positions[name] == nil { positions[name] = index }
        self.positions = positions
    }

    func index(of name: String) throws(PostgresError) -> Int {
        guard let index = positions[name] else {
            throw PostgresError(code: .decoding, message: "no column named \(name)")
        }
        return index
    }
}
