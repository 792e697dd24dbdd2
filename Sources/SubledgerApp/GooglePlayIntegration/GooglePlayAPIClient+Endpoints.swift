import Foundation
import GooglePlay

/// The Play Developer API methods Subledger calls, each as Google's
/// reference page documents it: the raw JSON answer, and a `fetch…` that
/// reads it into the ledger's fact (an answer that is not what Google
/// documents is `invalidAnswer`, never half-used). Every path segment is
/// percent-encoded: a purchase token may hold `/`, `+` or `=`.
extension GooglePlayAPIClient {
    /// `/androidpublisher/v3/applications/{packageName}`.
    var applicationPath: String { "/androidpublisher/v3/applications/" + Self.pathSegment(packageName) }

    // MARK: purchases.subscriptionsv2.get

    /// `GET .../purchases/subscriptionsv2/tokens/{token}`: the
    /// `SubscriptionPurchaseV2` of a purchase token.
    /// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.subscriptionsv2/get
    public func subscription(token: String) async throws(GooglePlayAPIError) -> Data {
        try await send(Call(endpoint: .subscription, path: applicationPath + "/purchases/subscriptionsv2/tokens/" + Self.pathSegment(token),
                            purchaseToken: token))
    }

    /// The subscription of `token` as the ledger's fact, observed at `observedAt`.
    public func fetchSubscription(token: String, observedAt: Date) async throws(GooglePlayAPIError) -> FetchedPlayPurchase {
        let data = try await subscription(token: token)
        do {
            return try FetchedPlayPurchase.subscription(json: data, purchaseToken: token, observedAt: observedAt)
        } catch {
            throw invalidAnswer(.subscription, error)
        }
    }

    // MARK: purchases.products.get

    /// `GET .../purchases/products/{productId}/tokens/{token}`: the
    /// `ProductPurchase` of a one-time product's purchase token.
    /// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.products/get
    public func product(productID: String, token: String) async throws(GooglePlayAPIError) -> Data {
        try await send(Call(endpoint: .product, path: applicationPath + "/purchases/products/" + Self.pathSegment(productID)
                                + "/tokens/" + Self.pathSegment(token), purchaseToken: token))
    }

    /// The product purchase of `token` as the ledger's fact, observed at `observedAt`.
    public func fetchProduct(productID: String, token: String, observedAt: Date) async throws(GooglePlayAPIError) -> FetchedPlayPurchase {
        let data = try await product(productID: productID, token: token)
        do {
            return try FetchedPlayPurchase.product(json: data, purchaseToken: token, productID: productID, observedAt: observedAt)
        } catch {
            throw invalidAnswer(.product, error)
        }
    }

    // MARK: Acknowledgement

    /// `POST .../purchases/subscriptions/{subscriptionId}/tokens/{token}:acknowledge`
    /// with an empty `SubscriptionPurchasesAcknowledgeRequest` (`{}`). Google
    /// refunds a purchase not acknowledged within three days.
    /// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.subscriptions/acknowledge
    public func acknowledgeSubscription(subscriptionID: String, token: String) async throws(GooglePlayAPIError) {
        _ = try await send(Call(endpoint: .acknowledgeSubscription, method: .POST,
                                path: applicationPath + "/purchases/subscriptions/" + Self.pathSegment(subscriptionID)
                                    + "/tokens/" + Self.pathSegment(token) + ":acknowledge",
                                body: Data("{}".utf8), purchaseToken: token))
    }

    /// `POST .../purchases/products/{productId}/tokens/{token}:acknowledge`
    /// with an empty `ProductPurchasesAcknowledgeRequest` (`{}`).
    /// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.products/acknowledge
    public func acknowledgeProduct(productID: String, token: String) async throws(GooglePlayAPIError) {
        _ = try await send(Call(endpoint: .acknowledgeProduct, method: .POST,
                                path: applicationPath + "/purchases/products/" + Self.pathSegment(productID)
                                    + "/tokens/" + Self.pathSegment(token) + ":acknowledge",
                                body: Data("{}".utf8), purchaseToken: token))
    }

    // MARK: purchases.voidedpurchases.list

    /// Google's largest page of voided purchases (and its default).
    public static let maximumVoidedPageSize = 1000

    /// `GET .../purchases/voidedpurchases?type=1&startTime=…&token=…&maxResults=…`:
    /// one page of the purchases voided since `startTime` (Google keeps 30
    /// days and refuses an older start; nil: its default, 30 days ago),
    /// subscriptions included (`type=1`). Give the previous page's
    /// `tokenPagination.nextPageToken` as `pageToken` for the next (Google
    /// then ignores `startTime`). `maxResults` is kept within 1…1000.
    /// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.voidedpurchases/list
    /// https://developers.google.com/android-publisher/voided-purchases
    public func voidedPurchases(startTime: Date? = nil, pageToken: String? = nil,
                                maxResults: Int = GooglePlayAPIClient.maximumVoidedPageSize) async throws(GooglePlayAPIError) -> Data {
        var query = [("type", "1")]
        if let startTime { query.append(("startTime", String(Int64((startTime.timeIntervalSince1970 * 1000).rounded(.down))))) }
        if let pageToken { query.append(("token", pageToken)) }
        query.append(("maxResults", String(min(max(maxResults, 1), Self.maximumVoidedPageSize))))
        return try await send(Call(endpoint: .voidedPurchases, path: applicationPath + "/purchases/voidedpurchases", query: query))
    }

    /// One page of voided purchases read into the ledger's facts; an item that
    /// is not a `VoidedPurchase` is handed back apart, so the rest still count.
    public func voidedPage(startTime: Date? = nil, pageToken: String? = nil,
                           maxResults: Int = GooglePlayAPIClient.maximumVoidedPageSize) async throws(GooglePlayAPIError) -> VoidedPurchasesPage {
        let data = try await voidedPurchases(startTime: startTime, pageToken: pageToken, maxResults: maxResults)
        do {
            return try VoidedPurchasesPage.parse(json: data)
        } catch {
            throw invalidAnswer(.voidedPurchases, error)
        }
    }

    // MARK: Answers

    private func invalidAnswer(_ endpoint: GooglePlayAPIEndpoint, _ error: GooglePlayParseError) -> GooglePlayAPIError {
        Self.count(endpoint, "invalid_answer")
        logger.error("google play developer api answer is not what google documents", metadata: [
            "googleplay.api.endpoint": "\(endpoint.rawValue)", "error.code": "\(error.code)", "error.field": "\(error.field)",
        ])
        return GooglePlayAPIError(.invalidAnswer, endpoint: endpoint, reason: error.code.rawValue,
                                  message: "the answer is not the JSON Google documents (\(error.description))")
    }
}
