import AppStore
import Foundation
import Ledger
import Postgres

/// What became of a test notification (`subledger appstore test-notification`).
public struct TestNotificationOutcome: Sendable, CustomStringConvertible {
    public var token: String
    public var notificationUUID: String?
    /// Apple's send attempts, oldest first (`SUCCESS` or why it failed).
    public var attempts: [String]
    /// Whether this service stored it (Apple delivered it here).
    public var isStored: Bool
    public var message: String

    public var description: String { message }
}

extension AppStoreIntegration {
    /// Request a Test Notification, then Get Test Notification Status until
    /// Apple reports an attempt and this service has the notification stored
    /// (or Apple reports a failed attempt, or `timeout` passes).
    public func sendTestNotification(environment: Ledger.Environment, pollInterval: Duration = .seconds(2),
                                     timeout: Duration = .seconds(120),
                                     progress: (@Sendable (String) -> Void)? = nil) async throws -> TestNotificationOutcome {
        let api = try requireAPI()
        let token = try await api.requestTestNotification(environment: environment)
        progress?("Apple accepted the request; waiting for the notification")
        var outcome = TestNotificationOutcome(token: token, attempts: [], isStored: false,
                                              message: "Apple reported no attempt to send the test notification within \(timeout).")
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let status = try await api.testNotificationStatus(token: token, environment: environment) {
                let uuid = status.notification.notification.payload.notificationUUID
                outcome.notificationUUID = uuid
                outcome.attempts = status.attempts.map(\.result)
                let stored = try await writer.pool.withConnection { try await NotificationStore.status(of: uuid, on: $0) }
                if stored != nil {
                    outcome.isStored = true
                    outcome.message = "The test notification \(uuid) arrived and is stored (Apple's attempts: \(outcome.attempts.joined(separator: ", ")))."
                    return outcome
                }
                if let last = status.attempts.last, last.result != "SUCCESS" {
                    outcome.message = "Apple could not deliver the test notification \(uuid): \(last.result). Check the URL in App Store Connect (App Information → App Store Server Notifications) and that it reaches POST /v1/appstore/notifications."
                    return outcome
                }
                if status.attempts.last?.result == "SUCCESS" {
                    outcome.message = "Apple delivered the test notification \(uuid) with success, but this service's database has no row for it: the URL in App Store Connect reaches another server or database."
                    progress?("Apple reports a successful delivery; waiting for it to be stored here")
                } else {
                    progress?("Apple has not sent it yet")
                }
            } else {
                progress?("Apple has not sent it yet")
            }
            try await Task.sleep(for: pollInterval)
        }
        return outcome
    }
}
