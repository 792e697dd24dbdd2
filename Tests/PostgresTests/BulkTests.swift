import Foundation
import Postgres
import Testing
import TestSupport

@Suite("Bulk reads and writes")
struct BulkTests {
    static let awkward = ["plain", "tab\there", "new\nline", "carriage\rreturn", #"back\slash"#, #"\."#, #"\N"#, "NULL", "",
                          #"quote"d"#, "{brace}", "a,b", " spaced ", "café", "🎉"]

    /// Up to three of `awkward`, every one of them in some row's array.
    static func tags(_ index: Int) -> [String] { Array(awkward.dropFirst(index).prefix(index % 4)) }

    /// Values read in place, in text or binary form, are what `query`
    /// decodes from its strings: integers of every width and sign, dates on
    /// both sides of 1970 and 2000, offsets, infinity; also through a cursor.
    @Test func rowsFoldedInPlaceReadAsTheStringRowsDo() async throws {
        let connection = try await Connection.connect(to: try await TestDatabase.make())
        defer { connection.close() }
        let select = """
            SELECT n, n::text || 'é\tß', timestamptz '2026-11-22 05:19:05.123456+00' - n * interval '9 days 1 millisecond 7 microseconds',
                   NULL::bigint, (n % 30000)::integer, (n % 300)::smallint
            FROM generate_series(-5000::bigint, 5000) AS n
            UNION ALL SELECT 9223372036854775807, '', '-infinity', NULL, 2147483647, 32767
            UNION ALL SELECT -9223372036854775808, '', 'infinity', NULL, -2147483648, -32768
            UNION ALL SELECT 1, '', '2024-02-29 23:59:59.999999+05:30', NULL, 0, 0
            UNION ALL SELECT 2, '', '1969-12-31 23:59:59.000001+00', NULL, 0, 0
            ORDER BY 1, 3
            """
        let sql = PostgresQuery(unsafeSQL: select)
        struct Value: Equatable, Sendable {
            var number: Int64, text: String, date: Date, integer: Int64, small: Int64
        }
        let expected = try await connection.query(sql).map { row in
            Value(number: try row.decode(Int64.self, at: 0), text: try row.decode(String.self, at: 1),
                  date: try row.decode(Date.self, at: 2), integer: try row.decode(Int64.self, at: 4),
                  small: try row.decode(Int64.self, at: 5))
        }
        struct Read: Sendable {
            var values: [Value] = []
            var nulls = 0
            var refusals = 0
        }
        for binary in [false, true] {
            let read = try await connection.query(sql, into: Read(), binaryResults: binary) { read, row throws(PostgresError) in
                read.values.append(Value(number: try row.integer(at: 0), text: String(decoding: try row.bytes(at: 1), as: UTF8.self),
                                         date: try row.date(at: 2), integer: try row.integer(at: 4), small: try row.integer(at: 5)))
                if row.isNull(at: 3) { read.nulls += 1 }
                // NULL is not an integer, and there is no seventh column.
                if (try? row.integer(at: 3)) == nil { read.refusals += 1 }
                if (try? row.bytes(at: 6)) == nil { read.refusals += 1 }
            }
            #expect(read.values == expected, "binary: \(binary)")
            #expect(read.nulls == expected.count)
            #expect(read.refusals == 2 * expected.count)
        }
        // A cursor's FETCH answers in the form asked for, too.
        let fetched = try await connection.withTransaction { connection in
            try await connection.query(PostgresQuery(unsafeSQL: "DECLARE c NO SCROLL CURSOR FOR " + select))
            return try await connection.query("FETCH FORWARD 100000 FROM c", into: [Value](), binaryResults: true) { values, row throws(PostgresError) in
                values.append(Value(number: try row.integer(at: 0), text: String(decoding: try row.bytes(at: 1), as: UTF8.self),
                                    date: try row.date(at: 2), integer: try row.integer(at: 4), small: try row.integer(at: 5)))
            }
        }
        #expect(fetched == expected)
        await #expect(throws: PostgresError.self) {
            try await connection.query("SELECT 1/0", into: 0) { count, _ throws(PostgresError) in count += 1 }
        }
    }

    /// COPY's binary format: text holding tabs, newlines, backslashes,
    /// quotes, braces, `\N` and `NULL`, NULL, booleans, empty and non-empty
    /// arrays, and timestamps on both sides of 1970 and
    /// 2000 (the binary count starts at 2000) come back as sent; a row
    /// with the wrong number of fields is refused whole and leaves the
    /// connection usable.
    @Test func binaryCopyLoadsRowsAsSent() async throws {
        let connection = try await Connection.connect(to: try await TestDatabase.make())
        defer { connection.close() }
        try await connection.execute(unsafeSQL: "CREATE TABLE t (n integer, label text, flag boolean, tags text[], at timestamptz)")
        let instants: [Int64] = [0, -1, 1, 946_684_800_000, 946_684_799_999, 946_684_800_001, -2_208_988_800_000, 1_709_210_096_789,
                                 4_102_444_799_999, -62_135_596_800_000]
        var rows = CopyBinaryRows()
        for (index, text) in Self.awkward.enumerated() {
            rows.beginRow(fields: 4)
            rows.append(index % 4 == 3 ? nil : text)
            rows.append(index % 2 == 0)
            rows.append(array: Self.tags(index))
            if index % 5 == 4 { rows.appendNull() } else { rows.append(unixMilliseconds: instants[index % instants.count]) }
        }
        #expect(rows.count == Self.awkward.count)
        #expect(try await connection.copy(unsafeSQL: "COPY t (label, flag, tags, at) FROM STDIN WITH (FORMAT binary)", rows: rows)
                == Self.awkward.count)
        let back = try await connection.query("""
            SELECT label, flag, array_to_json(tags)::text, (extract(epoch FROM at) * 1000000)::bigint FROM t ORDER BY ctid
            """)
        #expect(back.count == Self.awkward.count)
        for (index, row) in back.enumerated() {
            #expect(try row.decode(String?.self, at: 0) == (index % 4 == 3 ? nil : Self.awkward[index]))
            #expect(try row.decode(Bool.self, at: 1) == (index % 2 == 0))
            let tags = try JSONDecoder().decode([String].self, from: Data(try row.decode(String.self, at: 2).utf8))
            #expect(tags == Self.tags(index))
            #expect(try row.decode(Int64?.self, at: 3) == (index % 5 == 4 ? nil : instants[index % instants.count] * 1000))
        }

        var broken = CopyBinaryRows()
        broken.beginRow(fields: 2)
        broken.append("only one of two")
        let error = await #expect(throws: PostgresError.self) {
            try await connection.copy(unsafeSQL: "COPY t (label, flag) FROM STDIN WITH (FORMAT binary)", rows: broken)
        }
        #expect(error?.code == .server)
        #expect(try await connection.query("SELECT count(*) FROM t").first?.decode(Int.self, at: 0) == Self.awkward.count)
    }
}
