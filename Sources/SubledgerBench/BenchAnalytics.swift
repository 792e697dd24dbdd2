import CommandSupport
import EventStore
import Foundation
import Ledger
import Logging
import Postgres
import SubledgerApp

/// `subledger bench --measure analytics`: the analytics projection beside the
/// subscriptions projection (catch-up from the start of the log, and a
/// stream-by-stream rebuild), a 365-day daily series of every metric, and
/// `POST …/events` with the analytics projection running and not.
extension Bench {
    func measureAnalytics(pool: ConnectionPool, conninfo: String, logger: Logger) async throws {
        print("")
        print("subledger bench: the analytics projection, \(rebuildEvents) events, \(samples) samples per latency")
        let bench = try ProjectionBench(pool: pool, events: rebuildEvents, samples: samples, rounds: 1,
                                        catalogJSON: ProjectionBench.pricedCatalogJSON)
        let days = try await bench.loadPriced()
        try await pool.query("VACUUM (ANALYZE) events")
        let store = EventStore(pool: pool)
        let analytics = AnalyticsProjection(catalog: bench.catalog)
        let subscriptions = SubscriptionProjection(store: store, catalog: bench.catalog)

        print("")
        print(padded("measurement", 58) + padded("events/s", 12, left: true))
        // Catch-up from an empty checkpoint, in the live runner's batches.
        for consumer in [analytics, subscriptions] as [any EventConsumer] {
            let progress = TerminalProgress(label: "catch-up \(consumer.name)")
            let started = ContinuousClock.now
            var handled = 0
            while true {
                let batch = try await pool.withConnection { try await store.processBatch(consumer, limit: 1_000, on: $0) }
                guard batch > 0 else { break }
                handled += batch
                progress.update("\(handled) events")
            }
            let rate = Double(handled) / (ContinuousClock.now - started).timeInterval
            progress.finish(String(format: "%.0f events/s", rate))
            print(padded("catch-up from the start, \(consumer.name) (batches of 1,000)", 58) + padded(String(format: "%.0f", rate), 12, left: true))
        }
        for consumer in [analytics, subscriptions] as [any StreamwiseConsumer] {
            let started = ContinuousClock.now
            let rebuilt = try await store.rebuildStreamwise(consumer)
            let rate = Double(rebuilt) / (ContinuousClock.now - started).timeInterval
            print(padded("rebuild stream by stream, \(consumer.name)", 58) + padded(String(format: "%.0f", rate), 12, left: true))
        }

        // The query: every metric, one point per day for a year, and weekly and monthly.
        let reads = AnalyticsStore(pool: pool)
        let to = AnalyticsInterval.day.start(of: Date())
        print("")
        print(padded("latency (ms), \(days) days of sales", 58) + padded("p50", 10, left: true) + padded("p99", 10, left: true))
        for (interval, count) in [(AnalyticsInterval.day, 365), (.week, 52), (.month, 12)] {
            let query = AnalyticsQuery(from: interval.start(count, before: to), to: to, interval: interval)
            let intervals = interval.intervals(from: query.from, to: to, limit: AnalyticsQuery.maximumIntervals)!
            var points = 0
            let (p50, p99) = try await bench.percentiles { _ in points = try await reads.series(query, intervals: intervals).points.count }
            print(padded("\(points) \(interval.rawValue)s of every metric (AnalyticsStore.series)", 58)
                  + padded(String(format: "%.2f", p50), 10, left: true) + padded(String(format: "%.2f", p99), 10, left: true))
        }
        let cohorts = AnalyticsQuery(from: AnalyticsInterval.month.start(12, before: to), to: to, interval: .month)
        let cohortIntervals = AnalyticsInterval.month.intervals(from: cohorts.from, to: to, limit: 100)!
        let (p50, p99) = try await bench.percentiles { _ in _ = try await reads.cohorts(cohorts, intervals: cohortIntervals, now: Date()) }
        print(padded("12 monthly cohorts (AnalyticsStore.cohorts)", 58)
              + padded(String(format: "%.2f", p50), 10, left: true) + padded(String(format: "%.2f", p99), 10, left: true))

        // The write path with the analytics projection running and not,
        // beside the projections `serve` always runs, three pairs
        // alternated: on this shared machine one run can be a quarter off.
        print("")
        print(padded("HTTP POST …/events, \(writers) connections", 58) + padded("per s", 12, left: true) + padded("p99 ms", 10, left: true))
        let service = try await startService(conninfo: conninfo, logger: logger)
        defer { service.server.cancel() }
        let duration = Duration.seconds(seconds)
        let reminders = ReminderProjection(store: store, catalog: bench.catalog)
        for round in 0..<6 {
            let running = round % 2 == 1
            let consumers: [any EventConsumer] = running ? [subscriptions, reminders, analytics] : [subscriptions, reminders]
            let runners = consumers.map { consumer in
                var runner = ConsumerRunner(store: store, consumer: consumer, conninfo: conninfo, logger: logger)
                runner.gathering = Projections.gathering(of: consumer.name)
                return Task { await runner.runUntilCancelled() }
            }
            let (figures, _) = try await measureIngest(port: service.port, duration: duration, run: "analytics-\(round)")
            for runner in runners { runner.cancel() }
            for runner in runners { await runner.value }
            // Each round starts with the projections caught up.
            for consumer in [subscriptions, reminders, analytics] as [any EventConsumer] {
                while try await pool.withConnection({ try await store.processBatch(consumer, limit: 1_000, on: $0) }) > 0 {}
            }
            print(padded("subscriptions, reminders\(running ? " and analytics" : "") running, pair \(round / 2 + 1)", 58)
                  + padded(String(format: "%.0f", figures.rate), 12, left: true)
                  + padded(String(format: "%.2f", figures.p99.timeInterval * 1000), 10, left: true))
        }
    }
}

