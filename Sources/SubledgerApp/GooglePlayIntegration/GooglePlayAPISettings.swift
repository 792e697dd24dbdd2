import Foundation

/// The calls of the Google Play Developer API this client makes, and the
/// token exchange before them; the `endpoint` label of its metrics.
public enum GooglePlayAPIEndpoint: String, Sendable, CaseIterable {
    /// The service account's assertion exchanged for an access token at the key's `token_uri`.
    case token = "token"
    /// `purchases.subscriptionsv2.get`.
    case subscription = "subscriptionsv2_get"
    /// `purchases.products.get`.
    case product = "products_get"
    /// `purchases.subscriptions.acknowledge`.
    case acknowledgeSubscription = "subscriptions_acknowledge"
    /// `purchases.products.acknowledge`.
    case acknowledgeProduct = "products_acknowledge"
    /// `purchases.voidedpurchases.list`.
    case voidedPurchases = "voidedpurchases_list"

    /// Google counts quota per bucket, each on its own: subscriptions
    /// (`subscriptionsv2` and `subscriptions`) apart from one-time purchases.
    /// Voided purchases are paced apart too, at their own (lower) rate: the
    /// reconciler pages them seldom and need never crowd out a fetch.
    /// https://developers.google.com/android-publisher/quotas
    public enum QuotaBucket: String, Sendable, Hashable, CaseIterable {
        case subscriptions, oneTimePurchases, voidedPurchases
    }

    /// The bucket the call draws on; nil for the token exchange (another host, no Play quota).
    public var bucket: QuotaBucket? {
        switch self {
        case .token: nil
        case .subscription, .acknowledgeSubscription: .subscriptions
        case .product, .acknowledgeProduct: .oneTimePurchases
        case .voidedPurchases: .voidedPurchases
        }
    }
}

/// How the Google Play client paces, retries and waits, and when it renews
/// its access token. The defaults suit Google; tests shorten them.
public struct GooglePlayAPISettings: Sendable {
    /// Google's default quota: 3,000 queries a minute per bucket.
    /// https://developers.google.com/android-publisher/quotas
    public static let publishedQueriesPerMinute = 3000.0

    /// Requests a second the client allows itself per subscriptions or
    /// one-time-purchases bucket: 80 % of Google's default quota, so a burst
    /// of notifications never spends all of it (the rest is the app's other
    /// tools'; raise it with the quota).
    public var requestsPerSecond = 0.8 * publishedQueriesPerMinute / 60
    /// Requests a second on `voidedpurchases.list`.
    public var voidedPurchasesRequestsPerSecond = 1.0
    /// Requests under way at once, all buckets together; more wait their turn.
    public var maximumConcurrentRequests = 8
    /// The longest a call waits for its turn (a slot of its bucket's rate and
    /// a place among the concurrent requests); a call that would wait longer
    /// is refused at once with `unavailable` (a 503 its own caller retries)
    /// instead of holding a request open behind a burst.
    public var maximumQueueWait: Duration = .seconds(10)
    /// The pause before each retry of a 5xx or a connection failure; their
    /// count is the number of retries.
    public var retryDelays: [Duration] = [.milliseconds(500), .seconds(2), .seconds(8)]
    /// No retry starts after this much of a call has passed, so an HTTP
    /// caller of Subledger (a Pub/Sub push) is answered in bounded time when
    /// Google is away.
    public var retryWindow: Duration = .seconds(30)
    /// How long one HTTP request may take (the token exchange too).
    public var requestTimeout: Duration = .seconds(10)
    /// The longest a call waits out a 429's `Retry-After` before giving up
    /// with `rateLimited`. Google's quota is per minute.
    public var maximumRateLimitWait: Duration = .seconds(30)
    /// Without a usable `Retry-After`, how long a 429 holds the bucket back.
    public var defaultRateLimitWait: Duration = .seconds(10)
    /// 429s waited out in one call before giving up.
    public var maximumRateLimitWaits = 3
    /// An access token is renewed when less than this remains of it (at
    /// most half its lifetime), so a request never carries one that lapses
    /// on the way. Google's last an hour.
    public var tokenRenewalMargin: Duration = .seconds(5 * 60)
    /// What an `unauthorized` error tells the operator to check: the
    /// configuration sets it to the variables that hold the key file and the
    /// package name.
    public var credentialsHint = "the service account's key file and the package name"

    public init() {}

    /// Requests a second the client allows itself on `bucket`.
    public func rate(_ bucket: GooglePlayAPIEndpoint.QuotaBucket) -> Double {
        bucket == .voidedPurchases ? voidedPurchasesRequestsPerSecond : requestsPerSecond
    }
}
