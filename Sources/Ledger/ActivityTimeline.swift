import Foundation

/// When each product (and so each entitlement) of one environment was
/// active, exactly as `state(at:)` would say at every instant, computed
/// without evaluating the whole ledger at every instant.
///
/// The state at T changes only at the dates of the facts and at the ends
/// they imply, and each kind of subscription depends on a small part of the
/// ledger, so each is swept on its own with the rules of `Evaluation`:
/// - an auto-renewable original transaction: between two dates at which a
///   transaction becomes visible, only the latest visible one counts, so its
///   status is evaluated at the dates that concern it alone;
/// - a non-renewing group: its stacking changes only when a refund, a
///   reversal, a transfer or a late-visible transaction takes effect; between
///   those, periods of later purchases start after every earlier instant, so
///   one stacking per stretch gives its periods;
/// - a non-consumable or free transaction: visible, held, not refunded.
struct ActivityTimeline {
    /// A stretch during which one product was active through one transaction.
    struct Piece {
        var start: Date
        /// nil: never ends.
        var end: Date?
        var productID: String
        var type: ProductType
        var group: String
        var source: String
    }

    let environment: Environment
    let catalog: Catalog
    private(set) var pieces: [Piece] = []
    /// Per subscription (see `autoRenewableUnit`, `nonRenewingUnit`): the
    /// start of its latest stretch of continuous access.
    private(set) var lastRunStart: [String: Date] = [:]
    /// Support grants (Production only): each entitlement given by hand,
    /// from its start until its end or its revocation.
    private(set) var grantPieces: [(entitlement: String, piece: Piece)] = []

    static func autoRenewableUnit(_ originalTransactionID: String) -> String { "o:" + originalTransactionID }
    static func nonRenewingUnit(_ group: String) -> String { "g:" + group }

    init(ledger: SubscriberLedger, catalog: Catalog, environment: Environment) {
        self.environment = environment
        self.catalog = catalog
        // The ledger keeps its transactions by original already: an
        // auto-renewable's are taken from there without another table.
        var originals: [(original: String, records: [SubscriberLedger.TransactionRecord])] = []
        var groups: [String: [SubscriberLedger.TransactionRecord]] = [:]
        var singles: [SubscriberLedger.TransactionRecord] = []
        for (original, records) in ledger.byOriginal.records {
            var renewing: [SubscriberLedger.TransactionRecord] = []
            for record in records where record.fact.environment == environment {
                let product = Evaluation.catalogProduct(of: record.fact, catalog: catalog, readingDuration: false)
                switch record.fact.productType ?? product?.type {
                case .autoRenewable?: renewing.append(record)
                case .nonRenewing?: groups[record.fact.group ?? product?.group ?? record.fact.productID, default: []].append(record)
                case .nonConsumable?, .free?: singles.append(record)
                case .consumable?, nil: break
                }
            }
            if !renewing.isEmpty { originals.append((original, renewing)) }
        }
        originals.sort { $0.original < $1.original }
        if environment == .production {
            for dated in ledger.supportGrants.values {
                let grant = dated.value
                let end = min(grant.endsAt, ledger.grantRevocations[grant.grantID]?.date ?? .distantFuture)
                guard grant.startsAt < end else { continue }
                grantPieces.append((grant.entitlement, Piece(start: grant.startsAt, end: end, productID: "", type: .nonConsumable,
                                                             group: "", source: grant.entitlementSource)))
            }
        }
        for (original, records) in originals {
            let added = sweepAutoRenewable(records, ledger: ledger)
            lastRunStart[Self.autoRenewableUnit(original)] = Self.lastRunStart(of: added)
            pieces += added
        }
        for group in groups.keys.sorted() {
            let added = sweepNonRenewing(groups[group]!, ledger: ledger)
            lastRunStart[Self.nonRenewingUnit(group)] = Self.lastRunStart(of: added)
            pieces += added
        }
        for token in ledger.playTokens(environment: environment) {
            let added = sweepGooglePlay(token, ledger: ledger)
            lastRunStart[Self.autoRenewableUnit(token)] = Self.lastRunStart(of: added)
            pieces += added
        }
        for record in singles.sorted(by: { $0.fact.transactionID < $1.fact.transactionID }) {
            var dates = Self.originalDates(record.fact.originalTransactionID, ledger: ledger)
            Self.appendTransactionDates(record, ledger: ledger, includeEnds: false, to: &dates)
            var points: [Date] = []
            Self.points(from: record.visibleFrom, until: nil, &dates, into: &points)
            evaluate(at: points, until: nil, into: &pieces) { at in
                guard let transaction = Evaluation.transaction(record, ledger: ledger, catalog: catalog, at: at),
                      transaction.refund == nil else { return nil }
                return Piece(start: at, end: nil, productID: transaction.fact.productID, type: transaction.type,
                             group: transaction.group, source: transaction.fact.transactionID)
            }
        }
    }

