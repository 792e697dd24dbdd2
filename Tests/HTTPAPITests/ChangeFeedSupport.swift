import EventStore
import Foundation
import Hummingbird
import HummingbirdTesting
import JSON
import Ledger
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
@testable import HTTPAPI
import Testing

/// A receiver of change webhooks on loopback: records every request, answers
/// 500 to the first `failuresPerID` attempts of each id, after `delay`.
actor ChangeReceiver {
    struct Received: Sendable {
        var id: String
        var eventID: String?
        var subscriberID: String
        var sequence: Int64
        var signature: String?
        var body: Data
        var status: Int
    }

    let failuresPerID: Int
    let delay: Duration
    private(set) var requests: [Received] = []
    /// Requests that arrived, answered or not yet.
    private(set) var arrived = 0
    /// Reminders among them.
    private(set) var arrivedReminders = 0
    private var seen: [String: Int] = [:]

    init(failuresPerID: Int = 0, delay: Duration = .zero) {
        self.failuresPerID = failuresPerID
        self.delay = delay
    }

    var accepted: [Received] { requests.filter { $0.status == 200 } }
    var acceptedIDs: Set<String> { Set(accepted.map(\.id)) }

    /// Whether at least so many requests, and so many reminders, arrived.
    func inFlight(changes: Int, reminders: Int) -> Bool {
        arrived >= changes && arrivedReminders >= reminders
    }

    func arrive(body: Data) {
        arrived += 1
        let fields = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
        if ["renewal_reminder", "expiry_prompt"].contains(fields?["type"] as? String ?? "") { arrivedReminders += 1 }
    }

    func receive(body: Data, signature: String?, eventID: String?) -> Int {
        let fields = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
        let id = fields?["id"] as? String ?? ""
        let count = seen[id, default: 0]
        seen[id] = count + 1
        let status = count < failuresPerID ? 500 : 200
        requests.append(Received(id: id, eventID: eventID, subscriberID: fields?["subscriberId"] as? String ?? "",
                                 sequence: (fields?["sequence"] as? NSNumber)?.int64Value ?? -1,
                                 signature: signature, body: body, status: status))
        return status
    }
}

/// Runs `body` with the receiver listening on a free loopback port; passes its URL.
func withChangeReceiver(_ receiver: ChangeReceiver, _ body: @escaping @Sendable (String) async throws -> Void) async throws {
    let router = Router()
    router.post("/changes") { request, _ -> Response in
        let bytes = try await request.body.collect(upTo: 1 << 20)
        let signature = request.headers.first { $0.name.canonicalName == "subledger-signature" }?.value
        let eventID = request.headers.first { $0.name.canonicalName == "subledger-event-id" }?.value
        await receiver.arrive(body: Data(bytes.readableBytesView))
        if receiver.delay > .zero { try await Task.sleep(for: receiver.delay) }
        let status = await receiver.receive(body: Data(bytes.readableBytesView), signature: signature, eventID: eventID)
        return Response(status: .init(code: status))
    }
    let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
    try await app.test(.live) { client in
        try await body("http://127.0.0.1:\(client.port!)/changes")
    }
}

/// The change feed's parts on one database, driven step by step.
struct ChangeFixture: Sendable {
    let dependencies: AppDependencies

    var pool: ConnectionPool { dependencies.pool }

    /// Turns every committed event into changes (the consumer, run to the end).
    /// A consumer reads below the oldest running transaction of the whole
    /// cluster (other tests' databases included), so a round may find nothing
    /// yet: it goes on until none is left to read.
    func project() async throws {
        let consumer = ChangeFeedConsumer(catalog: dependencies.catalog.catalog)
        let store = dependencies.store
        let deadline = ContinuousClock.now + .seconds(30)
        while try await store.lag(of: ChangeFeedConsumer.consumerName) > 0 {
            guard ContinuousClock.now < deadline else {
                Issue.record("the feed's consumer did not catch up in time")
                return
            }
            if try await dependencies.pool.withConnection({ try await store.processBatch(consumer, limit: 500, on: $0) }) == 0 {
                try await Task.sleep(for: .milliseconds(20))
            }
        }
    }

    func sweeper(now: @escaping @Sendable () -> Date = { Date() }) -> ChangeTimeSweeper {
        ChangeTimeSweeper(pool: pool, catalog: dependencies.catalog.catalog, now: now)
    }

