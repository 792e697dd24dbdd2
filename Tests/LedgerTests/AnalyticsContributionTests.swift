import Foundation
import JSON
import TestSupport
import Testing
@testable import Ledger

/// A subscriber's contribution to the analytics (docs/decisions/0006):
/// stocks as day deltas that give, at
/// every day's end, what the fold says at that instant; flows as the
/// definitions count them.
struct AnalyticsContributionTests {
    static let catalog = try! Catalog.decode(from: Data("""
        {"version": 1, "products": [
          {"id": "pro.monthly", "type": "auto-renewable", "group": "pro", "entitlements": ["pro"]},
          {"id": "pro.yearly", "type": "auto-renewable", "group": "pro", "entitlements": ["pro"]},
          {"id": "max.monthly", "type": "auto-renewable", "group": "max", "entitlements": ["max"]}
        ]}
        """.utf8))

    static let start = RFC3339.parse("2026-01-01T00:00:00Z")!
    static func day(_ n: Double) -> Date { start + n * 86_400 }

    /// Builds a ledger from facts in the order given.
    struct Builder {
        var events: [LedgerEvent] = []

        mutating func period(_ id: String, original: String, product: String = "pro.monthly", from: Date, to: Date,
                             price: String? = "9.99", currency: String = "USD", trial: Bool = false,
                             environment: Environment = .production, family: Bool = false) {
            var sale = SaleTerms()
            if trial {
                sale.offerDiscount = .freeTrial
            } else if let price {
                sale.price = Amount(decimal: price)
                sale.currency = currency
            }
            let fact = TransactionFact(transactionID: id, originalTransactionID: original, productID: product, productType: .autoRenewable,
                                       group: product.hasPrefix("max") ? "max" : "pro", purchaseDate: from, expiresDate: to,
                                       environment: environment,
                                       details: AppleTransactionDetails(ownershipType: family ? "FAMILY_SHARED" : nil,
                                                                        offerType: trial ? 1 : nil, sale: sale))
            events.append(id == original ? .purchased(fact) : .renewed(fact))
        }

        mutating func refund(_ id: String, original: String, at date: Date, prorated milliunits: Int? = nil) {
            events.append(.refunded(RefundFact(transactionID: id, originalTransactionID: original, productID: "pro.monthly",
                                               revocationDate: date,
                                               details: AppleRevocationDetails(revocationType: milliunits == nil ? "REFUND_FULL" : "REFUND_PRORATED",
                                                                               revocationPercentage: milliunits))))
        }

        func ledger() -> SubscriberLedger {
            SubscriberLedger(subscriberID: "s", events: events.enumerated().map { index, event in
                RecordedLedgerEvent(position: Int64(index + 1), recordedAt: AnalyticsContributionTests.start, event: event)
            })
        }
    }

    static func total(_ items: [AnalyticsItem], _ metric: AnalyticsMetric, currency: String = "", through day: Int? = nil,
                      on only: Int? = nil) -> Int64 {
        items.filter { item in
            item.metric == metric && item.currency == currency && item.environment == .production
                && (day.map { item.day <= $0 } ?? true) && (only.map { item.day == $0 } ?? true)
        }.reduce(0) { $0 + $1.value }
    }

