import AppStore
import AppStoreTesting
import Foundation
import Hummingbird
import HummingbirdTesting
import Ledger
import Postgres
import SubledgerApp
import SubledgerAppTesting
import Testing

/// Reconciliation of missed notifications with Get Notification History, on the fake.
struct AppStoreReconcileTests {
    /// A SUBSCRIBED notification about its own original transaction, for `subscriber`.
    static func subscribed(_ store: TestAppStore, _ transactionID: String, subscriber: String = TestAppStore.subscriberID,
                           uuid: String = UUID().uuidString.lowercased()) throws -> String {
        let transaction = productionTransaction(transactionID, subscriber: subscriber)
        return try store.signedNotification(.subscribed, .initialBuy, transaction: transaction, renewal: nil,
                                            environment: .production, uuid: uuid)
    }

    func reconcile(_ api: AppStoreAPIApp, since: Date? = nil) async throws -> NotificationReconciler.Report {
        let reconciler = try #require(api.appStore.reconciler)
        return try await reconciler.reconcile(environment: .production, since: since)
    }

    @Test func aMissedNotificationIsRecoveredAndAppliedOnce() async throws {
        try await withAppStoreAPI { api in
            let missed = try Self.subscribed(api.store, "8000000000000001", uuid: "missed-1")
            await api.fake.script(.notificationHistory, [FakeAppStoreServerAPI.history([missed])])
            let first = try await reconcile(api)
            #expect(first.recovered == 1)
            #expect(first.notifications == 1)
            #expect(try await api.app.counts() == Counts(events: 1, notifications: 1))
            #expect(try await api.app.row("missed-1").suffix(2) == ["applied", "true"])
            let state = try await api.app.state(alice, at: "2025-03-15T00:00:00Z", environment: "Production")
            #expect(state["subscriptions"]?.array.first?["originalTransactionId"]?.string == "8000000000000001")
            #expect(state["entitlements"]?.array.first?["active"]?.bool == true)
            // Stored to the microsecond.
            #expect(abs(first.reconciledUntil.timeIntervalSince(first.windowEnd)) < 0.001)

            // Again, and then by POST: nothing changes.
            let second = try await reconcile(api)
            #expect(second.recovered == 0)
            let posted = try await api.app.post(missed)
            #expect(posted.json["duplicate"]?.bool == true)
            #expect(try await api.app.counts() == Counts(events: 1, notifications: 1))

            // The second window starts a little before the first one's end (the overlap).
            let bodies = await api.fake.calls(.notificationHistory).map {
                (try? JSONSerialization.jsonObject(with: $0.body)) as? [String: Int64] ?? [:]
            }
            let secondStart = Date(timeIntervalSince1970: Double(bodies[1]["startDate"] ?? 0) / 1000)
            #expect(abs(secondStart.timeIntervalSince(first.windowEnd) + 600) < 1)
            #expect(bodies[1]["endDate"] ?? 0 > bodies[1]["startDate"] ?? 0)
        }
    }

    @Test func aNotificationPostedDuringTheReconcileIsAppliedOnce() async throws {
        // The POST runs while the history call waits for its answer: on a loaded
        // machine it may take longer than the tests' usual 5 s client timeout,
        // after which the reconciler would ask again and find it first.
        try await withAppStoreAPI(configure: { $0.appStoreAPISettings.requestTimeout = .seconds(120) }) { api in
            let notification = try Self.subscribed(api.store, "8000000000000002", uuid: "during-1")
            await api.fake.script(.notificationHistory, [FakeAppStoreServerAPI.history([notification])])
            // Apple's retry reaches the service while reconciliation waits for the history.
            await api.fake.beforeNext(.notificationHistory) {
                let response = try await api.app.post(notification)
                #expect(response.json["duplicate"]?.bool == false)
            }
            let report = try await reconcile(api)
            #expect(report.recovered == 0)
            #expect(try await api.app.counts() == Counts(events: 1, notifications: 1))
        }
    }