extension ProjectionBench {
    static let pricedCatalogJSON = """
        { "version": 1, "products": [
            {"id": "pro.monthly", "type": "auto-renewable", "group": "pro", "entitlements": ["pro"]},
            {"id": "pro.yearly", "type": "auto-renewable", "group": "pro", "entitlements": ["pro"]},
            {"id": "max.weekly", "type": "auto-renewable", "group": "max", "entitlements": ["max"]}
        ] }
        """

    /// Subscriptions with prices over the 400 days before now: a week's
    /// free trial for one in three, monthly, yearly or weekly periods in USD
    /// or EUR, lapses, resubscriptions and refunds; returns the days covered.
    func loadPriced() async throws -> Int {
        let progress = TerminalProgress(label: "writing \(events) priced events")
        let start = Date() - 400 * 86_400
        var random = SystemRandomNumberGenerator()
        var commands: [WriteCommand] = []
        var written = 0
        var subscriber = 0
        func sale(_ price: String?, _ currency: String, trial: Bool = false) -> AppleTransactionDetails {
            AppleTransactionDetails(offerType: trial ? 1 : nil,
                                    sale: trial ? SaleTerms(price: .zero, currency: currency, offerDiscount: .freeTrial)
                                        : SaleTerms(price: price.flatMap(Amount.init(decimal:)), currency: currency))
        }
        while written < events {
            let id = "a\(subscriber)"
            let currency = subscriber % 3 == 0 ? "EUR" : "USD"
            let (product, days, price) = [("pro.monthly", 30.0, "9.99"), ("pro.yearly", 365.0, "79.99"), ("max.weekly", 7.0, "2.99")][subscriber % 3]
            var at = start + Double.random(in: 0..<(380 * 86_400), using: &random)
            var count = 0
            if subscriber % 3 == 1 {
                commands.append(.fact(.purchase(.init(transactionID: "\(id)-t", originalTransactionID: "\(id)-t", productID: product,
                                                      purchaseDate: at, expiresDate: at + 7 * 86_400,
                                                      details: sale(nil, currency, trial: true))), subscriberID: id))
                at += 7 * 86_400
                count = 1
            }
            let periods = Int.random(in: 1...12, using: &random)
            for period in 0..<periods where at < Date() {
                let original = count > 0 ? "\(id)-t" : "\(id)-0"
                let transaction = count == 0 ? original : "\(id)-\(period)"
                let details = sale(price, currency)
                commands.append(.fact(count == 0
                    ? .purchase(.init(transactionID: transaction, originalTransactionID: original, productID: product, purchaseDate: at,
                                      expiresDate: at + days * 86_400, details: details))
                    : .renewal(.init(transactionID: transaction, originalTransactionID: original, productID: product, purchaseDate: at,
                                     expiresDate: at + days * 86_400, details: details)), subscriberID: id))
                if subscriber % 17 == 0, period == periods - 1 {
                    commands.append(.fact(.refund(.init(transactionID: transaction, revocationDate: at + 86_400)), subscriberID: id))
                }
                at += days * 86_400
                count += 1
            }
            subscriber += 1
            try await write(&commands, written: &written, progress: progress)
        }
        progress.finish("\(written) events for \(subscriber) subscribers")
        return 400
    }
}
