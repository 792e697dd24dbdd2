import Foundation

/// Google's signing keys, fetched when first needed and kept for their
/// maximum age, and push tokens verified against them end to end.
///
/// Google rotates its keys: a token naming a `kid` the cache does not hold
/// makes it refetch once and verify again. Anyone may post a push, so an
/// unknown `kid` refetches at most once per `minimumRefreshInterval`, and
/// every fetch (a failed one too) counts: a stream of forged kids, or
/// Google's endpoint being down, costs one fetch a minute, not one a request.
/// Concurrent callers that need keys share one fetch.
/// https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions
public actor JWKSCache {
    /// What a fetch returns: the JWKS document, and how long it may be kept
    /// when the answer said (`Cache-Control: max-age`); nil keeps it for
    /// `defaultMaximumAge`.
    public typealias FetchedKeys = (data: Data, maximumAge: TimeInterval?)

    public let verifier: GoogleIDTokenVerifier
    public let minimumRefreshInterval: TimeInterval
    public let defaultMaximumAge: TimeInterval
    private let fetch: @Sendable () async throws -> FetchedKeys

    private var keys: GoogleJWKS?
    private var expiresAt = Date.distantPast
    private var lastAttempt: Date?
    private var lastFailure: String?
    private var inFlight: Task<FetchedKeys, any Error>?
    /// Fetches started, for metrics and tests.
    public private(set) var fetchCount = 0

    /// - Parameters:
    ///   - defaultMaximumAge: how long keys are kept (Google's answer
    ///     usually allows hours; an hour is safe either way).
    ///   - fetch: GETs Google's JWKS (by default
    ///     `https://www.googleapis.com/oauth2/v3/certs`); injected, so this
    ///     does no I/O of its own.
    public init(verifier: GoogleIDTokenVerifier, minimumRefreshInterval: TimeInterval = 60, defaultMaximumAge: TimeInterval = 3600,
                fetch: @escaping @Sendable () async throws -> Data) {
        self.init(verifier: verifier, minimumRefreshInterval: minimumRefreshInterval, defaultMaximumAge: defaultMaximumAge,
                  fetchWithMaximumAge: { (try await fetch(), nil) })
    }

    /// As the other, with the fetch also saying how long its answer may be kept.
    public init(verifier: GoogleIDTokenVerifier, minimumRefreshInterval: TimeInterval = 60, defaultMaximumAge: TimeInterval = 3600,
                fetchWithMaximumAge: @escaping @Sendable () async throws -> FetchedKeys) {
        self.verifier = verifier
        self.minimumRefreshInterval = minimumRefreshInterval
        self.defaultMaximumAge = defaultMaximumAge
        self.fetch = fetchWithMaximumAge
    }

    /// Verifies a push token at `now`, fetching keys when none are held or
    /// they are too old, and refetching once when the token names a key not
    /// held (unless a fetch was made within `minimumRefreshInterval`).
    public func verify(token: String, now: Date) async throws(GoogleIDTokenError) -> GoogleIDTokenClaims {
        let keys = try await currentKeys(now: now)
        do {
            return try verifier.verify(token, keys: keys, now: now)
        } catch GoogleIDTokenError.unknownKey(let kid) {
            guard inFlight != nil || mayFetch(now: now) else { throw .unknownKey(kid) }
            return try verifier.verify(token, keys: try await refresh(now: now), now: now)
        }
    }

    /// The keys to verify with at `now`.
    public func currentKeys(now: Date) async throws(GoogleIDTokenError) -> GoogleJWKS {
        if let keys, now < expiresAt { return keys }
        if inFlight == nil, !mayFetch(now: now), let lastFailure {
            throw .keysUnavailable("the last fetch failed less than \(Int(minimumRefreshInterval)) s ago: \(lastFailure)")
        }
        return try await refresh(now: now)
    }

    private func mayFetch(now: Date) -> Bool {
        guard let lastAttempt else { return true }
        return now >= lastAttempt + minimumRefreshInterval
    }

    /// Fetches the keys, or joins the fetch under way.
    private func refresh(now: Date) async throws(GoogleIDTokenError) -> GoogleJWKS {
        let task: Task<FetchedKeys, any Error>
        if let inFlight {
            task = inFlight
        } else {
            lastAttempt = now
            fetchCount += 1
            let fetch = self.fetch
            task = Task { try await fetch() }
            inFlight = task
        }
        let result = await task.result
        if inFlight == task { inFlight = nil }
        do {
            let fetched = try result.get()
            let keys = try GoogleJWKS(json: fetched.data)
            self.keys = keys
            expiresAt = now + max(0, fetched.maximumAge ?? defaultMaximumAge)
            lastFailure = nil
            return keys
        } catch {
            // Described, not kept: an error need not be Sendable.
            let reason = GoogleIDTokenError.quoted(String(describing: error))
            lastFailure = reason
            throw .keysUnavailable(reason)
        }
    }
}
