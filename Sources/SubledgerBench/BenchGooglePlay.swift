import CommandSupport
import Foundation
import GooglePlay
import GooglePlayTesting
import Hummingbird
import JSON
import Logging
import Postgres
import SubledgerApp

/// `subledger bench --measure googleplay`: Google Play pushes through the
/// real route (`POST /v1/googleplay/notifications`), each verified (the
/// Pub/Sub token against the JWKS downloaded from the fake), fetched from
/// the Play Developer API and acknowledged through the real client, and
/// recorded; beside `POST …/events` of the same run, which writes a purchase
/// without asking anyone.
///
/// The Play Developer API is `FakeGoogle` on loopback: it checks the service
/// account's assertion and its access tokens as Google does and answers in
/// Google's shapes, at once. The client's pacing is raised far above
/// Google's default quota (which `serve` keeps to, about 40 requests a second
/// for an app) so what is measured is this service, not the quota.
extension Bench {
    struct GooglePlayFigures {
        var newPurchases: HTTPFigures
        var renewals: HTTPFigures
        var ingest: HTTPFigures
        var recorded: Int
        var pushed: Int
        var fetches: Int
        var acknowledgements: Int
        /// The acknowledgement worker draining the new purchases' backlog.
        var acknowledgementRate: Double
    }

    func measureGooglePlay(conninfo: String, logger: Logger) async throws {
        let duration = Duration.milliseconds(Int(seconds * 1000))
        print("")
        print("subledger bench: Google Play pushes, \(seconds) s per phase, \(writers) connections, the Play Developer API a fake on loopback")
        let figures = try await runGooglePlay(conninfo: conninfo, duration: duration, logger: logger)
        print("")
        print(padded("measurement", 58) + padded("per s", 10, left: true) + padded("p50 ms", 10, left: true) + padded("p99 ms", 10, left: true))
        for (name, figure) in [("push, a new purchase (verify, fetch, record)", figures.newPurchases),
                               ("push, a renewal of one of them (verify, fetch, record)", figures.renewals),
                               ("POST …/events, a new purchase (no store asked)", figures.ingest)] {
            print(padded(name, 58) + padded(String(format: "%.0f", figure.rate), 10, left: true)
                  + padded(String(format: "%.2f", figure.p50.milliseconds), 10, left: true)
                  + padded(String(format: "%.2f", figure.p99.milliseconds), 10, left: true))
        }
        print("pushes answered: \(figures.pushed); Google Play facts recorded: \(figures.recorded); "
              + "purchases fetched: \(figures.fetches)")
        print(String(format: "acknowledgements: %d, by one worker draining the backlog at %.0f/s (Google refunds what is not acknowledged in 3 days)",
                     figures.acknowledgements, figures.acknowledgementRate))
    }

