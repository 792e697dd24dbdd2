import AppStore
import AppStoreTesting
import Foundation
import Hummingbird
import HummingbirdTesting
import SubledgerAppTesting
import Testing

/// Every shape of notification Apple sends, from Apple's own samples
/// (`AppleSamples`), through `POST /v1/appstore/notifications`: `data`,
/// `summary` (https://developer.apple.com/documentation/appstoreservernotifications/summary),
/// `appData` (https://developer.apple.com/documentation/appstoreservernotifications/appdata) and
/// `externalPurchaseToken` (https://developer.apple.com/documentation/appstoreservernotifications/externalpurchasetoken).
/// Apple retries anything but a 200 for days
/// (https://developer.apple.com/documentation/appstoreservernotifications/responding-to-app-store-server-notifications),
/// so a validly signed one for this app is acknowledged and stored, whatever its shape.
struct AppStoreNotificationShapeTests {
    /// The router and database of the notification tests.
    let notifications = AppStoreNotificationTests()

    static func notificationType(_ json: String) -> String? {
        (try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])?["notificationType"] as? String
    }

    @Test(arguments: AppleSamples.notifications.map(\.name))
    func everyShapeForThisAppIsAcknowledgedAndStored(_ name: String) async throws {
        let json = try #require(AppleSamples.notifications.first { $0.name == name }?.json)
        try await notifications.withAppStore { app in
            let uuid = UUID().uuidString.lowercased()
            let signed = try app.store.signedSample(json, uuid: uuid)
            let response = try await app.post(signed)
            #expect(response.status == .ok, "\(name): \(response.text)")
            #expect(response.json["notificationUUID"]?.string == uuid)
            #expect(response.json["duplicate"]?.bool == false)
            let row = try await app.row(uuid)
            #expect(row.first == Self.notificationType(json), "\(name): \(row)")
            // Apple's retry finds it stored.
            let retried = try await app.post(signed)
            #expect(retried.status == .ok)
            #expect(retried.json["duplicate"]?.bool == true)
            #expect(try await app.counts().notifications == 1)
        }
    }

    @Test(arguments: AppleSamples.notifications.map(\.name))
    func everyShapeForAnotherAppIsRefusedAndNotStored(_ name: String) async throws {
        let json = try #require(AppleSamples.notifications.first { $0.name == name }?.json)
        try await notifications.withAppStore { app in
            let uuid = UUID().uuidString.lowercased()
            let response = try await app.post(try app.store.signedSample(json, bundleID: "com.example.someone-else", uuid: uuid))
            #expect(response.status == .badRequest, "\(name): \(response.text)")
            #expect(response.error.code == "bundle_id_mismatch")
            #expect(try await app.row(uuid) == [])
            #expect(try await app.counts() == Counts(events: 0, notifications: 0))
        }
    }
}
