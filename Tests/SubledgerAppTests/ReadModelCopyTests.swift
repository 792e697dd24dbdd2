import Foundation
import JSON
@testable import Ledger
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
import TestSupport
import Testing

@Suite("Read-model COPY rows")
struct ReadModelCopyTests {
    /// Rows with every awkward character (for text, arrays and JSON), NULL,
    /// empty arrays and millisecond dates before and after 1970 and 2000:
    /// what the rebuild's binary COPY writes is what the live projection's
    /// JSON insert writes.
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

    /// Mostly recent; one in five anywhere from 1900 to 2100, on both
    /// sides of 1970 and of 2000 (where a binary timestamp's count starts).
    mutating func date() -> Date {
        let range: ClosedRange<Int64> = Int.random(in: 0..<5, using: &random) == 0
            ? -2_208_988_800_000...4_102_444_800_000 : 1_500_000_000_000...1_900_000_000_000
        return RFC3339.date(milliseconds: Int64.random(in: range, using: &random))
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
