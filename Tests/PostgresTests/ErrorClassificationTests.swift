import Foundation
import Postgres
import Testing
import TestSupport

/// Data errors are the request's fault (HTTP 400); the rest are not.
@Suite("Error classification")
struct ErrorClassificationTests {
    @Test func divisionByZeroIsADataError() async throws {
        let connection = try await Connection.connect(to: try await TestDatabase.make())
        defer { connection.close() }
        let error = await #expect(throws: PostgresError.self) { try await connection.query("SELECT 1/0") }
        #expect(error?.sqlState == .divisionByZero)
        #expect(error?.isDataError == true)
    }

    @Test func aValueTheColumnTypeRefusesIsADataError() async throws {
        let connection = try await Connection.connect(to: try await TestDatabase.make())
        defer { connection.close() }
        try await connection.execute(unsafeSQL: "CREATE TABLE t (code varchar(3), n integer)")
        let tooLong = await #expect(throws: PostgresError.self) {
            try await connection.query("INSERT INTO t (code) VALUES (\("ABCD"))")
        }
        #expect(tooLong?.sqlState == .stringDataRightTruncation)
        #expect(tooLong?.isDataError == true)
        let notANumber = await #expect(throws: PostgresError.self) {
            try await connection.query("INSERT INTO t (n) VALUES (\("seven"))")
        }
        #expect(notANumber?.sqlState == .invalidTextRepresentation)
        #expect(notANumber?.isDataError == true)
    }

    /// A btree entry may not exceed about a third of a page (2704 bytes); 10 kB
    /// of random hex is far over it even after compression. The insert is
    /// refused with 54000, program_limit_exceeded.
    @Test func anIndexEntryOverTheBtreeLimitIsADataError() async throws {
        let connection = try await Connection.connect(to: try await TestDatabase.make())
        defer { connection.close() }
        try await connection.execute(unsafeSQL: "CREATE TABLE t (value text); CREATE INDEX ON t (value)")
        var generator = SplitMix64(seed: 54000)
        let value = (0..<640).map { _ in String(generator.next(), radix: 16).leftPadded(to: 16) }.joined()
        #expect(value.utf8.count == 10_240)
        let error = await #expect(throws: PostgresError.self) {
            try await connection.query("INSERT INTO t VALUES (\(value))")
        }
        #expect(error?.sqlState == .programLimitExceeded)
        #expect(error?.isDataError == true)
    }

    @Test func constraintSyntaxAndCancellationErrorsAreNotDataErrors() async throws {
        let connection = try await Connection.connect(to: try await TestDatabase.make())
        defer { connection.close() }
        try await connection.execute(unsafeSQL: "CREATE TABLE t (id text PRIMARY KEY)")
        try await connection.query("INSERT INTO t VALUES (\("a"))")
        let duplicate = await #expect(throws: PostgresError.self) { try await connection.query("INSERT INTO t VALUES (\("a"))") }
        #expect(duplicate?.sqlState == .uniqueViolation)
        #expect(duplicate?.isDataError == false)
        let syntax = await #expect(throws: PostgresError.self) { try await connection.query("SELEC 1") }
        #expect(syntax?.sqlState?.rawValue == "42601")
        #expect(syntax?.isDataError == false)
        let cancelled = await #expect(throws: PostgresError.self) {
            try await connection.execute(unsafeSQL: "SET statement_timeout = '50ms'; SELECT pg_sleep(1)")
        }
        #expect(cancelled?.sqlState == .queryCanceled)
        #expect(cancelled?.isDataError == false)
        #expect(PostgresError(code: .poolTimeout, message: "no connection").isDataError == false)
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: max(0, width - count)) + self
    }
}
