import Foundation
import Logging
import Metrics
import Postgres
import ServiceLifecycle

/// Keeps one consumer up to date, as a `Service`.
///
/// Only one instance of a consumer works at a time across service instances:
/// the runner holds a session advisory lock named after the consumer on a
/// connection of its own; when that instance dies, its session ends, the lock
/// is released and a standby takes over. The runner wakes on the append
/// notification and also polls, because a notified event may still sit behind
/// an older running transaction (see `EventStore.readCommitted`).
public struct ConsumerRunner: Service {
    public let store: EventStore
    public let consumer: any EventConsumer
    public var batchSize: Int
    public var pollInterval: Duration
    let conninfo: String
    let logger: Logger

    public init(store: EventStore, consumer: any EventConsumer, conninfo: String,
                batchSize: Int = 500, pollInterval: Duration = .milliseconds(500),
                logger: Logger = Logger(label: "subledger.consumer")) {
        self.store = store
        self.consumer = consumer
        self.conninfo = conninfo
        self.batchSize = batchSize
        self.pollInterval = pollInterval
        var logger = logger
        logger[metadataKey: "consumer.name"] = "\(consumer.name)"
        self.logger = logger
    }

    public func run() async throws {
        await withGracefulShutdownHandler {
            await runUntilCancelled()
        } onGracefulShutdown: {
            // The loop notices cancellation within one poll interval.
        }
    }

    /// The loop, usable without a service group (tests).
    public func runUntilCancelled() async {
        let batches = Counter(label: "subledger_consumer_batches_total", dimensions: [("consumer", consumer.name)])
        let lag = Gauge(label: "subledger_consumer_lag_events", dimensions: [("consumer", consumer.name)])
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                let connection = try await Connection.connect(to: conninfo, logger: logger)
                defer { connection.close() }
                guard try await acquireLeadership(on: connection) else { continue }
                logger.info("consumer running")
                try await connection.listen(EventStore.notificationChannel)
                while !Task.isCancelled && !Task.isShuttingDownGracefully {
                    let handled = try await store.processBatch(consumer, limit: batchSize, on: connection)
                    if handled > 0 { batches.increment() }
                    if handled < batchSize {
                        // Caught up as far as commit order allows: publish what remains, then wait.
                        lag.record(try await store.lag(of: consumer.name))
                        _ = try await connection.waitForNotification(timeout: pollInterval)
                    }
                }
            } catch is CancellationError {
                return
            } catch {
                if Task.isCancelled || Task.isShuttingDownGracefully { return }
                logger.error("consumer failed; retrying", metadata: ["error": "\(String(reflecting: error))"])
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// Waits (as a standby) until this instance holds the consumer's lock.
    private func acquireLeadership(on connection: Connection) async throws -> Bool {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            let rows = try await connection.query("SELECT pg_try_advisory_lock(hashtextextended(\("consumer:" + consumer.name), 0))")
            if try rows.first?.decode(Bool.self, at: 0) == true { return true }
            try await Task.sleep(for: pollInterval)
        }
        return false
    }
}