    func runGooglePlay(conninfo: String, duration: Duration, logger: Logger) async throws -> GooglePlayFigures {
        let identity = try FakeGoogleIdentity(keyIDs: ["bench-google-key"])
        let account = try FakeServiceAccount()
        let fake = FakeGoogle(serviceAccount: account, identity: identity)
        let fakePort = Int.random(in: 30_000...60_000)
        let responder = CallbackResponder<BasicRequestContext> { request, _ in try await fake.respond(to: request) }
        let google = Application(responder: responder, configuration: .init(address: .hostname("127.0.0.1", port: fakePort)),
                                 logger: Logger(label: "subledger.bench.google"))
        let googleTask = Task { try await google.runService(gracefulShutdownSignals: []) }
        defer { googleTask.cancel() }
        await fake.setBaseURL("http://127.0.0.1:\(fakePort)")
        try await Self.waitUntilServing(port: fakePort, path: "/certs")

        let key = try ServiceAccountKey(json: account.json(tokenURI: await fake.tokenURI))
        var settings = GooglePlayAPISettings()
        settings.requestsPerSecond = 100_000
        let client = GooglePlayAPIClient(serviceAccount: key, packageName: GooglePlaySamples.packageName, apiURL: await fake.baseURL,
                                         settings: settings, logger: logger)
        let service = try await startService(conninfo: conninfo, logger: logger, configure: { configuration in
            configuration.googlePlay.packageName = GooglePlaySamples.packageName
            configuration.googlePlay.pushAudience = identity.audience
            configuration.googlePlay.pushServiceAccount = identity.serviceAccountEmail
            configuration.googlePlay.jwksURL = "http://127.0.0.1:\(fakePort)/certs"
        }, prepare: { $0.googlePlaySource = client })
        defer { service.server.cancel() }

        // Pub/Sub signs a token and reuses it for a while: one per connection.
        let tokens = try (0..<writers).map { _ in "Bearer " + (try identity.idToken(issuedAt: Date())) }
        let started = Date() - 60
        @Sendable func purchase(_ writer: Int, _ index: Int, renewal: Int) -> JSONValue {
            let order = "GPA.3383-\(writer)-\(index)" + (renewal == 0 ? "" : "..\(renewal - 1)")
            return GooglePlaySamples.subscriptionPurchaseV2(
                state: .active,
                lineItems: [.init(productID: "pro_monthly", expiryTime: started + Double(renewal + 1) * 30 * 86_400,
                                  basePlanID: "monthly", autoRenewEnabled: true, latestSuccessfulOrderID: order)],
                startTime: started, latestOrderID: order,
                acknowledgementState: renewal == 0 ? "ACKNOWLEDGEMENT_STATE_PENDING" : "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED",
                obfuscatedExternalAccountID: "play-\(writer)-\(index)")
        }
        @Sendable func push(_ connection: HTTPLoadConnection, _ writer: Int, _ type: SubscriptionNotificationType, token: String, message: String) throws {
            let body = GooglePlaySamples.push(.subscription(type, purchaseToken: token), messageID: message, eventTime: Date())
            let response = try connection.exchange(HTTPLoadConnection.request(
                "POST", "/v1/googleplay/notifications", headers: [("Authorization", tokens[writer]), ("Content-Type", "application/json")],
                body: String(decoding: body, as: UTF8.self)))
            guard response.status == 200 else { throw BenchFailure(description: "a Play push answered \(response.status)") }
        }

        let (newPurchases, made) = try await latencies("Play push, new purchases, \(writers) connections", port: service.port,
                                                       duration: duration) { connection, writer, count in
            let token = "bench-play-\(writer)-\(count)"
            fake.putSubscription(purchase(writer, count, renewal: 0), token: token)
            try push(connection, writer, .purchased, token: token, message: "new-\(writer)-\(count)")
        }
        guard made.allSatisfy({ $0 > 0 }) else { throw BenchFailure(description: "a connection pushed no purchase") }
        let (renewals, renewed) = try await latencies("Play push, renewals, \(writers) connections", port: service.port,
                                                      duration: duration) { connection, writer, count in
            let index = count % made[writer], renewal = count / made[writer] + 1
            let token = "bench-play-\(writer)-\(index)"
            fake.putSubscription(purchase(writer, index, renewal: renewal), token: token)
            try push(connection, writer, .renewed, token: token, message: "renew-\(writer)-\(count)")
        }
        let (ingest, _) = try await measureIngest(port: service.port, duration: duration, run: "bench-play")
        // The new purchases wait to be acknowledged: the worker `serve` runs, draining them.
        let acknowledger = GooglePlayAcknowledger(source: client, pool: service.dependencies.pool, logger: logger)
        let drainStart = ContinuousClock.now
        var acknowledged = 0
        while acknowledged < made.reduce(0, +) {
            let round = try await acknowledger.acknowledgeBacklog()
            guard round > 0 else { break }
            acknowledged += round
        }
        let drained = ContinuousClock.now - drainStart

        let recorded = try await service.dependencies.pool.query("SELECT count(*) FROM events WHERE type = 'google_play_purchase'")
            .first?.decode(Int.self, at: 0) ?? 0
        let pushed = made.reduce(0, +) + renewed.reduce(0, +)
        guard recorded == pushed else {
            throw BenchFailure(description: "\(pushed) pushes answered 200 but \(recorded) Google Play facts were recorded")
        }
        guard acknowledged == made.reduce(0, +) else {
            throw BenchFailure(description: "\(made.reduce(0, +)) new purchases but \(acknowledged) acknowledged")
        }
        return GooglePlayFigures(newPurchases: newPurchases, renewals: renewals, ingest: ingest, recorded: recorded, pushed: pushed,
                                 fetches: await fake.callCount(.subscriptionsV2Get),
                                 acknowledgements: await fake.callCount(.subscriptionsAcknowledge),
                                 acknowledgementRate: Double(acknowledged) / drained.timeInterval)
    }
}