    func dispatcher(firstRetry: Duration = .milliseconds(50)) -> ChangeDispatcher {
        var settings = ChangeDispatcher.Settings()
        settings.firstRetry = firstRetry
        settings.requestTimeout = .seconds(5)
        settings.lease = .seconds(30)
        settings.destinations = WebhookDestinations(allowPrivate: dependencies.configuration.webhookAllowPrivate)
        return ChangeDispatcher(pool: pool, conninfo: pool.configuration.conninfo, settings: settings)
    }

    /// Dispatch rounds until `done` holds (or 30 s pass).
    /// Runs rounds until `done`. The bound only ends a dispatch that never
    /// finishes: beside every other suite on two cores, a crashed service's
    /// thirty deliveries have taken over 30 s to settle.
    func dispatch(_ dispatcher: ChangeDispatcher, until done: @Sendable () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(120)
        while try await !done() {
            guard ContinuousClock.now < deadline else {
                Issue.record("deliveries did not finish in time")
                return
            }
            if try await dispatcher.dispatchDue() == 0 { try await Task.sleep(for: .milliseconds(20)) }
        }
    }

    /// Every stored change: (id, subscriber, sequence, type, body), in the feed's order.
    func changes() async throws -> [(id: String, subscriberID: String, sequence: Int64, type: String, body: String)] {
        try await pool.query("""
            SELECT id, subscriber_id, sequence, type, body::text FROM changes ORDER BY transaction_id, feed_position
            """).map {
            (try $0.decode(String.self, at: 0), try $0.decode(String.self, at: 1), try $0.decode(Int64.self, at: 2),
             try $0.decode(String.self, at: 3), try $0.decode(String.self, at: 4))
        }
    }

    func pendingDeliveries() async throws -> Int64 {
        try await pool.query("SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'").first!.decode(Int64.self, at: 0)
    }

    static func with(_ body: @escaping @Sendable (any TestClientProtocol, ChangeFixture) async throws -> Void) async throws {
        try await withApp { client, dependencies in
            try await body(client, ChangeFixture(dependencies: dependencies))
        }
    }
}

/// Reads a whole feed through the router, page by page, until `expected`
/// changes came, then on to its end.
func pullAll(_ client: some TestClientProtocol, query: String = "", limit: Int = 7,
             expected: Int) async throws -> (ids: [String], bodies: [JSONValue]) {
    let bodies = try await pull(client, query: query, limit: limit, expecting: "\(expected) changes") { $0.count >= expected }
    return (bodies.compactMap { $0["id"]?.string }, bodies)
}

/// Reads a feed through the router, page by page, until what came satisfies
/// `complete`, then on to its end. A change shows once every older
/// transaction of the whole cluster ended, other tests' databases included:
/// one test's long transaction can hold every feed back for seconds, so an
/// empty page is waited past until a minute is up.
func pull(_ client: some TestClientProtocol, query: String = "", limit: Int = 7, expecting: String,
          until complete: ([JSONValue]) -> Bool) async throws -> [JSONValue] {
    var cursor = ""
    var bodies: [JSONValue] = []
    let deadline = ContinuousClock.now + .seconds(60)
    while true {
        let waiting = !complete(bodies)
        let response = try await client.get("/v1/changes?limit=\(limit)&wait=\(waiting ? 2 : 0)&after=\(cursor)\(query)", key: Keys.support)
        #expect(response.status == .ok, "\(response.text)")
        let page = response.json["changes"]?.array ?? []
        guard let next = response.json["nextCursor"]?.string else {
            Issue.record("nextCursor missing")
            return bodies
        }
        bodies += page
        cursor = next
        guard page.isEmpty else { continue }
        if !waiting { return bodies }
        if ContinuousClock.now >= deadline {
            Issue.record("the feed held \(bodies.count) changes after a minute, \(expecting) expected: \(bodies)")
            return bodies
        }
    }
}

/// A purchase of the monthly auto-renewable subscription, ending at `expires`.
func monthlyJSON(_ transactionID: String, at purchaseDate: Date, expires: Date, original: String? = nil) -> String {
    purchaseJSON(transactionID, product: "com.example.pro.monthly", at: RFC3339.format(purchaseDate),
                 original: original ?? transactionID, expires: RFC3339.format(expires))
}
