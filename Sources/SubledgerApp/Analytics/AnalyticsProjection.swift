import EventStore
import Foundation
import Ledger
import Postgres
import Synchronization

/// The subscription analytics (docs/decisions/0006-analytics-projection.md):
/// for each subscriber a batch touches, its contribution is computed from
/// its whole ledger, compared with the one stored last time, and only the
/// difference is added to the day, year and cohort sums. A late fact (a
/// refund weeks after the purchase, last year's import) changes the
/// subscriber's contribution on the days it concerns and nowhere else.
/// Since the sums are sums of contributions, and a contribution depends only
/// on the subscriber's stream, a rebuild equals the live tables.
public struct AnalyticsProjection: EventConsumer {
    public static let consumerName = "analytics"

    public var name: String { Self.consumerName }
    let catalog: Catalog
    let keyring = SubscriberKeyring()
    /// What a streamwise rebuild's load has summed so far (written once, at its end).
    let loaded = LoadedSums()

    public init(catalog: Catalog) {
        self.catalog = catalog
    }

    public func handle(_ events: [RecordedEvent], into tables: ProjectionTables, on connection: Connection) async throws {
        let (opened, erased) = try await SubscriberStreams.ledgers(of: events, on: connection)
        var ledgers = erased
        for (pseudonym, stream) in opened { ledgers[pseudonym] = stream.ledger }
        guard !ledgers.isEmpty else { return }
        let stored = try await AnalyticsRows.contributions(of: Array(ledgers.keys), in: tables, on: connection)
        var sums: [AnalyticsRows.Cell: Int64] = [:]
        var changed: [(pseudonym: String, items: [UInt8]?)] = []
        for (pseudonym, ledger) in ledgers {
            let items = ledger.analyticsContribution(catalog: catalog)
            let encoded = AnalyticsContributionCoding.encode(items)
            let before = stored[pseudonym]
            guard encoded != before else { continue }
            // A contribution that does not decode (a format this version did
            // not write) cannot be subtracted: the sums need a rebuild.
            if let before {
                guard let old = AnalyticsContributionCoding.decode(before) else {
                    throw AnalyticsContributionUnreadable(pseudonym: pseudonym)
                }
                AnalyticsRows.add(old, times: -1, to: &sums)
            }
            AnalyticsRows.add(items, times: 1, to: &sums)
            changed.append((pseudonym, items.isEmpty ? nil : encoded))
        }
        guard !changed.isEmpty else { return }
        _ = try await connection.pipeline(AnalyticsRows.additions(sums, into: tables) + AnalyticsRows.storing(changed, into: tables))
    }

    public func reset(on connection: Connection) async throws {
        try await AnalyticsRows.deleteAll(on: connection)
    }
}

final class LoadedSums: Sendable {
    let sums = Mutex<[AnalyticsRows.Cell: Int64]>([:])
}

struct AnalyticsContributionUnreadable: Error, CustomStringConvertible {
    let pseudonym: String
    var description: String {
        "a stored analytics contribution (\(pseudonym)) is not in a format this version reads: run `subledger rebuild analytics`"
    }
}

/// A rebuild reads the log stream by stream: each stream's contribution is
/// copied into the shadow contributions, and their sums are added up in
/// memory and written once the load is over.
extension AnalyticsProjection: StreamwiseConsumer {
    public struct LoadedPart: Sendable {
        var contributions = CopyBinaryRows()
        var sums: [AnalyticsRows.Cell: Int64] = [:]
    }

    public var streamPrefix: String { SubscriberStreams.prefix }
    public var tables: [String] { AnalyticsRows.tables }

    public func prepareLoad(on connection: Connection) async throws { try await keyring.load(on: connection) }

    public func finishLoad() {
        keyring.clear()
        loaded.sums.withLock { $0 = [:] }
    }

    public func event(from row: StreamEventRow) throws -> RecordedLedgerEvent {
        try SubscriberStreams.ledgerEvent(row)
    }

    public func rows(for streams: consuming [StreamEvents<RecordedLedgerEvent>]) throws -> LoadedPart {
        var part = LoadedPart()
        for index in streams.indices {
            guard let (pseudonym, ledger) = try keyring.ledger(taking: &streams[index]) else { continue }
            add(ledger, pseudonym: pseudonym, to: &part)
        }
        return part
    }

    /// A subscriber's contribution, folded from their whole stream: its row and its sums.
    func add(_ ledger: SubscriberLedger, pseudonym: String, to part: inout LoadedPart) {
        let items = ledger.analyticsContribution(catalog: catalog)
        guard !items.isEmpty else { return }
        part.contributions.beginRow(fields: 2)
        part.contributions.append(pseudonym)
        part.contributions.append(bytes: AnalyticsContributionCoding.encode(items))
        AnalyticsRows.add(items, times: 1, to: &part.sums)
    }

    public func insert(_ parts: [LoadedPart], into tables: ProjectionTables, on connection: Connection) async throws {
        for part in parts {
            if !part.contributions.isEmpty {
                try await AnalyticsRows.copyContributions(part.contributions, into: tables, on: connection)
            }
            loaded.sums.withLock { sums in
                for (cell, value) in part.sums { sums[cell, default: 0] += value }
            }
        }
    }

    public func finishLoad(into tables: ProjectionTables, on connection: Connection) async throws {
        let sums = loaded.sums.withLock { $0 }
        _ = try await connection.pipeline(AnalyticsRows.additions(sums, into: tables, adding: false))
    }
}
