import Foundation

/// One environment's auto-renewable subscriptions of one subscriber, as the
/// analytics count them (`analyticsContribution`). The stretches of access
/// come from `ActivityTimeline`, which answers as `state(at:)` does at every
/// instant; the periods (paid or trial, with their sale) from the facts.
struct AnalyticsSweep {
    let ledger: SubscriberLedger
    let catalog: Catalog
    let environment: Environment

    /// One paid or free-trial period of a subscription: an App Store
    /// transaction (its restored copies folded into it) or a Google Play
    /// order.
    struct Period {
        /// The subscription: an original transaction id or a purchase token.
        var unit: String
        var store: Store
        var productID: String
        var group: String
        var start: Date
        var end: Date?
        var sale: SaleTerms
        /// When it was refunded, and the share in Apple's milliunits (nil: all of it).
        var refund: (date: Date, share: Int?)?

        var isTrial: Bool { sale.isFreeTrial }
    }

    func add(to sums: inout AnalyticsSums) {
        // The timeline only when there is something to count (most
        // subscribers have nothing in Sandbox), and before the periods: a
        // Play order's access says when it was paid.
        guard ledger.byOriginal.records.values.contains(where: { $0.contains { $0.fact.environment == environment } })
            || !ledger.playTokens(environment: environment).isEmpty else { return }
        let pieces = ActivityTimeline(ledger: ledger, catalog: catalog, environment: environment).pieces
            .filter { $0.type == .autoRenewable }
        let (periods, bySource) = self.periods(pieces: pieces)
        guard !periods.isEmpty else { return }
        func add(_ day: Int, _ period: Period, _ metric: AnalyticsMetric, _ value: Int64, currency: String = "", offset: Int = 0) {
            sums.add(day: day, environment: environment, store: period.store, productID: period.productID, currency: currency,
                     metric: metric, offset: offset, value: value)
        }

        // Stocks: each stretch of access adds from its start and takes away from its end.
        var paidPieces: [String: [ActivityTimeline.Piece]] = [:]
        for piece in pieces {
            guard let period = bySource[piece.source] else { continue }
            let metric: AnalyticsMetric = period.isTrial ? .activeTrials : .activeSubscriptions
            add(AnalyticsItem.stockDay(of: piece.start), period, metric, 1)
            if let end = piece.end { add(AnalyticsItem.stockDay(of: end), period, metric, -1) }
            guard !period.isTrial else { continue }
            paidPieces[period.unit, default: []].append(piece)
            if let price = period.sale.price, let currency = period.sale.currency, let yearly = Self.yearly(price, period) {
                add(AnalyticsItem.stockDay(of: piece.start), period, .mrr, yearly.micros, currency: currency)
                if let end = piece.end { add(AnalyticsItem.stockDay(of: end), period, .mrr, -yearly.micros, currency: currency) }
            }
        }

        // Flows: each period, in its subscription's order.
        for (_, unitPeriods) in Dictionary(grouping: periods, by: \.unit) {
            var paidBefore = false
            var previous: Period?
            for period in unitPeriods.sorted(by: { $0.start < $1.start }) {
                let day = AnalyticsItem.flowDay(of: period.start)
                if period.isTrial {
                    add(day, period, .trialStarts, 1)
                } else {
                    add(day, period, paidBefore ? .renewals : .newSubscriptions, 1)
                    if !paidBefore, let trial = previous, trial.isTrial {
                        add(day, period, .trialConversions, 1)
                        add(AnalyticsItem.flowDay(of: trial.start), trial, .trialsConverted, 1)
                    }
                    if !paidBefore { addRetention(of: period, paying: paidPieces[period.unit] ?? [], add) }
                    paidBefore = true
                    if let price = period.sale.price, let currency = period.sale.currency {
                        add(day, period, .revenue, price.micros, currency: currency)
                        if let refund = period.refund {
                            let amount = refund.share.map { price.scaled(by: Int64($0), 100_000) } ?? price
                            add(AnalyticsItem.flowDay(of: refund.date), period, .refunds, amount.micros, currency: currency)
                        }
                    }
                }
                previous = period
            }
        }

        // Churn: where a paid stretch ends and nothing of its group holds at
        // the end of that day, week or month.
        for (_, unitPieces) in paidPieces {
            // Joined where one starts by the end of the one before (a renewal
            // is no end); each keeps the piece, and so the period, that lasts longest.
            for stretch in ActivityTimeline.merged(unitPieces.sorted { $0.start < $1.start }) {
                guard let end = stretch.end, let period = bySource[stretch.source] else { continue }
                let group = period.group
                for interval in AnalyticsInterval.allCases {
                    let intervalEnd = interval.end(of: end)
                    let entitled = pieces.contains { piece in
                        piece.start <= intervalEnd && intervalEnd < (piece.end ?? .distantFuture) && piece.group == group
                    }
                    if !entitled { add(AnalyticsItem.flowDay(of: end), period, interval.churnMetric, 1) }
                }
            }
        }
    }

