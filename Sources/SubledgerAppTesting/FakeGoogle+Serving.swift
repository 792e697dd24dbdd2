import Foundation
import GooglePlayTesting
import Hummingbird
import HummingbirdTesting

/// The fake on loopback for a test, with a test client of it.
extension FakeGoogle {
    /// Serves the fake on a free loopback port for the duration of `body`,
    /// with a test client of it (for requests the app's client would not make).
    public nonisolated func serve(_ body: @escaping @Sendable (FakeGoogle, any TestClientProtocol) async throws -> Void) async throws {
        let responder = CallbackResponder<BasicRequestContext> { request, _ in try await self.respond(to: request) }
        let app = Application(responder: responder, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        try await app.test(.live) { client in
            await self.setBaseURL("http://127.0.0.1:\(client.port!)")
            try await body(self, client)
        }
    }
}
