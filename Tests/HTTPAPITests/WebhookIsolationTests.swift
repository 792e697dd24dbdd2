import Foundation
import Hummingbird
import HummingbirdTesting
import Ledger
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
@testable import HTTPAPI
import Testing

/// One slow or failing endpoint never delays another's deliveries.
@Suite("Webhook isolation", .timeLimit(.minutes(3)))
struct WebhookIsolationTests {
    /// Two endpoints, one answering after 9 s: the other's deliveries keep
    /// their rate. With a round that waits for every claimed delivery (as
    /// before), the fast endpoint would get at most a batch per 9 s.
    @Test func aSlowEndpointDoesNotDelayAFastOne() async throws {
        try await ChangeFixture.with { client, fixture in
            let fast = ChangeReceiver()
            let slow = ChangeReceiver(delay: .seconds(9))
            try await withChangeReceiver(fast) { fastURL in
                try await withChangeReceiver(slow) { slowURL in
                    #expect(try await client.post("/v1/webhooks", #"{"url": "\#(fastURL)"}"#, key: Keys.admin).status == .created)
                    let running = Task { await fixture.loopingDispatcher().runUntilCancelled() }
                    defer { running.cancel() }
                    // Alone: 2 changes per subscriber (purchased, entitlement_gained).
                    let subscribers = 60
                    let alone = try await Self.publishAndTime(client, fixture, first: 0, count: subscribers, to: fast,
                                                              expected: 2 * subscribers)
                    #expect(try await client.post("/v1/webhooks", #"{"url": "\#(slowURL)"}"#, key: Keys.admin).status == .created)
                    let beside = try await Self.publishAndTime(client, fixture, first: subscribers, count: subscribers, to: fast,
                                                               expected: 4 * subscribers)
                    let rateAlone = Double(2 * subscribers) / alone.timeInterval
                    let rateBeside = Double(2 * subscribers) / beside.timeInterval
                    print("webhook isolation: fast endpoint alone \(Int(rateAlone)) deliveries/s (\(alone)), "
                          + "beside one answering after 9 s \(Int(rateBeside)) deliveries/s (\(beside))")
                    // 120 deliveries, more than three batches of 32: waiting
                    // for the slow endpoint's batch would take 27 s or more.
                    #expect(beside < .seconds(9), "the fast endpoint waited for the slow one: \(beside)")
                    #expect(await slow.arrived > 0, "the slow endpoint was sent its deliveries too")
                }
            }
        }
    }

    /// Two instances' loops over one database, two endpoints, subscribers
    /// with several changes each: every change reaches each endpoint once,
    /// each subscriber's in `sequence` order (the claims' row locks and the
    /// head-of-queue rule, kept by the per-endpoint claim).
    @Test func twoLoopsSendEachChangeOnceAndInOrderPerSubscriber() async throws {
        try await ChangeFixture.with { client, fixture in
            let first = ChangeReceiver()
            let second = ChangeReceiver(delay: .milliseconds(30))
            try await withChangeReceiver(first) { firstURL in
                try await withChangeReceiver(second) { secondURL in
                    for url in [firstURL, secondURL] {
                        #expect(try await client.post("/v1/webhooks", #"{"url": "\#(url)"}"#, key: Keys.admin).status == .created)
                    }
                    let loops = (0..<2).map { _ in Task { await fixture.loopingDispatcher().runUntilCancelled() } }
                    defer { loops.forEach { $0.cancel() } }
                    let start = Date() - 10 * 86_400
                    for index in 0..<30 {
                        #expect(try await client.post("/v1/subscribers/two-\(index)/events",
                                                      monthlyJSON("two-\(index)", at: start, expires: start + 30 * 86_400)).status == .created)
                        #expect(try await client.post("/v1/subscribers/two-\(index)/events",
                                                      purchaseJSON("two-l\(index)", product: "com.example.level2")).status == .created)
                    }
                    try await fixture.project()
                    let stored = try await fixture.changes()
                    let started = ContinuousClock.now
                    for receiver in [first, second] {
                        while await receiver.acceptedIDs.count < stored.count, ContinuousClock.now - started < .seconds(60) {
                            try await Task.sleep(for: .milliseconds(20))
                        }
                        let requests = await receiver.requests
                        #expect(requests.count == stored.count, "each change once: \(requests.count) requests, \(stored.count) changes")
                        #expect(Set(requests.map(\.id)) == Set(stored.map(\.id)))
                        for index in 0..<30 {
                            let sequences = requests.filter { $0.subscriberID == "two-\(index)" }.map(\.sequence)
                            #expect(sequences == sequences.sorted() && sequences.count > 2, "two-\(index): \(sequences)")
                        }
                    }
                }
            }
        }
    }

    /// Publishes purchases of `count` subscribers and returns how long it took
    /// until `receiver` had accepted `expected` changes in all.
    static func publishAndTime(_ client: some TestClientProtocol, _ fixture: ChangeFixture, first: Int, count: Int,
                               to receiver: ChangeReceiver, expected: Int) async throws -> Duration {
        for index in first..<(first + count) {
            let response = try await client.post("/v1/subscribers/iso-\(index)/events",
                                                 purchaseJSON("iso-t\(index)", product: "com.example.level2"))
            #expect(response.status == .created)
        }
        let started = ContinuousClock.now
        try await fixture.project()
        while await receiver.acceptedIDs.count < expected, ContinuousClock.now - started < .seconds(60) {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(await receiver.acceptedIDs.count == expected)
        return ContinuousClock.now - started
    }
}

extension ChangeFixture {
    /// A dispatcher for its loop, with the service's timeout (10 s) and a short breaker pause.
    func loopingDispatcher(breaker: WebhookLanes.BreakerSettings = .init(), firstRetry: Duration = .seconds(10)) -> ChangeDispatcher {
        var settings = ChangeDispatcher.Settings()
        settings.requestTimeout = .seconds(10)
        settings.lease = .seconds(30)
        settings.firstRetry = firstRetry
        settings.breaker = breaker
        settings.destinations = WebhookDestinations(allowPrivate: dependencies.configuration.webhookAllowPrivate)
        return ChangeDispatcher(pool: pool, conninfo: pool.configuration.conninfo, settings: settings)
    }
}