    @Test func aTrialThenPaidMonthsCountAsTheDefinitionsSay() {
        var builder = Builder()
        // A week's free trial, two paid months at 9.99, then a lapse.
        builder.period("t0", original: "t0", from: Self.day(0), to: Self.day(7), trial: true)
        builder.period("t1", original: "t0", from: Self.day(7), to: RFC3339.parse("2026-02-08T00:00:00Z")!)
        builder.period("t2", original: "t0", from: RFC3339.parse("2026-02-08T00:00:00Z")!, to: RFC3339.parse("2026-03-08T00:00:00Z")!)
        let items = builder.ledger().analyticsContribution(catalog: Self.catalog)
        let first = AnalyticsItem.flowDay(of: Self.day(0)), paid = AnalyticsItem.flowDay(of: Self.day(7))
        #expect(Self.total(items, .trialStarts, on: first) == 1)
        #expect(Self.total(items, .newSubscriptions, on: paid) == 1 && Self.total(items, .trialConversions, on: paid) == 1)
        #expect(Self.total(items, .renewals) == 1)
        #expect(Self.total(items, .revenue, currency: "USD") == 19_980_000)
        // Stocks: a trial at the end of days 0 to 5; at the end of day 6
        // (8 January 00:00) the trial has ended and the paid month has begun.
        #expect(Self.total(items, .activeTrials, through: first + 5) == 1 && Self.total(items, .activeTrials, through: first + 6) == 0)
        #expect(Self.total(items, .activeSubscriptions, through: first + 5) == 0)
        #expect(Self.total(items, .activeSubscriptions, through: first + 6) == 1)
        // A month paid at 9.99 is 9.99 a month.
        // MRR is kept as the yearly amount (× 12), divided once when answered.
        #expect(Self.total(items, .mrr, currency: "USD", through: first + 6) == 12 * 9_990_000)
        // It lapses on 8 March: churned that day, week and month; nothing active after.
        let lapse = AnalyticsItem.flowDay(of: RFC3339.parse("2026-03-08T00:00:00Z")!)
        #expect(Self.total(items, .churnedDay, on: lapse) == 1 && Self.total(items, .churnedWeek, on: lapse) == 1
            && Self.total(items, .churnedMonth, on: lapse) == 1)
        #expect(Self.total(items, .activeSubscriptions) == 0 && Self.total(items, .mrr, currency: "USD") == 0)
    }

    /// Churn is judged at the end of each interval: a subscriber who lapses
    /// on a Monday and comes back on the Wednesday churned that day, not
    /// that week or month; a trial that lapses is no churn.
    @Test func churnIsJudgedAtTheIntervalsEnd() {
        var builder = Builder()
        let monday = RFC3339.parse("2026-03-09T00:00:00Z")!  // a Monday
        builder.period("a1", original: "a1", from: monday - 30 * 86_400, to: monday + 3_600)
        builder.period("b1", original: "b1", from: monday + 2 * 86_400, to: monday + 32 * 86_400)
        builder.period("c1", original: "c1", product: "max.monthly", from: monday, to: monday + 7 * 86_400, trial: true)
        let items = builder.ledger().analyticsContribution(catalog: Self.catalog)
        let day = AnalyticsItem.flowDay(of: monday)
        #expect(Self.total(items, .churnedDay, on: day) == 1)
        #expect(Self.total(items, .churnedWeek, on: day) == 0 && Self.total(items, .churnedMonth, on: day) == 0)
        // The trial's lapse (on the next Monday) is not churn; b1's end is.
        #expect(Self.total(items, .churnedDay) == 2 && Self.total(items, .churnedWeek) == 1)
    }

    /// A prorated refund counts its share (Apple's milliunits) at the
    /// revocation date; a full one the whole price; revenue stays where it was.
    @Test func refundsCountAtTheRevocationDateByTheirShare() {
        var builder = Builder()
        builder.period("r1", original: "r1", from: Self.day(0), to: RFC3339.parse("2026-02-01T00:00:00Z")!, price: "10.00", currency: "EUR")
        builder.refund("r1", original: "r1", at: Self.day(10), prorated: 50_000)
        builder.period("f1", original: "f1", from: Self.day(0), to: RFC3339.parse("2027-01-01T00:00:00Z")!, price: "120", currency: "EUR")
        builder.refund("f1", original: "f1", at: Self.day(40))
        let items = builder.ledger().analyticsContribution(catalog: Self.catalog)
        #expect(Self.total(items, .revenue, currency: "EUR", on: AnalyticsItem.flowDay(of: Self.day(0))) == 130_000_000)
        #expect(Self.total(items, .refunds, currency: "EUR", on: AnalyticsItem.flowDay(of: Self.day(10))) == 5_000_000)
        #expect(Self.total(items, .refunds, currency: "EUR", on: AnalyticsItem.flowDay(of: Self.day(40))) == 120_000_000)
        // The yearly at 120 is 10 a month (120 a year, as kept) until its refund.
        #expect(Self.total(items, .mrr, currency: "EUR", through: AnalyticsItem.flowDay(of: Self.day(20))) == 120_000_000)
        #expect(Self.total(items, .mrr, currency: "EUR") == 0)
    }

    @Test func familySharedCopiesAndSandboxStayOutOfProduction() {
        var builder = Builder()
        builder.period("fam", original: "fam", from: Self.day(0), to: Self.day(30), family: true)
        builder.period("sbx", original: "sbx", from: Self.day(0), to: Self.day(30), environment: .sandbox)
        let items = builder.ledger().analyticsContribution(catalog: Self.catalog)
        #expect(items.allSatisfy { $0.environment == .sandbox }, "\(items)")
        #expect(items.contains { $0.metric == .newSubscriptions && $0.value == 1 })
    }

    /// A stretch that starts exactly at midnight counts at the end of the
    /// day before: `?at=` that midnight sees it.
    @Test func aChangeAtMidnightCountsAtTheEndOfTheDayBefore() {
        #expect(AnalyticsItem.stockDay(of: Self.day(1)) == AnalyticsItem.flowDay(of: Self.day(0)))
        #expect(AnalyticsItem.stockDay(of: Self.day(1) + 0.001) == AnalyticsItem.flowDay(of: Self.day(1)))
        #expect(AnalyticsInterval.week.end(of: RFC3339.parse("2026-03-15T23:59:59Z")!) == RFC3339.parse("2026-03-16T00:00:00Z")!)
        #expect(AnalyticsInterval.week.end(of: RFC3339.parse("2026-03-16T00:00:00Z")!) == RFC3339.parse("2026-03-23T00:00:00Z")!)
        #expect(AnalyticsInterval.month.end(of: RFC3339.parse("2026-01-31T23:59:59.999Z")!) == RFC3339.parse("2026-02-01T00:00:00Z")!)
        #expect(AnalyticsInterval.week.end(of: Date(timeIntervalSince1970: 0)) == RFC3339.parse("1970-01-05T00:00:00Z")!)
    }

    /// Stocks against the fold: for generated subscribers (trials, months,
    /// years, gaps, resubscriptions, refunds), the deltas summed through each
    /// day give, at that day's end, the active subscriptions, trials and MRR
    /// that `Evaluation` finds at that instant.
    @Test func stocksEqualTheFoldAtEveryDaysEnd() {
        var random = SplitMix64(seed: 45)
        for subscriber in 0..<120 {
            var builder = Builder()
            // A third start at midnight exactly, where a day's end and the next day meet.
            var at = Self.day(Double(Int.random(in: 0...20, using: &random)))
                + (subscriber % 3 == 0 ? 0 : Double(Int.random(in: 0...86_399, using: &random)))
            for original in 0..<Int.random(in: 1...3, using: &random) {
                let id = "s\(subscriber)-o\(original)"
                var index = 0
                if Bool.random(using: &random) {
                    builder.period("\(id)-\(index)", original: id, from: at, to: at + 7 * 86_400, trial: true)
                    at += 7 * 86_400
                    index += 1
                }
                let yearly = Int.random(in: 0..<4, using: &random) == 0
                for _ in 0..<Int.random(in: 1...4, using: &random) {
                    let end = yearly ? ISODuration(years: 1).added(to: at) : ISODuration(months: 1).added(to: at)
                    builder.period(index == 0 ? id : "\(id)-\(index)", original: id, product: yearly ? "pro.yearly" : "pro.monthly",
                                   from: at, to: end, price: ["4.99", "9.99", "59.99"].randomElement(using: &random)!,
                                   currency: Bool.random(using: &random) ? "USD" : "EUR")
                    if Int.random(in: 0..<10, using: &random) == 0 {
                        builder.refund(index == 0 ? id : "\(id)-\(index)", original: id, at: at + 3 * 86_400,
                                       prorated: Bool.random(using: &random) ? 40_000 : nil)
                    }
                    at = end
                    index += 1
                }
                at += Double(Int.random(in: 0...40, using: &random)) * 86_400
            }
            _ = at
            let ledger = builder.ledger()
            let items = ledger.analyticsContribution(catalog: Self.catalog)
            let firstDay = AnalyticsItem.flowDay(of: Self.day(0))
            for day in firstDay..<(firstDay + 400) {
                let end = Date(timeIntervalSince1970: Double(day + 1) * 86_400)
                let evaluation = Evaluation(ledger: ledger, catalog: Self.catalog, at: end, environment: .production)
                let held = evaluation.autoRenewables.filter { $0.status == .active || $0.status == .grace }
                let trials = held.filter { $0.latest.fact.details.sale.isFreeTrial }
                #expect(Self.total(items, .activeTrials, through: day) == Int64(trials.count), "subscriber \(subscriber) day \(day)")
                #expect(Self.total(items, .activeSubscriptions, through: day) == Int64(held.count - trials.count),
                        "subscriber \(subscriber) day \(day)")
                for currency in ["USD", "EUR"] {
                    let expected = held.filter { !$0.latest.fact.details.sale.isFreeTrial && $0.latest.fact.details.sale.currency == currency }
                        .reduce(Int64(0)) { sum, subscription in
                            let fact = subscription.latest.fact
                            let perYear: Int64 = fact.productID == "pro.yearly" ? 1 : 12
                            return sum + fact.details.sale.price!.micros * perYear
                        }
                    #expect(Self.total(items, .mrr, currency: currency, through: day) == expected, "subscriber \(subscriber) day \(day) \(currency)")
                }
            }
        }
    }
}
