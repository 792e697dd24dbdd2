import Foundation
import Ledger

/// The endpoints of the App Store Server API this client calls, each with
/// Apple's published production rate (requests per second, enforced per
/// hour; the sandbox allows a tenth of it).
public enum AppStoreAPIEndpoint: String, Sendable, CaseIterable {
    case notificationHistory = "notification_history"
    case transactionHistory = "transaction_history"
    case subscriptionStatuses = "subscription_statuses"
    case lookUpOrder = "look_up_order"
    case requestTestNotification = "request_test_notification"
    case testNotificationStatus = "test_notification_status"

    /// Apple's limit in production ("Identifying rate limits").
    public var publishedRate: Double {
        switch self {
        case .notificationHistory, .transactionHistory, .subscriptionStatuses: 50
        case .lookUpOrder: 10
        case .requestTestNotification, .testNotificationStatus: 1
        }
    }

    /// Apple's limit in `environment`.
    public func publishedRate(in environment: Ledger.Environment) -> Double {
        environment == .production ? publishedRate : publishedRate / 10
    }
}

/// How the client paces, retries and waits. The defaults suit Apple; tests
/// shorten them.
public struct AppStoreAPISettings: Sendable {
    /// The share of Apple's published rate the client allows itself, so a
    /// burst of ours never reaches Apple's limit.
    public var rateFraction: Double = 0.8
    /// The pause before each retry of a 5xx, a retryable Apple error or a
    /// connection failure; their count is the number of retries.
    public var retryDelays: [Duration] = [.milliseconds(500), .seconds(2), .seconds(8)]
    /// The longest a call waits out a 429's `Retry-After` before giving up
    /// with `rateLimited` (the worker then waits the rest itself).
    public var maximumRateLimitWait: Duration = .seconds(120)
    /// The longest a call waits for its turn in the client's own queue; a
    /// call that would wait longer is refused at once (503 with `Retry-After`).
    public var maximumQueueWait: Duration = .seconds(10)
    /// Pages of notification history one reconciliation reads at most
    /// (20 notifications a page).
    public var maximumHistoryPages = 5000
    /// Without a usable `Retry-After`, how long a 429 pauses the endpoint.
    public var defaultRateLimitWait: Duration = .seconds(10)
    /// 429s waited out in one call before giving up.
    public var maximumRateLimitWaits = 5
    /// How long one HTTP request may take (a refused connection is retried
    /// by the HTTP client until then).
    public var requestTimeout: Duration = .seconds(10)
    /// No retry starts after this much of a call has passed, so an HTTP
    /// caller of Subledger is answered in bounded time when Apple is away.
    public var retryWindow: Duration = .seconds(30)
    /// The JWT's lifetime (Apple accepts at most 60 minutes).
    public var tokenLifetime: Duration = .seconds(20 * 60)
    /// A cached JWT is replaced when less than this remains of it.
    public var tokenRenewalMargin: Duration = .seconds(5 * 60)

    public init() {}

    /// Requests per second the client allows itself on `endpoint` in `environment`.
    public func rate(_ endpoint: AppStoreAPIEndpoint, in environment: Ledger.Environment) -> Double {
        endpoint.publishedRate(in: environment) * rateFraction
    }
}