    // MARK: Sweeps

    /// A Play purchase token: its status changes only at the dates its
    /// states, its voiding and its replacement name.
    private func sweepGooglePlay(_ token: String, ledger: SubscriberLedger) -> [Piece] {
        var dates: [Date] = []
        for state in ledger.playPurchases[token] ?? [] {
            dates += [state.date, state.value.startTime]
            if let expiry = state.value.expiryTime { dates.append(expiry) }
        }
        if let void = ledger.playVoids[token] { dates.append(void.date) }
        for (other, states) in ledger.playPurchases where other != token {
            for state in states where state.value.linkedPurchaseToken == token {
                dates += [state.value.startTime, state.date]
            }
        }
        dates += Self.originalDates(token, ledger: ledger, includeStore: false)
        guard let from = dates.min() else { return [] }
        var points: [Date] = []
        Self.points(from: from, until: nil, &dates, into: &points)
        var pieces: [Piece] = []
        evaluate(at: points, until: nil, into: &pieces) { at in
            guard let play = Evaluation.playEvaluation(token, ledger: ledger, catalog: catalog, at: at, environment: environment),
                  play.status == .active || play.status == .grace,
                  play.product.type != .consumable else { return nil }
            return Piece(start: at, end: nil, productID: play.product.id, type: play.product.type, group: play.product.group,
                         source: play.latest.orderID ?? token)
        }
        return pieces
    }

    private func sweepAutoRenewable(_ records: [SubscriberLedger.TransactionRecord], ledger: SubscriberLedger) -> [Piece] {
        func isLater(_ left: SubscriberLedger.TransactionRecord, than right: SubscriberLedger.TransactionRecord) -> Bool {
            (left.fact.purchaseDate, left.position, left.fact.transactionID) > (right.fact.purchaseDate, right.position, right.fact.transactionID)
        }
        // Stretches with one latest visible transaction.
        var segments: [(start: Date, latest: SubscriberLedger.TransactionRecord)] = []
        var latest: SubscriberLedger.TransactionRecord?
        for record in records.sorted(by: { $0.visibleFrom < $1.visibleFrom }) {
            if latest == nil || isLater(record, than: latest!) { latest = record }
            if segments.last?.latest.fact.transactionID == latest!.fact.transactionID { continue }
            if segments.last?.start == record.visibleFrom { segments.removeLast() }
            segments.append((record.visibleFrom, latest!))
        }
        let originalDates = Self.originalDates(records[0].fact.originalTransactionID, ledger: ledger).sorted()
        var pieces: [Piece] = []
        // Reused from segment to segment: a rebuild sweeps millions of them.
        var dates: [Date] = [], points: [Date] = []
        for (index, segment) in segments.enumerated() {
            let until = index + 1 < segments.count ? segments[index + 1].start : nil
            let record = segment.latest
            dates.removeAll(keepingCapacity: true)
            Self.appendTransactionDates(record, ledger: ledger, includeEnds: true, to: &dates)
            Self.appendDates(originalDates, after: segment.start, before: until, to: &dates)
            Self.points(from: segment.start, until: until, &dates, into: &points)
            evaluate(at: points, until: until, into: &pieces) { at in
                guard let (status, group) = Evaluation.autoRenewableStatus(record, ledger: ledger, catalog: catalog, at: at),
                      status == .active || status == .grace else { return nil }
                return Piece(start: at, end: nil, productID: record.fact.productID, type: .autoRenewable,
                             group: group, source: record.fact.transactionID)
            }
        }
        return pieces
    }

