import AppStoreTesting
import AppStore
import Foundation
import Hummingbird
import HummingbirdTesting
import JSON
import Ledger
import Postgres
import HTTPAPI
import SubledgerApp
import SubledgerAppTesting
import Testing

struct Counts: Equatable, CustomStringConvertible {
    var events: Int
    var notifications: Int
    var description: String { "events \(events), notifications \(notifications)" }
}

/// The router under test, the store signing for it, and the database behind it.
struct AppStoreApp: Sendable {
    let client: any TestClientProtocol
    let dependencies: AppDependencies
    let store = AppStoreNotificationTests.good

    func post(_ signedPayload: String) async throws -> TestResponse {
        try await client.post("/v1/appstore/notifications", String(decoding: try store.body(signedPayload: signedPayload), as: UTF8.self),
                              key: nil)
    }

    func notify(_ type: NotificationType, _ subtype: NotificationSubtype? = nil, transaction: TransactionInfo? = nil,
                renewal: RenewalInfo? = nil, signedDate: String = "2025-03-01T12:00:00Z") async throws -> TestResponse {
        let response = try await post(try store.signedNotification(type, subtype, transaction: transaction, renewal: renewal,
                                                                    signedDate: TestAppStore.date(signedDate)))
        #expect(response.status == .ok, "\(type): \(response.text)")
        return response
    }

    /// The test App Store signs in the sandbox unless told otherwise: its
    /// facts show in that environment's view.
    func state(_ subscriber: String, at: String, environment: String = "Sandbox") async throws -> JSONValue {
        let response = try await client.get("/v1/subscribers/\(subscriber)?at=\(at)&environment=\(environment)")
        #expect(response.status == .ok, "\(response.text)")
        return response.json
    }

    func counts() async throws -> Counts {
        let rows = try await dependencies.pool.query(
            "SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM appstore_notifications)")
        return Counts(events: Int(try rows.first!.decode(Int64.self, at: 0)), notifications: Int(try rows.first!.decode(Int64.self, at: 1)))
    }

    /// type, subtype, environment, subscriber, attribution, status, applied (`true`/`false`).
    func row(_ uuid: String) async throws -> [String] {
        let rows = try await dependencies.pool.query("""
            SELECT notification_type, coalesce(subtype, ''), environment, coalesce(subscriber_id, ''), attribution, status, applied::text
            FROM appstore_notifications WHERE notification_uuid = \(uuid)
            """)
        guard let row = rows.first else { return [] }
        return try (0..<7).map { try row.decode(String.self, at: $0) }
    }
}

/// Runs `body` against the router of `dependencies`, closing the pool after.
func withRouter(_ dependencies: AppDependencies, _ body: @escaping @Sendable (any TestClientProtocol) async throws -> Void) async throws {
    let app = buildApplication(dependencies)
    do {
        try await app.test(.router) { client in try await body(client) }
        await dependencies.pool.close()
    } catch {
        await dependencies.pool.close()
        throw error
    }
}
