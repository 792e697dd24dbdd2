import Foundation
import Postgres
import Testing
import TestSupport

@Suite("Prepared statements")
struct PreparedStatementTests {
    /// The statements this session holds prepared, by text.
    func preparedTexts(_ connection: Connection) async throws -> [String] {
        try await connection.query("SELECT statement FROM pg_prepared_statements ORDER BY statement")
            .map { try $0.decode(String.self, at: 0) }
    }

    /// A text seen a second time is prepared, and runs by name after; a
    /// one-off text and DDL never are.
    @Test func aStatementRunTwiceIsPreparedAndAnswersTheSame() async throws {
        let connection = try await Connection.connect(to: try await TestDatabase.make())
        defer { connection.close() }
        try await connection.query("CREATE TABLE t (id text PRIMARY KEY, n integer)")
        try await connection.query("CREATE INDEX t_n ON t (n)")
        for index in 0..<5 { try await connection.query("INSERT INTO t VALUES (\("k\(index)"), \(index))") }
        let lookup = { (id: String) async throws -> Int? in
            try await connection.query("SELECT n FROM t WHERE id = \(id)").first?.decode(Int.self, at: 0)
        }
        #expect(try await lookup("k1") == 1)
        #expect(try await lookup("k2") == 2)
        #expect(try await lookup("k3") == 3)
        #expect(try await lookup("nope") == nil)
        let texts = try await preparedTexts(connection)
        #expect(texts.contains("SELECT n FROM t WHERE id = $1"))
        #expect(texts.contains("INSERT INTO t VALUES ($1, $2)"))
        #expect(!texts.contains { $0.hasPrefix("CREATE") })
        #expect(!texts.contains { $0.contains("pg_prepared_statements") }, "seen once: not prepared")
    }

    /// A statement that may not be prepared is planned on every run.
    @Test func aStatementThatMayNotBePreparedNeverIs() async throws {
        let connection = try await Connection.connect(to: try await TestDatabase.make())
        defer { connection.close() }
        try await connection.query("CREATE TABLE t (id integer PRIMARY KEY)")
        for id in 0..<3 {
            var lookup: PostgresQuery = "SELECT id FROM t WHERE id = \(id)"
            lookup.mayPrepare = false
            _ = try await connection.pipeline([lookup])
            _ = try await connection.query(lookup)
        }
        #expect(try await preparedTexts(connection).isEmpty)
    }

    /// A statement prepared inside a pipeline that fails is forgotten: the
    /// next run prepares it again rather than naming one that does not exist.
    @Test func aFailedPipelineForgetsWhatItPrepared() async throws {
        let connection = try await Connection.connect(to: try await TestDatabase.make())
        defer { connection.close() }
        try await connection.query("CREATE TABLE t (id integer PRIMARY KEY)")
        let insert = { (id: Int) -> PostgresQuery in "INSERT INTO t VALUES (\(id))" }
        let select: PostgresQuery = "SELECT count(*) FROM t"
        _ = try await connection.pipeline([insert(1), select])
        // Seen twice now: both are prepared in this pipeline, whose first statement fails.
        await #expect(throws: PostgresError.self) { try await connection.pipeline([insert(1), select]) }
        let rows = try await connection.pipeline([insert(2), select])
        #expect(try rows[1].first?.decode(Int.self, at: 0) == 2)
        let again = try await connection.pipeline([insert(3), select])
        #expect(try again[1].first?.decode(Int.self, at: 0) == 3)
        #expect(try await preparedTexts(connection).contains("SELECT count(*) FROM t"))
    }

    /// A table changed under a prepared statement so its rows change shape:
    /// the server refuses that statement once, and it is prepared again.
    @Test func aStatementWhoseRowsChangedShapeIsPreparedAgain() async throws {
        let connection = try await Connection.connect(to: try await TestDatabase.make())
        defer { connection.close() }
        try await connection.query("CREATE TABLE t (id integer PRIMARY KEY)")
        try await connection.query("INSERT INTO t VALUES (1)")
        for _ in 0..<3 { #expect(try await connection.query("SELECT * FROM t").columns == ["id"]) }
        try await connection.query("ALTER TABLE t ADD COLUMN note text")
        var columns: [String] = []
        for _ in 0..<3 {
            if let rows = try? await connection.query("SELECT * FROM t") { columns = rows.columns }
        }
        #expect(columns == ["id", "note"])
    }

    /// A value holding a NUL is refused by a prepared statement as by an
    /// unnamed one, never cut short.
    @Test func aNULIsRefusedByAPreparedStatementToo() async throws {
        let connection = try await Connection.connect(to: try await TestDatabase.make())
        defer { connection.close() }
        try await connection.query("CREATE TABLE t (id text PRIMARY KEY)")
        try await connection.query("INSERT INTO t VALUES (\("T1"))")
        for _ in 0..<3 { _ = try await connection.query("SELECT id FROM t WHERE id = \("T1")") }
        let refused = await #expect(throws: PostgresError.self) {
            try await connection.query("SELECT id FROM t WHERE id = \("T1\u{0}x")")
        }
        #expect(refused?.sqlState?.rawValue.hasPrefix("22") == true)
    }
}