    private func sweepNonRenewing(_ records: [SubscriberLedger.TransactionRecord], ledger: SubscriberLedger) -> [Piece] {
        var changes: [Date] = []
        for record in records {
            var dates: [Date] = []
            Self.appendTransactionDates(record, ledger: ledger, includeEnds: false, to: &dates)
            changes += dates.filter { $0 != record.fact.purchaseDate }
            if record.visibleFrom != record.fact.purchaseDate { changes.append(record.visibleFrom) }
        }
        for original in Set(records.map(\.fact.originalTransactionID)) {
            changes += Self.originalDates(original, ledger: ledger, includeStore: false)
        }
        let boundaries = Array(Set(changes)).sorted()
        let plainPurchases = records.filter { $0.visibleFrom == $0.fact.purchaseDate }.map(\.fact.purchaseDate).sorted()
        var pieces: [Piece] = []
        // Stretch i runs from boundaries[i - 1] (or the beginning) to boundaries[i] (or the end).
        for index in 0...boundaries.count {
            let from = index > 0 ? boundaries[index - 1] : nil
            let until = index < boundaries.count ? boundaries[index] : nil
            // Evaluate once every purchase of the stretch is visible.
            let lastPurchase = plainPurchases.last { ($0 >= from ?? .distantPast) && $0 < (until ?? .distantFuture) }
            guard let at = [from, lastPurchase].compactMap({ $0 }).max() else { continue }
            let transactions = Evaluation.sortedInPurchaseOrder(
                records.compactMap { Evaluation.transaction($0, ledger: ledger, catalog: catalog, at: at) })
            let group = transactions.first?.group ?? ""
            for period in Evaluation.stack(transactions, group: group).periods {
                let start = max(period.start, from ?? period.start)
                let end = min(period.end, until ?? period.end)
                guard start < end else { continue }
                pieces.append(Piece(start: start, end: end, productID: period.productID, type: .nonRenewing, group: group,
                                    source: period.transactionID))
            }
        }
        return pieces
    }

    /// Evaluates `activity` at each point (sorted) and appends the answers to
    /// `pieces`; each holds until the next point, the last until `until`.
    private func evaluate(at points: [Date], until: Date?, into pieces: inout [Piece], _ activity: (Date) -> Piece?) {
        for (index, point) in points.enumerated() {
            guard var piece = activity(point) else { continue }
            piece.end = index + 1 < points.count ? points[index + 1] : until
            pieces.append(piece)
        }
    }

    // MARK: Dates

    /// `from` and the dates strictly between `from` and `until`, sorted, once each.
    /// Deduplicated once sorted rather than through a `Set`: a rebuild asks
    /// this a dozen times per subscriber.
    /// `dates` is reordered; `points` is replaced.
    static func points(from: Date, until: Date?, _ dates: inout [Date], into points: inout [Date]) {
        dates.sort()
        points.removeAll(keepingCapacity: true)
        points.append(from)
        for date in dates where date > from && date < (until ?? .distantFuture) && date != points[points.count - 1] {
            points.append(date)
        }
    }

    /// Appends the dates of `sorted` strictly between `after` and `before`.
    static func appendDates(_ sorted: [Date], after: Date, before: Date?, to result: inout [Date]) {
        var low = 0, high = sorted.count
        while low < high {
            let middle = (low + high) / 2
            if sorted[middle] <= after { low = middle + 1 } else { high = middle }
        }
        while low < sorted.count, sorted[low] < (before ?? .distantFuture) {
            result.append(sorted[low])
            low += 1
        }
    }

    /// Appends the dates at which a transaction's own facts take effect (and,
    /// for an auto-renewable, the ends they give).
    static func appendTransactionDates(_ record: SubscriberLedger.TransactionRecord, ledger: SubscriberLedger, includeEnds: Bool,
                                       to dates: inout [Date]) {
        let id = record.fact.transactionID
        dates.append(record.visibleFrom)
        dates.append(record.fact.purchaseDate)
        dates += ledger.refundDates(ofOriginal: record.fact.originalTransactionID)
        if includeEnds {
            if let expires = record.fact.expiresDate { dates.append(expires) }
            for extended in ledger.extensions[id] ?? [] {
                dates.append(extended.date)
                dates.append(extended.value)
            }
        }
    }

