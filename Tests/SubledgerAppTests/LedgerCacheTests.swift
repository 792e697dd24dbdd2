import EventStore
import Foundation
import Ledger
@testable import SubledgerApp
import SubledgerAppTesting
import TestSupport
import Testing

@Suite("Ledger cache")
struct LedgerCacheTests {
    /// A fresh database, and a writer and a reader sharing a cache of their own.
    static func cached(minimumVersion: Int64) async throws
        -> (AppDependencies, LedgerCache, LedgerWriter, SubscriberReader) {
        let dependencies = try await makeDependencies()
        let cache = LedgerCache(budget: 60_000, minimumVersion: minimumVersion)
        var writer = LedgerWriter(dependencies)
        writer.ledgerCache = cache
        var reader = SubscriberReader(dependencies)
        reader.ledgerCache = cache
        return (dependencies, cache, writer, reader)
    }

    /// Random histories written through a writer that keeps ledgers in
    /// memory, with a second writer (another process: no cache) appending to
    /// the same streams: after every step the ledger held equals a fold of
    /// the stored stream up to its version, a read answers as a fold of the
    /// whole stream does, and a write decides from the whole history.
    ///
    /// Dates carry sub-millisecond parts and auto-renew changes are dated by
    /// the writer's clock: the store keeps milliseconds, so a ledger kept
    /// with the events as decided, not as stored, differs from the fold.
    @Test(arguments: [UInt64(1), 2, 3])
    func aKeptLedgerEqualsAFoldOfTheStoredStream(seed: UInt64) async throws {
        let (dependencies, cache, writer, cachedReader) = try await Self.cached(minimumVersion: 4)
        defer { Task { await dependencies.pool.close() } }
        var reader = cachedReader
        var other = LedgerWriter(dependencies)
        other.ledgerCache = nil
        let now = date("2025-06-01T00:00:00Z")
        reader.now = { now }
        var random = SplitMix64(seed: seed)
        let start = date("2025-01-01T00:00:00Z")
        var transactions: [String: [String]] = [:]
        var sent: [String: [FactRequest]] = [:]

        func stored(_ subscriberID: String, upTo version: Int64 = .max) async throws -> SubscriberLedger {
            let events = try await dependencies.store.readStream(SubscriberStreams.streamID(for: subscriberID))
                .filter { $0.streamVersion <= version }
            return SubscriberLedger(subscriberID: subscriberID, events: try events.map(SubscriberStreams.ledgerEvent))
        }

        for step in 0..<160 {
            let subscriberID = "c\(Int.random(in: 0..<3, using: &random))"
            let original = "\(subscriberID)-o"
            let at = start + Double(step) * 3600 + Double(Int.random(in: 0..<1000, using: &random)) / 1_000_000
            let request: FactRequest
            switch Int.random(in: 0..<10, using: &random) {
            case _ where transactions[subscriberID] == nil:
                request = .purchase(.init(transactionID: original, productID: "com.example.pro.monthly", purchaseDate: at,
                                          expiresDate: at + 30 * 86_400))
            case 0..<5:
                request = .renewal(.init(transactionID: "\(subscriberID)-\(step)", originalTransactionID: original,
                                         productID: "com.example.pro.monthly", purchaseDate: at, expiresDate: at + 30 * 86_400))
            case 5:
                request = .purchase(.init(transactionID: "\(subscriberID)-p\(step)", productID: "com.example.pass.30d", purchaseDate: at))
            case 6:
                let known = transactions[subscriberID]!
                request = .refund(.init(transactionID: known[Int.random(in: 0..<known.count, using: &random)], revocationDate: at))
            case 7:
                request = .autoRenewChange(.init(originalTransactionID: original, autoRenew: Bool.random(using: &random)))
            default:
                let earlier = sent[subscriberID]!
                request = earlier[Int.random(in: 0..<earlier.count, using: &random)]
            }
            _ = try await (Bool.random(using: &random) ? writer : other).record(request, subscriberID: subscriberID)
            switch request {
            case .purchase(let purchase): transactions[subscriberID, default: []].append(purchase.transactionID)
            case .renewal(let renewal): transactions[subscriberID, default: []].append(renewal.transactionID)
            default: break
            }
            sent[subscriberID, default: []].append(request)

            if let held = cache.ledgers([subscriberID], use: .share)[subscriberID] {
                #expect(held.ledger == (try await stored(subscriberID, upTo: held.version)), "seed \(seed), step \(step)")
            }
            if step % 4 == 0 {
                let whole = try await stored(subscriberID)
                for instant in [nil, now, at - 86_400, at + 86_400] {
                    var state = try await reader.state(of: subscriberID, at: instant)
                    state.reminders = []
                    #expect(state == whole.state(at: instant ?? now, catalog: reader.catalog), "seed \(seed), step \(step)")
                }
            }
        }
        #expect(cache.count.ledgers == 3, "every subscriber's ledger is long enough to be kept")
        for subscriberID in ["c0", "c1", "c2"] {
            // A write after the other writer's events: decided from the whole history.
            let again = try await writer.record(sent[subscriberID]![0], subscriberID: subscriberID)
            #expect(again.isDuplicate)
            let held = try #require(cache.ledgers([subscriberID], use: .share)[subscriberID])
            let whole = try await stored(subscriberID)
            #expect(held.ledger == whole)
        }
    }

