import Foundation
import HummingbirdTesting
@testable import SubledgerApp
import SubledgerAppTesting
import Testing

/// What the conversion suites write before converting and compare after.
extension TestClientProtocol {
    /// Three monthly passes for each subscriber, each with its own device,
    /// transaction ids `t-<run>-<subscriber's index>-<month>`.
    func writePasses(_ subscribers: [String], run: UInt32) async throws {
        for (index, subscriber) in subscribers.enumerated() {
            for month in 0..<3 {
                #expect(try await post("/v1/subscribers/\(subscriber)/events", purchaseJSON(
                    "t-\(run)-\(index)-\(month)", product: "com.example.pass.30d",
                    at: "2025-0\(month + 1)-01T00:00:00Z", device: "device-\(month)-\(subscriber)")).status == .created)
            }
        }
    }

    /// A restore moving `from`'s first pass to `to`: a transfer naming both.
    func restorePass(of from: Int, to subscriber: String, run: UInt32) async throws {
        let restore = """
            {"deviceId": "ipad-\(subscriber)", "transactions": [{"transactionId": "t-\(run)-\(from)-0",
             "originalTransactionId": "t-\(run)-\(from)-0", "productId": "com.example.pass.30d", "purchaseDate": "2025-01-01T00:00:00Z"}]}
            """
        #expect(try await post("/v1/subscribers/\(subscriber)/restore", restore).status == .ok)
    }

    /// Each subscriber's state in February and history, as support reads them.
    func statesAndHistories(_ subscribers: [String]) async throws -> [String] {
        var texts: [String] = []
        for subscriber in subscribers {
            texts.append(try await get("/v1/subscribers/\(subscriber)?at=2025-02-15T00:00:00Z", key: Keys.support).text)
            texts.append(try await get("/v1/subscribers/\(subscriber)/history", key: Keys.support).text)
        }
        return texts
    }
}

/// Every event's position, stream version and id, in order: what a
/// conversion must leave as it was.
func logPositions(_ dependencies: AppDependencies) async throws -> [String] {
    try await dependencies.pool.query("SELECT position, stream_version, event_id FROM events ORDER BY position")
        .map { "\(try $0.decode(Int64.self, at: 0)) \(try $0.decode(Int64.self, at: 1)) \(try $0.decode(String.self, at: 2))" }
}
