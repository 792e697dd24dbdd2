import AppStore
import AppStoreTesting
import Foundation
import Hummingbird
import HummingbirdTesting
import Ledger
import SubledgerApp
import SubledgerAppTesting
import Testing

/// The App Store Server API client under load: its queue is bounded in time,
/// a cancelled caller gives its turn back, a huge `Retry-After` blocks no one
/// for long, and history paging ends.
@Suite struct AppStoreAPISaturationTests {
    /// Look Up Order ID at `perSecond` calls a second (its published rate is 10).
    static func paced(_ perSecond: Double, queueWait: Duration) -> @Sendable (inout SubledgerConfiguration) -> Void {
        { configuration in
            configuration.appStoreAPISettings.rateFraction = perSecond / 10
            configuration.appStoreAPISettings.maximumQueueWait = queueWait
        }
    }

    static func lookUp(_ api: AppStoreAPIApp) async throws -> TestResponse {
        try await api.client.get("/v1/orders/MK5TTTVWJH", key: Keys.support)
    }

    @Test func aCallerThatWouldWaitPastTheDeadlineIsAnswered503AtOnce() async throws {
        try await withAppStoreAPI(configure: Self.paced(0.1, queueWait: .seconds(1))) { api in
            await api.fake.script(.lookUpOrder, [AppStoreAPIClientTests.answer([try api.store.sign(productionTransaction("7000000000000001"))])])
            #expect(try await Self.lookUp(api).status == .ok)
            // The next turn is 10 s away, past the 1 s a caller waits.
            let clock = ContinuousClock()
            let started = clock.now
            let refused = try await Self.lookUp(api)
            #expect(refused.status == .serviceUnavailable, "\(refused.status) \(refused.text)")
            #expect(Int(refused.headers[.retryAfter] ?? "") ?? 0 >= 1, "no Retry-After")
            #expect(clock.now - started < .milliseconds(500))
            #expect(await api.fake.calls(.lookUpOrder).count == 1)
        }
    }

    @Test func aCancelledCallerGivesItsTurnBack() async throws {
        try await withAppStoreAPI(configure: Self.paced(0.25, queueWait: .seconds(20))) { api in
            await api.fake.script(.lookUpOrder, [AppStoreAPIClientTests.answer([try api.store.sign(productionTransaction("7000000000000001"))])])
            let client = try api.appStore.requireAPI()
            _ = try await client.lookUpOrder(orderID: "A", environment: .production)
            // Waits for the turn 4 s away, and gives up.
            let waiting = Task { try await client.lookUpOrder(orderID: "B", environment: .production) }
            try await Task.sleep(for: .milliseconds(100))
            waiting.cancel()
            _ = try? await waiting.value
            let clock = ContinuousClock()
            let started = clock.now
            _ = try await client.lookUpOrder(orderID: "C", environment: .production)
            // The turn the cancelled caller held (about 3.9 s away), not the one after it (7.9 s).
            #expect(clock.now - started < .seconds(6), "\(clock.now - started)")
            #expect(await api.fake.calls(.lookUpOrder).map(\.id) == ["A", "C"])
        }
    }

    @Test func aRetryAfterLongerThanTheMaximumBlocksNoOneForLong() async throws {
        try await withAppStoreAPI(configure: { configuration in
            configuration.appStoreAPISettings.maximumRateLimitWait = .seconds(1)
            configuration.appStoreAPISettings.maximumQueueWait = .milliseconds(300)
        }) { api in
            await api.fake.script(.lookUpOrder, [FakeAppStoreServerAPI.rateLimited(retryAt: Date().addingTimeInterval(3600)),
                                                 AppStoreAPIClientTests.answer([try api.store.sign(productionTransaction("7000000000000001"))])])
            let clock = ContinuousClock()
            let started = clock.now
            let refused = try await Self.lookUp(api)
            #expect(refused.status == .serviceUnavailable)
            #expect(clock.now - started < .milliseconds(500), "the hour-long Retry-After was waited out")
            // Apple's hour does not hold the endpoint for an hour.
            try await Task.sleep(for: .milliseconds(1200))
            let later = try await Self.lookUp(api)
            #expect(later.status == .ok, "\(later.status) \(later.text)")
        }
    }

    @Test func historyPagingStopsOnARepeatedToken() async throws {
        try await withAppStoreAPI { api in
            // Every page says there is more, with the same token.
            await api.fake.script(.notificationHistory, [FakeAppStoreServerAPI.history([], next: "again")])
            let reconciler = try #require(api.appStore.reconciler)
            await #expect(throws: AppStoreAPIError.self) {
                try await reconciler.reconcile(environment: .production)
            }
            #expect(await api.fake.calls(.notificationHistory).count == 2)
        }
    }

    @Test func historyPagingStopsAtThePageCap() async throws {
        try await withAppStoreAPI(configure: { $0.appStoreAPISettings.maximumHistoryPages = 3 }) { api in
            await api.fake.script(.notificationHistory, (1...10).map { FakeAppStoreServerAPI.history([], next: "page-\($0)") })
            let reconciler = try #require(api.appStore.reconciler)
            await #expect(throws: AppStoreAPIError.self) {
                try await reconciler.reconcile(environment: .production)
            }
            #expect(await api.fake.calls(.notificationHistory).count == 3)
        }
    }
}