    @Test func notificationsPostedConcurrentlyWithTheReconcileAreAppliedOnce() async throws {
        try await withAppStoreAPI { api in
            let notifications = try (1...6).map { try Self.subscribed(api.store, "80000000000001\($0)", subscriber: "racer-\($0)") }
            await api.fake.script(.notificationHistory, [FakeAppStoreServerAPI.history(notifications)])
            async let reconciled = reconcile(api)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for notification in notifications {
                    group.addTask {
                        let status = try await api.app.post(notification).status
                        #expect(status == .ok)
                    }
                }
                try await group.waitForAll()
            }
            let report = try await reconciled
            #expect(report.notifications == 6)
            #expect(try await api.app.counts() == Counts(events: 6, notifications: 6))
            for index in 1...6 {
                let history = try await api.client.get("/v1/subscribers/racer-\(index)/history").json["events"]?.array ?? []
                #expect(history.map { $0["type"]?.string } == ["purchased"])
            }
        }
    }

    @Test func historyIsReadAcrossPages() async throws {
        try await withAppStoreAPI { api in
            let pages = try (0..<3).map { page in
                try (0..<2).map { try Self.subscribed(api.store, "81000000000000\(page)\($0)", subscriber: "paged-\(page)-\($0)") }
            }
            await api.fake.script(.notificationHistory, [
                FakeAppStoreServerAPI.history(pages[0], next: "token+/2="),
                FakeAppStoreServerAPI.history(pages[1], next: "token-3"),
                FakeAppStoreServerAPI.history(pages[2]),
            ])
            let report = try await reconcile(api)
            #expect(report.pages == 3)
            #expect(report.recovered == 6)
            #expect(try await api.app.counts() == Counts(events: 6, notifications: 6))
            let calls = await api.fake.calls(.notificationHistory)
            #expect(calls.map(\.paginationToken) == [nil, "token+/2=", "token-3"])
            // Every page asks for the same window.
            #expect(Set(calls.map(\.body)).count == 1)
        }
    }

    @Test func aRateLimitedHistoryWaitsForRetryAfter() async throws {
        try await withAppStoreAPI { api in
            let retryAt = Date().addingTimeInterval(0.3)
            await api.fake.script(.notificationHistory, [
                FakeAppStoreServerAPI.rateLimited(retryAt: retryAt),
                FakeAppStoreServerAPI.history([try Self.subscribed(api.store, "8200000000000001")]),
            ])
            let report = try await reconcile(api)
            #expect(report.recovered == 1)
            let calls = await api.fake.calls(.notificationHistory)
            #expect(calls.count == 2)
            #expect(calls[1].at.timeIntervalSince(retryAt) > -0.01)
        }
    }

    /// Rows stored as `rejected`: their error code and message.
    func rejectedRows(_ api: AppStoreAPIApp) async throws -> [(code: String, message: String)] {
        try await api.dependencies.pool.query("""
            SELECT coalesce(error_code, ''), coalesce(error_message, '') FROM appstore_notifications
            WHERE status = 'rejected' ORDER BY notification_uuid
            """).map { (code: try $0.decode(String.self, at: 0), message: try $0.decode(String.self, at: 1)) }
    }

    /// One item of Apple's answer that fails verification neither stops the
    /// run nor hides the items after it: it is stored `rejected` with its
    /// reason, and the checkpoint moves past it.
    @Test func aForgedItemIsStoredRejectedAndTheReconcileGoesOn() async throws {
        try await withAppStoreAPI { api in
            let before = try Self.subscribed(api.store, "8300000000000001", subscriber: "before-forged", uuid: "good-before")
            let forged = try Self.subscribed(AppStoreNotificationTests.stranger, "8300000000000002", subscriber: "forged",
                                             uuid: "forged-1")
            let after = try Self.subscribed(api.store, "8300000000000003", subscriber: "after-forged", uuid: "good-after")
            await api.fake.script(.notificationHistory, [FakeAppStoreServerAPI.history([before, forged, after])])
            let reconciler = try #require(api.appStore.reconciler)
            let first = try await reconciler.reconcile(environment: .production)
            #expect(first.recovered == 2)
            #expect(try await api.app.row("good-before").suffix(2) == ["applied", "true"])
            #expect(try await api.app.row("good-after").suffix(2) == ["applied", "true"])
            let rejected = try await rejectedRows(api)
            #expect(rejected.map(\.code) == ["untrusted_root"])
            #expect(rejected.first?.message.contains("notificationHistory[1].signedPayload") == true, "\(rejected)")
            // Stored under an id of its own: the uuid it claims stays free for the real one.
            #expect(try await api.app.row("forged-1") == [])
            #expect(try await reconciler.reconciledUntil(.production) == first.reconciledUntil)

            // The next run reads it again, stores nothing twice, and moves on.
            let second = try await reconciler.reconcile(environment: .production)
            #expect(second.recovered == 0)
            #expect(second.reconciledUntil > first.reconciledUntil)
            #expect(try await rejectedRows(api).count == 1)
            #expect(try await api.app.counts() == Counts(events: 2, notifications: 3))
        }
    }

    @Test func anItemThatIsNotEvenAJWSIsStoredRejected() async throws {
        try await withAppStoreAPI { api in
            let good = try Self.subscribed(api.store, "8300000000000011", subscriber: "beside-garbage", uuid: "good-beside-garbage")
            await api.fake.script(.notificationHistory, [FakeAppStoreServerAPI.history(["not a jws", good])])
            let report = try await reconcile(api)
            #expect(report.recovered == 1)
            #expect(try await api.app.row("good-beside-garbage").suffix(2) == ["applied", "true"])
            #expect(try await rejectedRows(api).map(\.code) == ["invalid_jws"])
        }
    }

    @Test func theCheckpointStaysWhenAppleIsAway() async throws {
        try await withAppStoreAPI { api in
            await api.fake.script(.notificationHistory, [FakeAppStoreServerAPI.history([])])
            let first = try await reconcile(api)
            await api.fake.script(.notificationHistory, [FakeAppStoreServerAPI.Answer(status: 503, body: "down")])
            let reconciler = try #require(api.appStore.reconciler)
            await #expect(throws: AppStoreAPIError.self) { try await reconciler.reconcile(environment: .production) }
            #expect(try await reconciler.reconciledUntil(.production) == first.reconciledUntil)

            // A window that starts after the checkpoint leaves a gap: the checkpoint stays.
            await api.fake.script(.notificationHistory, [FakeAppStoreServerAPI.history([])])
            let later = try await reconcile(api, since: Date().addingTimeInterval(60))
            #expect(later.reconciledUntil == first.reconciledUntil)
            // One from before it moves it on.
            let earlier = try await reconcile(api, since: first.windowStart)
            #expect(earlier.reconciledUntil > first.reconciledUntil)
        }
    }

    @Test func oneWorkerLeadsAndAStandbyTakesOver() async throws {
        try await withAppStoreAPI { api in
            await api.fake.script(.notificationHistory, [FakeAppStoreServerAPI.history([])])
            await api.fake.script(.notificationHistory, environment: "sandbox", [FakeAppStoreServerAPI.history([])])
            // Two instances; the second reaches "production" under /sandbox, so the fake tells them apart.
            var other = api.dependencies
            other.configuration.appStoreAPIURL = api.baseURL + "/sandbox"
            let conninfo = api.dependencies.pool.configuration.conninfo
            func worker(_ dependencies: AppDependencies) throws -> ReconcileWorker {
                var worker = ReconcileWorker(reconciler: try #require(AppStoreIntegration(dependencies).reconciler),
                                             environments: [.production], interval: .milliseconds(50), conninfo: conninfo)
                worker.standbyPoll = .milliseconds(50)
                return worker
            }
            let leader = try worker(api.dependencies), standby = try worker(other)
            /// Waits (up to 30 s on a loaded machine) for `count` history calls under `environment`.
            func waitForCalls(_ count: Int, _ environment: String) async throws -> Bool {
                let deadline = ContinuousClock.now + .seconds(30)
                while ContinuousClock.now < deadline {
                    if await api.fake.calls(.notificationHistory, environment: environment).count >= count { return true }
                    try await Task.sleep(for: .milliseconds(20))
                }
                return false
            }
            let first = Task { await leader.runUntilCancelled() }
            #expect(try await waitForCalls(2, "production"))
            let second = Task { await standby.runUntilCancelled() }
            // The leader goes on for several more rounds; the standby, polling every 50 ms, never runs one.
            let sofar = await api.fake.calls(.notificationHistory).count
            #expect(try await waitForCalls(sofar + 5, "production"))
            #expect(await api.fake.calls(.notificationHistory, environment: "sandbox").isEmpty)
            first.cancel()
            await first.value
            #expect(try await waitForCalls(2, "sandbox"))
            second.cancel()
            await second.value
        }
    }

    @Test func reconcileIntervalsAreISODurations() throws {
        #expect(try ClockDuration.parse("PT1H") == .seconds(3600))
        #expect(try ClockDuration.parse("P1DT30M") == .seconds(86_400 + 1800))
        #expect(try ClockDuration.parse("P0D") == .zero)
        #expect(throws: ClockDuration.ParseError.self) { try ClockDuration.parse("P1M") }
        #expect(throws: ClockDuration.ParseError.self) { try ClockDuration.parse("1h") }
        #expect(try SubledgerConfiguration(environment: [:]).appStoreReconcileInterval == .seconds(3600))
        #expect(try SubledgerConfiguration(environment: ["SUBLEDGER_APPSTORE_RECONCILE_INTERVAL": "P0D"]).appStoreReconcileInterval == nil)
        #expect(try SubledgerConfiguration(environment: ["SUBLEDGER_APPSTORE_RECONCILE_INTERVAL": "PT15M"]).appStoreReconcileInterval
            == .seconds(900))
        #expect(throws: ConfigurationError.self) { try SubledgerConfiguration(environment: ["SUBLEDGER_APPSTORE_RECONCILE_INTERVAL": "hourly"]) }
        #expect(try SubledgerConfiguration(environment: ["SUBLEDGER_APPSTORE_ENVIRONMENTS": "Sandbox"]).reconcileEnvironments == [.sandbox])
        #expect(try SubledgerConfiguration(environment: [:]).reconcileEnvironments == [.production])
        #expect(try SubledgerConfiguration(environment: ["SUBLEDGER_RESTORE_VERIFY": "api"]).restoreVerification == .api)
        #expect(throws: ConfigurationError.self) { try SubledgerConfiguration(environment: ["SUBLEDGER_RESTORE_VERIFY": "yes"]) }
    }
}
