import Foundation
import Postgres
import Testing
import TestSupport

@Suite("Parameters")
struct ParameterTests {
    /// libpq reads a text-format parameter up to its first NUL; the value must
    /// reach the server whole, where it is refused, not cut to "T1" and matched.
    @Test func aStringWithAnEmbeddedNULIsRefusedNotTruncated() async throws {
        let connection = try await Connection.connect(to: try await TestDatabase.make())
        defer { connection.close() }
        try await connection.execute(unsafeSQL: "CREATE TABLE t (id text PRIMARY KEY)")
        try await connection.query("INSERT INTO t VALUES (\("T1"))")

        let lookup = await #expect(throws: PostgresError.self) {
            try await connection.query("SELECT id FROM t WHERE id = \("T1\u{0}x")")
        }
        #expect(lookup?.code == .server)
        #expect(lookup?.sqlState == .characterNotInRepertoire || lookup?.sqlState == .untranslatableCharacter)

        let insert = await #expect(throws: PostgresError.self) {
            try await connection.query("INSERT INTO t VALUES (\("T2\u{0}"))")
        }
        #expect(insert?.sqlState?.rawValue.hasPrefix("22") == true)

        // In a pipeline too, and nothing of it stays.
        let pipelined = await #expect(throws: PostgresError.self) {
            try await connection.pipeline([
                "INSERT INTO t VALUES (\("T3"))", "INSERT INTO t VALUES (\("T4\u{0}y"))",
            ])
        }
        #expect(pipelined?.sqlState?.rawValue.hasPrefix("22") == true)

        // A NUL in a JSON document is refused the same way.
        await #expect(throws: PostgresError.self) {
            try await connection.query("SELECT \(PostgresJSON(text: "{\"a\": \"b\u{0}\"}"))::jsonb")
        }

        let ids = try await connection.query("SELECT id FROM t ORDER BY id").map { try $0.decode(String.self, at: 0) }
        #expect(ids == ["T1"])
    }

    /// Compared byte for byte: Swift's `==` would call "é" and "e\u{301}" equal.
    /// `bytea` parameters (snapshots are one each, up to megabytes) reach
    /// the server byte for byte: every byte value, empty, and a megabyte.
    @Test func byteaParametersRoundTripExactly() async throws {
        let connection = try await Connection.connect(to: try await TestDatabase.make())
        defer { connection.close() }
        var random = SplitMix64(seed: 9)
        let large = Data((0..<1_000_003).map { _ in UInt8.random(in: 0...255, using: &random) })
        for value in [Data(), Data((0...255).map { UInt8($0) }), large] {
            let back = try await connection.query("""
                SELECT \(value)::bytea, length(\(value)::bytea), encode(substring(\(value)::bytea FROM 1 FOR 4096), 'hex')
                """)
            #expect(try back.first?.decode(Data.self, at: 0) == value)
            #expect(try back.first?.decode(Int.self, at: 1) == value.count)
            // What the server holds, against hex written another way than the encoder's.
            #expect(try back.first?.decode(String.self, at: 2) == value.prefix(4096).map { String(format: "%02x", $0) }.joined())
        }
    }

    @Test func multiByteUTF8RoundTripsExactly() async throws {
        let connection = try await Connection.connect(to: try await TestDatabase.make())
        defer { connection.close() }
        try await connection.execute(unsafeSQL: "CREATE TABLE t (n integer PRIMARY KEY, value text)")
        let values = [
            "héllo", "e\u{301}", "日本語のテキスト", "𝄞 clef", "👩‍👩‍👧‍👦", "Ωμέγα", "tab\there\nnewline",
            "\u{7F}\u{80}\u{FFFD}", "quote ' and \\ backslash", "",
        ]
        for (n, value) in values.enumerated() {
            let echoed = try await connection.query("SELECT \(value)::text, octet_length(\(value))").first
            #expect(try echoed?.decode(String.self, at: 0).utf8.elementsEqual(value.utf8) == true)
            #expect(try echoed?.decode(Int.self, at: 1) == value.utf8.count)
            try await connection.query("INSERT INTO t VALUES (\(n), \(value))")
        }
        let stored = try await connection.query("SELECT value FROM t ORDER BY n").map { try $0.decode(String.self, at: 0) }
        #expect(stored.map { Array($0.utf8) } == values.map { Array($0.utf8) })
        // The precomposed and decomposed spellings are different values to the server.
        let matches = try await connection.query("SELECT count(*) FROM t WHERE value = \("é")").first?.decode(Int.self, at: 0)
        #expect(matches == 0)
    }

    /// Strings still take their type from where they stand, as text-format
    /// parameters always have (binary ones would not).
    @Test func stringParametersStillTakeTheirTypeFromTheStatement() async throws {
        let connection = try await Connection.connect(to: try await TestDatabase.make())
        defer { connection.close() }
        try await connection.execute(unsafeSQL: "CREATE TABLE t (id uuid, n integer, at timestamptz, doc jsonb)")
        let id = UUID()
        try await connection.query("""
            INSERT INTO t VALUES (\(id.uuidString), \("7"), \("2026-01-02T03:04:05Z"), \(#"{"k": 1}"#))
            """)
        let row = try #require(try await connection.query("""
            SELECT id, n, at, doc->>'k', \(String(42))::xid8::text FROM t WHERE id = \(id.uuidString) AND n = \("7")
            """).first)
        #expect(try row.decode(UUID.self, at: 0) == id)
        #expect(try row.decode(Int.self, at: 1) == 7)
        #expect(try row.decode(Date.self, at: 2) == Date(timeIntervalSince1970: 1_767_323_045))
        #expect(try row.decode(String.self, at: 3) == "1")
        #expect(try row.decode(String.self, at: 4) == "42")
        let nothing: String? = nil
        #expect(try await connection.query("SELECT \(nothing)::text IS NULL").first?.decode(Bool.self, at: 0) == true)
    }

    /// The hand-written timestamp text is the one `String(format:)` wrote,
    /// for instants across the four-digit years, and reads back exactly.
    @Test func timestampParametersAreISOWithMicroseconds() throws {
        var generator = SplitMix64(seed: 11)
        var instants: [Date] = [Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: -0.000_001),
                                Date(timeIntervalSince1970: 951_782_399.999_999), .distantFuture, .distantPast]
        for _ in 0..<2000 {
            instants.append(Date(timeIntervalSince1970: Double(Int64(generator.next() % 400_000_000_000)) / 1000 - 60_000_000_000))
        }
        for date in instants {
            let micros = (date.timeIntervalSince1970 * 1_000_000).rounded()
            let seconds = Int64((micros / 1_000_000).rounded(.down))
            var time = time_t(seconds)
            var parts = tm()
            gmtime_r(&time, &parts)
            let expected = String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                                  parts.tm_hour, parts.tm_min, parts.tm_sec, Int64(micros) - seconds * 1_000_000)
            #expect(date.postgresText == expected)
            if (1...9999).contains(Int(parts.tm_year) + 1900) {
                #expect(try abs(Date(postgresText: date.postgresText).timeIntervalSince(date)) < 0.000_001)
            }
        }
    }
}
