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
    /// Attempts at one event before it is parked (see `EventStore.park`).
    public var maximumAttempts = 5
    /// First wait after a failed batch; doubles per attempt, capped at 30 s.
    public var retryDelay: Duration = .milliseconds(200)
    /// How long a caught-up consumer lets events gather before its next
    /// batch (nil: it goes at once when notified). For a read model that
    /// need not be current to the millisecond: many writes then cost one
    /// batch rather than one each.
    public var gathering: Duration?
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
        let parkedCounter = Counter(label: "subledger_consumer_parked_events_total", dimensions: [("consumer", consumer.name)])
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                let connection = try await Connection.connect(to: conninfo, logger: logger)
                defer { connection.close() }
                guard try await acquireLeadership(on: connection) else { continue }
                logger.info("consumer running")
                try await connection.listen(EventStore.notificationChannel)
                // Failed attempts at the current checkpoint: after one, events
                // go one at a time to find the bad one; after the last, it is parked.
                var failures = 0
                while !Task.isCancelled && !Task.isShuttingDownGracefully {
                    let handled: Int
                    do {
                        handled = try await store.processBatch(consumer, limit: failures > 0 ? 1 : batchSize, on: connection)
                        failures = 0
                    } catch where Self.isEventProblem(error, connection: connection) {
                        failures += 1
                        logger.error("consumer batch failed", metadata: [
                            "consumer.attempt": "\(failures)", "error": "\(String(reflecting: error))",
                        ])
                        if failures >= maximumAttempts {
                            if let parked = try await store.park(consumer, reason: "\(String(reflecting: error))", on: connection) {
                                parkedCounter.increment()
                                logger.critical("event parked after repeated failures", metadata: [
                                    "event.position": "\(parked.position)", "event.stream": "\(parked.streamID)",
                                    "event.type": "\(parked.type)",
                                ])
                            }
                            failures = 0
                        } else {
                            try await Task.sleep(for: min(retryDelay * (1 << min(failures - 1, 16)), .seconds(30)))
                        }
                        continue
                    }
                    if handled > 0 { batches.increment() }
                    if handled < batchSize {
                        // Caught up as far as commit order allows: publish what remains, then wait.
                        lag.record(try await store.lag(of: consumer.name))
                        if handled > 0, let gathering { try await Task.sleep(for: gathering) }
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

    /// A failure that may be the event's fault (the handler refused it), as
    /// opposed to the database being away or a transient conflict, which are
    /// retried without counting against the event.
    static func isEventProblem(_ error: any Error, connection: Connection) -> Bool {
        if error is CancellationError || connection.isBroken { return false }
        if let error = error as? PostgresError {
            return !error.isConnectionBroken && error.sqlState?.isTransient != true && error.code != .cancelled
        }
        return true
    }

    /// Waits (as a standby) until this instance holds the consumer's lock.
    private func acquireLeadership(on connection: Connection) async throws -> Bool {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            if try await connection.tryLock(.consumer(consumer.name)) { return true }
            try await Task.sleep(for: pollInterval)
        }
        return false
    }
}
