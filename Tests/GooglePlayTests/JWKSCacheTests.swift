import Foundation
import GooglePlay
import GooglePlayTesting
import Synchronization
import Testing

private let identity = Fixtures.identity
private let t0 = Fixtures.now

/// What the fake JWKS endpoint serves, and how often it was asked.
private final class KeyServer: Sendable {
    private let state: Mutex<(published: [String], maximumAge: TimeInterval?, failing: Bool, fetches: Int)>
    let delay: Duration

    init(published: [String], maximumAge: TimeInterval? = nil, delay: Duration = .zero) {
        state = Mutex((published, maximumAge, false, 0))
        self.delay = delay
    }

    var fetches: Int { state.withLock { $0.fetches } }
    func publish(_ kids: [String]) { state.withLock { $0.published = kids } }
    func fail(_ failing: Bool) { state.withLock { $0.failing = failing } }

    struct Down: Error {}

    func fetch() async throws -> JWKSCache.FetchedKeys {
        let (published, maximumAge, failing) = state.withLock { state in
            state.fetches += 1
            return (state.published, state.maximumAge, state.failing)
        }
        if delay > .zero { try await Task.sleep(for: delay) }
        if failing { throw Down() }
        return (identity.jwks(keyIDs: published), maximumAge)
    }

    func cache(minimumRefreshInterval: TimeInterval = 60, defaultMaximumAge: TimeInterval = 3600) -> JWKSCache {
        JWKSCache(verifier: identity.verifier, minimumRefreshInterval: minimumRefreshInterval, defaultMaximumAge: defaultMaximumAge,
                  fetchWithMaximumAge: { try await self.fetch() })
    }
}

/// The cache's refusal of `token` at `time` (nil: it was accepted).
private func refusal(_ cache: JWKSCache, _ token: String, at time: Date) async -> GoogleIDTokenError? {
    do {
        _ = try await cache.verify(token: token, now: time)
        return nil
    } catch {
        return error
    }
}

@Suite struct JWKSCacheTests {
    // https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions — keys fetched once, then reused.
    @Test func keysAreFetchedOnceAndReused() async throws {
        let server = KeyServer(published: ["google-key-1"])
        let cache = server.cache()
        for second in 0..<5 {
            let time = t0 + TimeInterval(second)
            #expect(await refusal(cache, try identity.idToken(issuedAt: time), at: time) == nil)
        }
        #expect(server.fetches == 1)
        #expect(await cache.fetchCount == 1)
    }

    // https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions — Google rotates its keys: an unknown kid refetches once.
    @Test func anUnknownKidRefetchesOnce() async throws {
        let server = KeyServer(published: ["google-key-1"])
        let cache = server.cache()
        #expect(await refusal(cache, try identity.idToken(issuedAt: t0), at: t0) == nil)
        server.publish(["google-key-1", "google-key-2"])
        let later = t0 + 120
        #expect(await refusal(cache, try identity.idToken(issuedAt: later, kid: "google-key-2"), at: later) == nil)
        #expect(server.fetches == 2)
        // Both keys are now held: no more fetches.
        #expect(await refusal(cache, try identity.idToken(issuedAt: later, kid: "google-key-1"), at: later + 1) == nil)
        #expect(server.fetches == 2)
    }

    // https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions — a stream of forged kids costs one fetch a minute.
    @Test func unknownKidsDoNotHammerTheEndpoint() async throws {
        let server = KeyServer(published: ["google-key-1", "google-key-2"])
        let cache = server.cache(minimumRefreshInterval: 60)
        #expect(await refusal(cache, try identity.idToken(issuedAt: t0), at: t0) == nil)
        let forged = try identity.idToken(issuedAt: t0, kid: "google-key-3")
        // Within a minute of the first fetch: no refetch at all.
        #expect(await refusal(cache, forged, at: t0 + 30) == .unknownKey("google-key-3"))
        #expect(server.fetches == 1)
        // After it: one refetch, then none for a minute.
        for second in stride(from: 61, to: 120, by: 5) {
            #expect(await refusal(cache, forged, at: t0 + TimeInterval(second)) == .unknownKey("google-key-3"))
        }
        #expect(server.fetches == 2)
        #expect(await refusal(cache, forged, at: t0 + 125) == .unknownKey("google-key-3"))
        #expect(server.fetches == 3)
    }

    // https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions — keys are kept for their maximum age, no longer.
    @Test func keysExpireAfterTheirMaximumAge() async throws {
        let server = KeyServer(published: ["google-key-1"])
        let cache = server.cache(defaultMaximumAge: 3600)
        #expect(await refusal(cache, try identity.idToken(issuedAt: t0), at: t0) == nil)
        #expect(await refusal(cache, try identity.idToken(issuedAt: t0 + 3599), at: t0 + 3599) == nil)
        #expect(server.fetches == 1)
        #expect(await refusal(cache, try identity.idToken(issuedAt: t0 + 3600), at: t0 + 3600) == nil)
        #expect(server.fetches == 2)

        // The answer's own max-age wins over the default.
        let short = KeyServer(published: ["google-key-1"], maximumAge: 10)
        let shortCache = short.cache(defaultMaximumAge: 3600)
        #expect(await refusal(shortCache, try identity.idToken(issuedAt: t0), at: t0) == nil)
        #expect(await refusal(shortCache, try identity.idToken(issuedAt: t0), at: t0 + 9) == nil)
        #expect(short.fetches == 1)
        #expect(await refusal(shortCache, try identity.idToken(issuedAt: t0), at: t0 + 11) == nil)
        #expect(short.fetches == 2)
    }

    // https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions — keys that cannot be fetched are not the token's fault (503, Pub/Sub retries).
    @Test func aFailedFetchIsKeysUnavailableAndIsNotRetriedAtOnce() async throws {
        let server = KeyServer(published: ["google-key-1"])
        server.fail(true)
        let cache = server.cache()
        let token = try identity.idToken(issuedAt: t0)
        let error = await refusal(cache, token, at: t0)
        guard case .keysUnavailable = error else {
            Issue.record("expected keysUnavailable, got \(String(describing: error))")
            return
        }
        #expect(error?.isTokenRefused == false)
        #expect(await refusal(cache, token, at: t0 + 10) != nil)
        #expect(server.fetches == 1)
        server.fail(false)
        #expect(await refusal(cache, token, at: t0 + 61) == nil)
        #expect(server.fetches == 2)
    }

    // https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions — pushes arriving together share one fetch.
    @Test func concurrentVerificationsShareOneFetch() async throws {
        let server = KeyServer(published: ["google-key-1"], delay: .milliseconds(200))
        let cache = server.cache()
        let token = try identity.idToken(issuedAt: t0)
        let accepted = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<8 { group.addTask { await refusal(cache, token, at: t0) == nil } }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(accepted == 8)
        #expect(server.fetches == 1)
    }
}
