import AppStore
import AppStoreTesting
import Foundation
import Hummingbird
import HummingbirdTesting
import Ledger
import SubledgerApp
import SubledgerAppTesting
import Testing

/// `subledger appstore test-notification`: Request a Test Notification, then
/// Get Test Notification Status until it is stored here.
struct AppStoreTestNotificationTests {
    @Test func aTestNotificationArrives() async throws {
        try await withAppStoreAPI { api in
            let test = try api.store.signedNotification(.test, environment: .production, uuid: "test-notification-1")
            await api.fake.script(.requestTestNotification, [FakeAppStoreServerAPI.json(["testNotificationToken": "token-1"])])
            await api.fake.script(.testNotificationStatus, [
                FakeAppStoreServerAPI.Answer(status: 404, body: #"{"errorCode": 4040008, "errorMessage": "Not found"}"#),
                FakeAppStoreServerAPI.json(["signedPayload": test, "sendAttempts": [["attemptDate": 1_750_000_000_000, "sendAttemptResult": "SUCCESS"]]]),
            ])
            await api.fake.beforeNext(.testNotificationStatus) {}
            // Apple delivers it while the command polls.
            await api.fake.beforeNext(.testNotificationStatus) { _ = try await api.app.post(test) }
            let outcome = try await api.appStore.sendTestNotification(environment: .production, pollInterval: .milliseconds(10),
                                                                      timeout: .seconds(10))
            #expect(outcome.isStored, "\(outcome)")
            #expect(outcome.notificationUUID == "test-notification-1")
            #expect(outcome.attempts == ["SUCCESS"])
            #expect(await api.fake.calls(.testNotificationStatus).first?.id == "token-1")
        }
    }

    @Test func aTestNotificationAppleCannotDeliverIsReported() async throws {
        try await withAppStoreAPI { api in
            let test = try api.store.signedNotification(.test, environment: .production, uuid: "test-notification-2")
            await api.fake.script(.requestTestNotification, [FakeAppStoreServerAPI.json(["testNotificationToken": "token-2"])])
            await api.fake.script(.testNotificationStatus, [
                FakeAppStoreServerAPI.json(["signedPayload": test, "sendAttempts": [["attemptDate": 1_750_000_000_000, "sendAttemptResult": "TIMED_OUT"]]]),
            ])
            let outcome = try await api.appStore.sendTestNotification(environment: .production, pollInterval: .milliseconds(10),
                                                                      timeout: .seconds(10))
            #expect(!outcome.isStored)
            #expect(outcome.message.contains("TIMED_OUT"))
        }
    }
}