    /// Retention of the subscription whose first paid period is `first`,
    /// as deltas over the offsets `k` of its cohort (the stock at offset `k`
    /// is the sum of the deltas up to `k`, as the day stocks are): each
    /// stretch of paid access adds 1 from the first interval end it holds
    /// at and takes it back from the first it no longer holds at. Two items
    /// per stretch, however long it lasts.
    private func addRetention(of first: Period, paying pieces: [ActivityTimeline.Piece],
                              _ add: (Int, Period, AnalyticsMetric, Int64, String, Int) -> Void) {
        let stretches = ActivityTimeline.merged(pieces.sorted { $0.start < $1.start })
        for interval in [AnalyticsInterval.week, .month] {
            let cohortStart = interval.start(of: first.start)
            let cohortDay = AnalyticsItem.flowDay(of: cohortStart)
            for stretch in stretches {
                add(cohortDay, first, interval.retentionMetric, 1, "",
                    Self.retentionOffset(atOrAfter: stretch.start, cohort: cohortStart, interval: interval))
                if let end = stretch.end {
                    add(cohortDay, first, interval.retentionMetric, -1, "",
                        Self.retentionOffset(atOrAfter: end, cohort: cohortStart, interval: interval))
                }
            }
        }
    }

    /// The first offset `k` whose measuring instant — the end of the
    /// `k + 1`-th interval after the cohort's, that is the start of the
    /// `k + 2`-th — is at or after `instant`.
    static func retentionOffset(atOrAfter instant: Date, cohort start: Date, interval: AnalyticsInterval) -> Int {
        // The first j with the start of the j-th interval after the cohort's at or after `instant`.
        var intervals: Int
        switch interval {
        case .day: intervals = Int((instant.timeIntervalSince(start) / 86_400).rounded(.up))
        case .week: intervals = Int((instant.timeIntervalSince(start) / (7 * 86_400)).rounded(.up))
        case .month:
            intervals = AnalyticsInterval.monthIndex(of: instant) - AnalyticsInterval.monthIndex(of: start)
            if instant > interval.start(of: instant) { intervals += 1 }
        }
        return max(0, intervals - 2)
    }

    // MARK: Periods

    /// The environment's auto-renewable periods this subscriber held when
    /// they began (family-shared copies left out), and each by the source
    /// id the timeline's pieces name (a transaction id or an order id).
    func periods(pieces: [ActivityTimeline.Piece]) -> (periods: [Period], bySource: [String: Period]) {
        var periods: [Period] = []
        var bySource: [String: Period] = [:]
        for (original, records) in ledger.byOriginal.records {
            // Copies of one paid period (restores) fold into the first.
            var byPeriod: [String: (period: Period, sources: [String])] = [:]
            for record in records where record.fact.environment == environment {
                let fact = record.fact
                let product = Evaluation.catalogProduct(of: fact, catalog: catalog, readingDuration: false)
                guard (fact.productType ?? product?.type) == .autoRenewable, fact.details.ownershipType != "FAMILY_SHARED",
                      ledger.owns(original, environment: environment, at: fact.purchaseDate) else { continue }
                let key = fact.details.webOrderLineItemID ?? fact.expiresDate.map { "\($0.timeIntervalSince1970)" } ?? fact.transactionID
                if var known = byPeriod[key] {
                    known.sources.append(fact.transactionID)
                    if fact.purchaseDate < known.period.start { known.period.start = fact.purchaseDate }
                    if known.period.sale.price == nil, fact.details.sale.price != nil { known.period.sale = fact.details.sale }
                    byPeriod[key] = known
                    continue
                }
                let refund = ledger.refundInEffect(for: fact, isSubscription: true, at: .distantFuture)
                let counted = refund.flatMap { refund -> (date: Date, share: Int?)? in
                    // An upgrade's revocation and a family revoke are no refund.
                    guard fact.details.isUpgraded != true, refund.value.details.revocationType != "FAMILY_REVOKE" else { return nil }
                    let prorated = refund.value.details.revocationType == "REFUND_PRORATED"
                    return (refund.date, prorated ? refund.value.details.revocationPercentage : nil)
                }
                byPeriod[key] = (Period(unit: original, store: .appStore, productID: fact.productID,
                                        group: fact.group ?? product?.group ?? fact.productID, start: fact.purchaseDate,
                                        end: ledger.expiresDate(ofTransaction: fact.transactionID), sale: fact.details.sale,
                                        refund: counted), [fact.transactionID])
            }
            for (period, sources) in byPeriod.values {
                periods.append(period)
                for source in sources { bySource[source] = period }
            }
        }
        var accessFrom: [String: Date] = [:]
        for piece in pieces where piece.start < (accessFrom[piece.source] ?? .distantFuture) { accessFrom[piece.source] = piece.start }
        for token in ledger.playTokens(environment: environment) {
            let added = playPeriods(token, accessFrom: accessFrom)
            periods += added.map(\.period)
            for (source, period) in added { bySource[source] = period }
        }
        return (periods, bySource)
    }

