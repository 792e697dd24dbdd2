import Foundation
@testable import Ledger
import Postgres
@testable import SubledgerApp
import TestSupport
import Testing

@Suite("Read-model COPY rows")
struct ReadModelCopyTests {
    /// Rows with every awkward character COPY text and array literals
    /// escape, NULL and millisecond dates: what the rebuild's COPY writes is
    /// what the live projection's JSON insert writes.
    @Test func theRebuildsCopyWritesWhatTheLiveInsertWrites() async throws {
        var generator = ReadModelGenerator(seed: 5)
        let models = (0..<60).map { generator.model(index: $0) }
        let copied = try await makeDependencies()
        let inserted = try await makeDependencies()
        defer { Task { await copied.pool.close(); await inserted.pool.close() } }
        try await copied.pool.withConnection { try await ReadModelRows.insert(models, on: $0) }
        try await inserted.pool.withTransaction { try await ReadModelRows.replace(models, on: $0) }
        let rows = try await copied.readModelRows()
        #expect(rows.count > 200)
        #expect(rows == (try await inserted.readModelRows()))
        // The arrays, too, element by element.
        let arrays = "SELECT subscriber_id, \"group\", series, entitlements FROM subscriptions ORDER BY 1, 2, 3"
        let copiedArrays = try await copied.pool.query(PostgresQuery(unsafeSQL: arrays)).map { try $0.decode(String.self, at: 3) }
        #expect(copiedArrays == (try await inserted.pool.query(PostgresQuery(unsafeSQL: arrays)).map { try $0.decode(String.self, at: 3) }))
    }

    /// The COPY dates are `RFC3339.format`'s, byte for byte.
    @Test func datesAreWrittenAsTheJSONEncoderWritesThem() {
        var random = SplitMix64(seed: 3)
        let first = RFC3339.firstInstantOfYearOne * 1000, last = RFC3339.firstInstantOfYear10000 * 1000 - 1
        for index in 0..<20_000 {
            var milliseconds = Int64.random(in: first...last, using: &random)
            if index % 3 == 0 { milliseconds = milliseconds / 1000 * 1000 }
            let date = index % 100 == 0 ? [Date.distantPast, .distantFuture, Date(timeIntervalSince1970: 0.0004)][index / 100 % 3]
                : RFC3339.date(milliseconds: milliseconds)
            var bytes: [UInt8] = []
            RFC3339.append(date, to: &bytes)
            #expect(String(decoding: bytes, as: UTF8.self) == RFC3339.format(date))
        }
    }
}

/// Read models of generated rows whose text holds tabs, newlines, carriage
/// returns, backslashes, quotes, braces, commas, `NULL`, `\.` and non-ASCII.
struct ReadModelGenerator {
    var random: SplitMix64

    init(seed: UInt64) {
        random = SplitMix64(seed: seed)
    }

    mutating func text() -> String {
        ["plain", "tab\there", "new\nline", "carriage\rreturn", #"back\slash"#, #"\."#, #"quote"d"#, "{brace}", "a,b",
         "NULL", "", " spaced ", "café", "🎉", #"\N"#, "\\\\"].randomElement(using: &random)!
    }

    mutating func date() -> Date {
        RFC3339.date(milliseconds: Int64.random(in: 1_500_000_000_000...1_900_000_000_000, using: &random))
    }

    mutating func maybeDate() -> Date? { Bool.random(using: &random) ? date() : nil }

    /// An open end, or one after `start` (the tables index the range).
    mutating func end(after start: Date) -> Date? {
        Bool.random(using: &random) ? start + Double(Int.random(in: 1...86_400_000, using: &random)) / 1000 : nil
    }

    mutating func model(index: Int) -> SubscriberReadModel {
        var model = SubscriberReadModel(subscriberID: "s\(index)-" + text())
        let environment: Environment = index % 2 == 0 ? .production : .sandbox
        for row in 0..<Int.random(in: 0...3, using: &random) {
            model.subscriptions.append(.init(
                environment: environment, group: "g\(row)" + text(), series: text(), productID: text(),
                type: Bool.random(using: &random) ? .autoRenewable : .nonRenewing, originalTransactionID: text(),
                latestTransactionID: text(), startsAt: maybeDate(), expiresAt: maybeDate(), graceEndsAt: maybeDate(),
                revokedAt: maybeDate(), autoRenew: Bool.random(using: &random),
                entitlements: (0..<Int.random(in: 0...3, using: &random)).map { _ in text() }))
            model.periods.append(.init(environment: environment, group: text(), productID: text(), transactionID: "t\(row)" + text(),
                                       originalTransactionID: text(), start: date(), end: date()))
            let start = date() + Double(row)
            model.entitlements.append(.init(environment: environment, entitlement: text(), start: start,
                                            end: end(after: start), productID: text(), source: text()))
            model.products.append(.init(environment: environment, productID: text(), type: .free, group: text(),
                                        start: start, end: end(after: start), source: text()))
        }
        return model
    }
}