    /// A stream shorter than the ledger held (a database restored behind a
    /// running service) is read again from its events, not served from memory.
    @Test func aStreamShorterThanTheLedgerHeldIsReadAgain() async throws {
        let (dependencies, cache, writer, reader) = try await Self.cached(minimumVersion: 2)
        defer { Task { await dependencies.pool.close() } }
        let start = date("2025-01-01T00:00:00Z")
        for index in 0..<6 {
            _ = try await writer.record(.purchase(.init(transactionID: "t\(index)", productID: "com.example.level2",
                                                        purchaseDate: start + Double(index))), subscriberID: "restored")
        }
        #expect(cache.ledgers(["restored"], use: .share)["restored"]?.version == 6)
        let streamID = SubscriberStreams.streamID(for: "restored")
        try await dependencies.pool.withConnection { connection in
            try await connection.withTransaction { connection in
                // A stream's version is its last event's (sql/0044).
                try await connection.query("DELETE FROM events WHERE stream_number = (SELECT number FROM streams WHERE stream_id = \(streamID)) AND stream_version > 3")
            }
        }
        let state = try await reader.state(of: "restored", at: start + 3600)
        #expect(state.purchases.map(\.transactionID).sorted() == ["t0", "t1", "t2"])
        #expect(cache.ledgers(["restored"], use: .share)["restored"]?.version == 3)
    }

    /// A ledger held in memory is read on from its version: the lookup sends
    /// only the events appended since (here by another process), not the
    /// stream again. (The ledger would absorb a repeated event, its key being
    /// known, so a read that ignored the version held would answer the same
    /// while fetching and decoding the whole history every time.)
    @Test func aHeldLedgerIsReadOnFromItsVersion() async throws {
        let (dependencies, cache, writer, _) = try await Self.cached(minimumVersion: 2)
        defer { Task { await dependencies.pool.close() } }
        var other = LedgerWriter(dependencies)
        other.ledgerCache = nil
        let start = date("2025-01-01T00:00:00Z")
        func purchase(_ index: Int) -> FactRequest {
            .purchase(.init(transactionID: "t\(index)", productID: "com.example.level2", purchaseDate: start + Double(index)))
        }
        for index in 0..<6 { _ = try await writer.record(purchase(index), subscriberID: "held") }
        for index in 6..<8 { _ = try await other.record(purchase(index), subscriberID: "held") }
        var held = cache.ledgers(["held"], use: .share)
        #expect(held["held"]?.version == 6)

        let loaded = try await dependencies.pool.withConnection { connection in
            let rows = try await connection.query(SubscriberSnapshots.loadStatement(["held"], unlessCached: nil, held: held))
            #expect(try rows.map { try $0.decode(Int64?.self, at: 4) } == [7, 8])
            return try await SubscriberSnapshots.ledgers(from: rows, unlessCached: nil, held: &held, on: connection)
        }
        let events = try await dependencies.store.readStream(SubscriberStreams.streamID(for: "held"))
        #expect(loaded["held"]?.version == 8)
        #expect(loaded["held"]?.ledger == SubscriberLedger(subscriberID: "held", events: try events.map(SubscriberStreams.ledgerEvent)))
    }
}
