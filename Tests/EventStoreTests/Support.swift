import EventStore
import Foundation
import Postgres
import TestSupport

/// A store on a fresh database, writing batches `batchAppend`'s way.
func makeStore(poolSize: Int = 24, batchAppend: BatchAppend = .eventByEvent) async throws -> (EventStore, String) {
    let conninfo = try await TestDatabase.make()
    let pool = ConnectionPool(configuration: PoolConfiguration(conninfo: conninfo, maximumConnections: poolSize, leaseTimeout: .seconds(30)))
    return (EventStore(pool: pool, batchAppend: batchAppend), conninfo)
}

func event(_ type: String = "happened", value: Int = 0, key: String? = nil) -> NewEvent {
    NewEvent(type: type, data: Data(#"{"value": \#(value)}"#.utf8), metadata: EventMetadata(source: "test"), idempotencyKey: key)
}

/// A read model: per stream, how many events and the sum of their values, plus
/// every applied position (so a double application shows).
struct CountingConsumer: EventConsumer {
    let name: String
    /// Throw after writing the read model, before the checkpoint, this many times.
    let failures: FailureBudget?

    init(name: String = "counting", failures: FailureBudget? = nil) {
        self.name = name
        self.failures = failures
    }

    static func createTables(on pool: ConnectionPool) async throws {
        try await pool.withConnection { connection in
            try await connection.execute(unsafeSQL: """
                CREATE TABLE IF NOT EXISTS counts (stream_id text PRIMARY KEY, events integer NOT NULL, total bigint NOT NULL);
                CREATE TABLE IF NOT EXISTS applied (position bigint NOT NULL, consumer text NOT NULL);
                """)
        }
    }

    func handle(_ events: [RecordedEvent], on connection: Connection) async throws {
        for event in events {
            let value = (try JSONSerialization.jsonObject(with: event.data) as? [String: Any])?["value"] as? Int ?? 0
            try await connection.query("""
                INSERT INTO counts (stream_id, events, total) VALUES (\(event.streamID), 1, \(value))
                ON CONFLICT (stream_id) DO UPDATE SET events = counts.events + 1, total = counts.total + excluded.total
                """)
            try await connection.query("INSERT INTO applied (position, consumer) VALUES (\(event.position), \(name))")
        }
        if let failures, await failures.take() { throw InjectedFailure() }
    }

    func reset(on connection: Connection) async throws {
        try await connection.query("DELETE FROM counts")
        try await connection.query("DELETE FROM applied WHERE consumer = \(name)")
    }
}

/// A consumer whose handler first passes `gate`.
struct GatedConsumer: EventConsumer {
    let inner: CountingConsumer
    let gate: Gate
    var name: String { inner.name }

    func handle(_ events: [RecordedEvent], on connection: Connection) async throws {
        await gate.pass()
        try await inner.handle(events, on: connection)
    }

    func reset(on connection: Connection) async throws { try await inner.reset(on: connection) }
}

struct InjectedFailure: Error {}

actor FailureBudget {
    var remaining: Int
    init(_ remaining: Int) { self.remaining = remaining }
    func take() -> Bool {
        guard remaining > 0 else { return false }
        remaining -= 1
        return true
    }
}

/// Runs batches until the consumer has nothing left to read.
@discardableResult
func drain(_ store: EventStore, _ consumer: some EventConsumer, batch: Int = 100) async throws -> Int {
    var total = 0
    while true {
        let handled = try await store.pool.withConnection { try await store.processBatch(consumer, limit: batch, on: $0) }
        total += handled
        if handled == 0 { return total }
    }
}

/// Waits until `count` events are readable in commit order. The horizon is
/// cluster-wide: a transaction open in another test's database holds it back
/// for a moment (the documented cost of never skipping).
func waitUntilVisible(_ store: EventStore, _ count: Int) async throws {
    let deadline = ContinuousClock.now + .seconds(30)
    while try await store.readCommitted(after: .start, limit: count + 1).count < count {
        guard ContinuousClock.now < deadline else { throw VisibilityTimeout() }
        try await Task.sleep(for: .milliseconds(20))
    }
}

struct VisibilityTimeout: Error {}

func snapshot(_ pool: ConnectionPool) async throws -> [String] {
    try await pool.query("SELECT stream_id, events, total FROM counts ORDER BY stream_id").map {
        "\(try $0.decode(String.self, at: 0)):\(try $0.decode(Int.self, at: 1)):\(try $0.decode(Int64.self, at: 2))"
    }
}


/// Refuses every event of one type (a handler bug or an event it cannot read).
struct RefusingConsumer: EventConsumer {
    let inner: CountingConsumer
    let refusedType: String
    var name: String { inner.name }

    func handle(_ events: [RecordedEvent], on connection: Connection) async throws {
        if events.contains(where: { $0.type == refusedType }) { throw InjectedFailure() }
        try await inner.handle(events, on: connection)
    }

    func reset(on connection: Connection) async throws { try await inner.reset(on: connection) }
}