    /// A Play token's orders, each from the end of the one before (or the
    /// subscription's start) to its latest expiry; a void refunds the
    /// order it names, or the latest one. An order whose access began later
    /// than that (a renewal paid after an account hold) starts when its
    /// access did: `accessFrom`, the first instant of the timeline's pieces
    /// by their source.
    func playPeriods(_ token: String, accessFrom: [String: Date]) -> [(source: String, period: Period)] {
        let states = (ledger.playPurchases[token] ?? []).filter { $0.value.environment == environment }.sorted { $0.date < $1.date }
        guard let first = states.first?.value,
              let product = first.catalogIDs.lazy.compactMap({ catalog.product(id: $0, store: .googlePlay) }).first,
              product.type == .autoRenewable,
              ledger.owns(key: Store.googlePlay.ownershipKey(token, environment: environment), at: first.startTime)
        else { return [] }
        var orders: [(id: String, end: Date?, sale: SaleTerms)] = []
        for state in states {
            guard let order = state.value.orderID else { continue }
            if let index = orders.firstIndex(where: { $0.id == order }) {
                if let expiry = state.value.expiryTime, expiry > (orders[index].end ?? .distantPast) { orders[index].end = expiry }
                if let sale = state.value.sale { orders[index].sale = sale }
            } else {
                orders.append((order, state.value.expiryTime, state.value.sale ?? SaleTerms()))
            }
        }
        let void = ledger.playVoids[token]
        var result: [(source: String, period: Period)] = []
        var start = first.startTime
        for (index, order) in orders.enumerated() {
            let voided = void.flatMap { void in
                (void.value.orderID == order.id || (void.value.orderID == nil && index == orders.count - 1)) ? void.date : nil
            }
            if let access = accessFrom[order.id], access > start { start = access }
            result.append((order.id, Period(unit: token, store: .googlePlay, productID: product.id, group: product.group,
                                            start: start, end: order.end, sale: order.sale,
                                            refund: voided.map { (date: $0, share: Int?.none) })))
            start = order.end ?? start
        }
        return result
    }

    // MARK: Arithmetic of the definitions

    /// The price per year of a paid period, MRR × 12: × 52, 12, 6, 4, 2 or 1
    /// when the period spans a week, one, two, three or six months or a
    /// year exactly (exact, so monthly values sum exactly and are divided by
    /// 12 once, when answered); otherwise by its days (× 365 ÷ days, to a micro).
    static func yearly(_ price: Amount, _ period: Period) -> Amount? {
        guard let end = period.end, end > period.start else { return nil }
        let spans: [(ISODuration, Int64)] = [(ISODuration(weeks: 1), 52), (ISODuration(months: 1), 12), (ISODuration(months: 2), 6),
                                             (ISODuration(months: 3), 4), (ISODuration(months: 6), 2), (ISODuration(years: 1), 1)]
        for (duration, perYear) in spans where duration.added(to: period.start) == end {
            return price.scaled(by: perYear, 1)
        }
        let days = Int64((end.timeIntervalSince(period.start) / 86_400).rounded())
        guard days > 0 else { return nil }
        return price.scaled(by: 365, days)
    }
}