    /// The dates at which facts about an original transaction take effect:
    /// transfers, and (with `includeStore`) the store's expiries and billing
    /// issues with their grace ends.
    static func originalDates(_ original: String, ledger: SubscriberLedger, includeStore: Bool = true) -> [Date] {
        var dates = ledger.ownership.isEmpty ? [] : Environment.allCases.flatMap { environment in
            Store.allCases.flatMap { (ledger.ownership[$0.ownershipKey(original, environment: environment)] ?? []).map(\.date) }
        }
        guard includeStore else { return dates }
        dates += (ledger.storeExpiries[original] ?? []).map(\.date)
        for issue in ledger.billingIssues[original] ?? [] {
            dates.append(issue.date)
            if let grace = issue.value.gracePeriodExpiresDate { dates.append(grace) }
        }
        return dates
    }

    /// The start of the last stretch of continuous access among `pieces`:
    /// `merged(pieces.sorted { $0.start < $1.start }).last?.start`, joining
    /// only the spans, which is all it reads, instead of copying the pieces.
    static func lastRunStart(of pieces: [Piece]) -> Date? {
        var last: (start: Date, end: Date?)?
        for piece in pieces.map({ (start: $0.start, end: $0.end) }).sorted(by: { $0.start < $1.start }) {
            guard let run = last, piece.start <= (run.end ?? .distantFuture) else {
                last = piece
                continue
            }
            if (piece.end ?? .distantFuture) >= (run.end ?? .distantFuture) { last = (run.start, piece.end) }
        }
        return last?.start
    }

    // MARK: Intervals

    /// Pieces (sorted by start) joined where they overlap or touch; each
    /// joined stretch keeps the piece that lasts longest (then the latest).
    /// The stretch being joined is changed in place: copying it out and back
    /// for every piece (a retain and a release per string) was most of the
    /// intervals' cost in a rebuild.
    static func merged(_ pieces: [Piece]) -> [Piece] {
        var result: [Piece] = []
        for piece in pieces {
            let last = result.count - 1
            guard last >= 0, piece.start <= (result[last].end ?? .distantFuture) else {
                result.append(piece)
                continue
            }
            if (piece.end ?? .distantFuture) >= (result[last].end ?? .distantFuture) {
                let start = result[last].start
                result[last] = piece
                result[last].start = start
            }
        }
        return result
    }

    func productIntervals() -> [SubscriberReadModel.ProductInterval] {
        // Sorted by product, then start: each product's pieces are one run
        // (a sort of a handful of pieces costs less than a table of them).
        let sorted = pieces.sorted { ($0.productID, $0.start, $0.source) < ($1.productID, $1.start, $1.source) }
        return Self.runs(of: sorted, by: \.productID).flatMap { productID, run in
            Self.merged(run).map { piece in
                SubscriberReadModel.ProductInterval(environment: environment, productID: productID, type: piece.type, group: piece.group,
                                                    start: piece.start, end: piece.end, source: piece.source)
            }
        }
    }

    /// The runs of equal keys in `items` (sorted by that key), in order.
    static func runs<Item>(of items: [Item], by key: (Item) -> String) -> [(key: String, run: [Item])] {
        var result: [(key: String, run: [Item])] = []
        var start = 0
        while start < items.count {
            let current = key(items[start])
            var end = start + 1
            while end < items.count, key(items[end]) == current { end += 1 }
            result.append((current, Array(items[start..<end])))
            start = end
        }
        return result
    }

    func entitlementIntervals() -> [SubscriberReadModel.EntitlementInterval] {
        var granted: [(entitlement: String, piece: Piece)] = []
        // Pieces come in runs of one product: its entitlements are looked up once a run.
        var product: (id: String, entitlements: [String])?
        for piece in pieces {
            if product?.id != piece.productID {
                product = (piece.productID, catalog.product(id: piece.productID)?.entitlements ?? [])
            }
            for entitlement in product!.entitlements {
                granted.append((entitlement, piece))
            }
        }
        granted += grantPieces
        granted.sort { ($0.entitlement, $0.piece.start, $0.piece.source) < ($1.entitlement, $1.piece.start, $1.piece.source) }
        return Self.runs(of: granted, by: \.entitlement).flatMap { entitlement, run in
            Self.merged(run.map(\.piece)).map { piece in
                SubscriberReadModel.EntitlementInterval(environment: environment, entitlement: entitlement, start: piece.start,
                                                        end: piece.end, productID: piece.productID, source: piece.source)
            }
        }
    }
}
