import Foundation
import Hummingbird
import HummingbirdTesting
import Ledger
import NIOCore
import NIOPosix
import Postgres
@testable import SubledgerApp
import SubledgerAppTesting
@testable import HTTPAPI
import Testing

/// Webhook destinations an `admin` may not choose (SSRF): refused when
/// registered, and again when connecting, on the resolved address.
@Suite("Webhook destinations", .timeLimit(.minutes(3)))
struct WebhookDestinationTests {
    /// Without SUBLEDGER_WEBHOOK_ALLOW_PRIVATE: 400 naming `url` and why.
    @Test func privateLoopbackAndLinkLocalDestinationsAreRefusedAtRegistration() async throws {
        try await withStrictApp { client in
            for (url, why) in [("https://127.0.0.1/hook", "loopback"), ("https://[::1]:8443/hook", "loopback"),
                               ("https://169.254.169.254/latest/meta-data/", "link-local"),
                               ("https://10.1.2.3/hook", "private"), ("https://192.168.0.7/hook", "private"),
                               ("https://172.16.5.4/hook", "private"), ("https://[fd12::1]/hook", "unique-local"),
                               ("https://[fe80::1]/hook", "link-local"), ("https://0.0.0.0/hook", "unspecified"),
                               ("https://[::ffff:127.0.0.1]/hook", "loopback"), ("https://[::ffff:10.0.0.1]/hook", "private"),
                               ("https://100.64.1.1/hook", "shared"),
                               ("https://localhost/hook", "localhost resolves to a loopback address"),
                               ("https://2130706433/hook", "loopback"),
                               ("http://93.184.216.34/hook", "https is required"),
                               ("https://user:pass@93.184.216.34/hook", "credentials"),
                               ("https://user@93.184.216.34/hook", "credentials"),
                               ("ftp://93.184.216.34/hook", "https URL")] {
                let response = try await client.post("/v1/webhooks", #"{"url": "\#(url)"}"#, key: Keys.admin)
                #expect(response.status == .badRequest && response.error.field == "url", "\(url): \(response.text)")
                #expect(response.json["error"]?["message"]?.string?.contains(why) == true, "\(url): \(response.text)")
                if url.contains("localhost") {
                    #expect(!response.text.contains("127.0.0.1") && !response.text.contains("::1"), "a resolved address is not told")
                }
            }
            let public4 = try await client.post("/v1/webhooks", #"{"url": "https://93.184.216.34/hook"}"#, key: Keys.admin)
            #expect(public4.status == .created, "\(public4.text)")
            let public6 = try await client.post("/v1/webhooks", #"{"url": "https://[2606:4700::1111]/hook"}"#, key: Keys.admin)
            #expect(public6.status == .created, "\(public6.text)")
        }
    }

    /// With it (the tests' setting): private addresses are allowed, plain
    /// http only to loopback, credentials never.
    @Test func allowingPrivateAllowsPlainHTTPToLoopbackOnly() async throws {
        try await withApp { client, _ in
            for (url, status) in [("http://127.0.0.1:9/hook", 201), ("http://localhost:9/hook", 201), ("http://[::1]:9/hook", 201),
                                  ("https://10.1.2.3/hook", 201), ("http://10.1.2.3/hook", 400),
                                  ("http://169.254.169.254/", 400), ("http://u:p@127.0.0.1:9/hook", 400)] {
                let response = try await client.post("/v1/webhooks", #"{"url": "\#(url)"}"#, key: Keys.admin)
                #expect(Int(response.status.code) == status, "\(url): \(response.text)")
                if status == 400 { #expect(response.error.field == "url") }
            }
        }
    }

    /// A receiver answering 302 to another loopback receiver: not followed
    /// (the second receives nothing), a failed attempt whose error names
    /// the status only (not where it pointed).
    @Test func aRedirectIsNotFollowedAndItsTargetIsNotRevealed() async throws {
        try await ChangeFixture.with { client, fixture in
            let target = ChangeReceiver()
            try await withChangeReceiver(target) { targetURL in
                let router = Router()
                router.post("/moved") { _, _ -> Response in
                    Response(status: .found, headers: [.location: targetURL])
                }
                let redirecting = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
                try await redirecting.test(.live) { redirector in
                    let created = try await client.post("/v1/webhooks", #"{"url": "http://127.0.0.1:\#(redirector.port!)/moved"}"#,
                                                        key: Keys.admin)
                    let id = try #require(created.json["id"]?.string)
                    #expect(try await client.post("/v1/subscribers/rd/events", purchaseJSON("rd1", product: "com.example.level2")).status == .created)
                    try await fixture.project()
                    let dispatcher = fixture.dispatcher(firstRetry: .seconds(60))
                    #expect(try await dispatcher.dispatchDue() == 1)
                    let listed = try await client.get("/v1/webhooks/\(id)/deliveries", key: Keys.admin)
                    let delivery = try #require(listed.json["deliveries"]?.array.last, "newest first: the last is the first change")
                    #expect(delivery["status"]?.string == "pending" && delivery["attempts"]?.int == 1)
                    #expect(delivery["lastError"]?.string == "HTTP 302: redirects are not followed; configure the final URL")
                    #expect(await target.arrived == 0, "the redirect was followed")
                }
            }
        }
    }

    /// With private destinations not allowed when connecting, an endpoint
    /// stored while they were (or written directly) whose host resolves to
    /// loopback is refused before any connection: a failed attempt, and the
    /// listener there sees no connection at all.
    @Test(arguments: ["localhost", "127.0.0.1"])
    func aLoopbackAddressIsRefusedWhenConnecting(host: String) async throws {
        try await ChangeFixture.with { client, fixture in
            try await withConnectionCounter { port, connections in
                let url = "https://\(host):\(port)/changes"
                let created = try await client.post("/v1/webhooks", #"{"url": "\#(url)"}"#, key: Keys.admin)
                let id = try #require(created.json["id"]?.string, "\(created.text)")
                #expect(try await client.post("/v1/subscribers/lb/events", purchaseJSON("lb1", product: "com.example.level2")).status == .created)
                try await fixture.project()
                var settings = fixture.dispatcher(firstRetry: .seconds(60)).settings
                settings.destinations = WebhookDestinations(allowPrivate: false)
                let strict = ChangeDispatcher(pool: fixture.pool, conninfo: fixture.pool.configuration.conninfo, settings: settings)
                #expect(try await strict.dispatchDue() == 1)
                let listed = try await client.get("/v1/webhooks/\(id)/deliveries", key: Keys.admin)
                let delivery = try #require(listed.json["deliveries"]?.array.last, "newest first: the last is the first change")
                #expect(delivery["status"]?.string == "pending" && delivery["attempts"]?.int == 1)
                let error = delivery["lastError"]?.string ?? ""
                #expect(error.hasPrefix("destination refused:") && error.contains("loopback"), "\(error)")
                try await Task.sleep(for: .milliseconds(200))
                #expect(connections.value == 0, "a connection was opened to \(host)")
            }
        }
    }

    /// The connection goes to the checked address, not to a second lookup
    /// of the name: a name that does not resolve at all (`.invalid`) reaches
    /// the receiver on the address it was pinned to, and the request still
    /// names the host.
    @Test func aPinnedClientConnectsToTheCheckedAddress() async throws {
        let receiver = ChangeReceiver()
        try await withChangeReceiver(receiver) { url in
            let port = try #require(URL(string: url)?.port)
            let client = await PinnedHTTPClients.shared.client(host: "pinned.invalid", address: try #require(IPAddress("127.0.0.1")))
            let outcome = await WebhookPost.send(Data(#"{"id": "pinned"}"#.utf8), to: "http://pinned.invalid:\(port)/changes", secrets: [],
                                                 client: client, timeout: .seconds(5))
            #expect((try? outcome.get()) != nil, "\(outcome)")
            #expect(await receiver.acceptedIDs == ["pinned"])
        }
    }

    @Test func addressesAreClassified() {
        let cases: [(String, IPAddress.Kind)] = [
            ("8.8.8.8", .global), ("127.0.0.1", .loopback), ("127.255.0.1", .loopback), ("10.0.0.1", .privateNetwork),
            ("172.31.255.255", .privateNetwork), ("172.32.0.1", .global), ("192.168.1.1", .privateNetwork),
            ("169.254.169.254", .linkLocal), ("0.0.0.0", .unspecified), ("0.1.2.3", .reserved), ("100.64.0.1", .sharedNetwork),
            ("100.128.0.1", .global), ("224.0.0.1", .multicast), ("255.255.255.255", .reserved), ("192.0.2.1", .reserved),
            ("::", .unspecified), ("::1", .loopback), ("fc00::1", .uniqueLocal), ("fdff::1", .uniqueLocal), ("fe80::1", .linkLocal),
            ("ff02::1", .multicast), ("::ffff:169.254.169.254", .linkLocal), ("64:ff9b::10.0.0.1", .privateNetwork),
            ("2002:7f00:1::", .loopback), ("2001:db8::1", .reserved), ("2606:4700::1111", .global),
        ]
        for (text, kind) in cases {
            #expect(IPAddress(text)?.kind == kind, "\(text)")
        }
        #expect(IPAddress("localhost") == nil && IPAddress("127.1") == nil)
    }
}

/// The router of an application that does not allow private destinations.
func withStrictApp(_ body: @escaping @Sendable (any TestClientProtocol) async throws -> Void) async throws {
    var dependencies = try await makeDependencies()
    dependencies.configuration.webhookAllowPrivate = false
    try await withRouter(dependencies, body)
}

/// Connections a listener accepted.
final class ConnectionCount: @unchecked Sendable {
    // Safety: `count` is only touched while holding `lock`.
    private let lock = NSLock()
    private var count = 0

    func increment() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}

/// A TCP listener on 127.0.0.1 that counts the connections it accepts (and closes them).
func withConnectionCounter(_ body: (Int, ConnectionCount) async throws -> Void) async throws {
    let connections = ConnectionCount()
    let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .childChannelInitializer { child in
            connections.increment()
            return child.close()
        }
        .bind(host: "127.0.0.1", port: 0).get()
    do {
        try await body(channel.localAddress?.port ?? 0, connections)
        try await channel.close()
    } catch {
        try? await channel.close()
        throw error
    }
}
