import Foundation
import GooglePlay
import Hummingbird
import JSON
import NIOCore

/// How the fake reads its paths, shapes Google's errors and answers over HTTP.
extension FakeGoogle {
    /// Answers one HTTP request as Google would (serve it with any Hummingbird responder).
    public nonisolated func respond(to request: Request) async throws -> Response {
        let buffer = try await request.body.collect(upTo: 1 << 20)
        // The request target as sent: its percent-encoding is part of what is checked.
        let target = request.head.path ?? "/"
        let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        var query: [String: String] = [:]
        if parts.count > 1 {
            for pair in parts[1].split(separator: "&") {
                let nameValue = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let decode = { (text: Substring) in text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(text) }
                query[decode(nameValue[0])] = nameValue.count > 1 ? decode(nameValue[1]) : ""
            }
        }
        let answer = await answer(method: request.method.rawValue, rawPath: String(parts[0]), query: query,
                                  body: Data(buffer.readableBytesView), contentType: request.headers[.contentType],
                                  authorization: request.headers[.authorization])
        var headers: HTTPFields = [.contentType: "application/json; charset=UTF-8"]
        if let value = answer.headers["Retry-After"] { headers[.retryAfter] = value }
        if let value = answer.headers["Cache-Control"] { headers[.cacheControl] = value }
        if let value = answer.headers["WWW-Authenticate"] { headers[.wwwAuthenticate] = value }
        return Response(status: HTTPResponse.Status(code: answer.status), headers: headers,
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: answer.body)))
    }

    // MARK: Paths

    /// The route of a method and raw path, with its decoded parameters; nil
    /// for a path Google does not serve (a token's unencoded `/` lands here).
    static func route(method: String, rawPath: String) -> (Route, [String: String])? {
        if rawPath == "/token" { return method == "POST" ? (.token, [:]) : nil }
        if rawPath == "/certs" || rawPath == "/oauth2/v3/certs" { return method == "GET" ? (.certs, [:]) : nil }
        var segments = rawPath.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard segments.count >= 6, segments[0].isEmpty, segments[1] == "androidpublisher", segments[2] == "v3",
              segments[3] == "applications", segments[5] == "purchases" else { return nil }
        // gRPC transcoding's custom verb: the last segment's last ':' (a token's own is encoded).
        var verb: String?
        if let colon = segments[segments.count - 1].lastIndex(of: ":") {
            verb = String(segments[segments.count - 1][segments[segments.count - 1].index(after: colon)...])
            segments[segments.count - 1] = String(segments[segments.count - 1][..<colon])
        }
        let decoded = segments.map { $0.removingPercentEncoding ?? $0 }
        var parameters = ["packageName": decoded[4]]
        let rest = Array(decoded.dropFirst(6))
        switch (method, rest.count, verb) {
        case ("GET", 3, nil) where rest[0] == "subscriptionsv2" && rest[1] == "tokens":
            parameters["token"] = rest[2]
            return (.subscriptionsV2Get, parameters)
        case ("GET", 4, nil) where rest[0] == "products" && rest[2] == "tokens":
            parameters["productId"] = rest[1]
            parameters["token"] = rest[3]
            return (.productsGet, parameters)
        case ("POST", 4, "acknowledge") where rest[0] == "subscriptions" && rest[2] == "tokens":
            parameters["subscriptionId"] = rest[1]
            parameters["token"] = rest[3]
            return (.subscriptionsAcknowledge, parameters)
        case ("POST", 4, "acknowledge") where rest[0] == "products" && rest[2] == "tokens":
            parameters["productId"] = rest[1]
            parameters["token"] = rest[3]
            return (.productsAcknowledge, parameters)
        case ("GET", 1, nil) where rest[0] == "voidedpurchases":
            return (.voidedPurchasesList, parameters)
        default:
            return nil
        }
    }

    // MARK: Google's answers

    static func json(_ fields: [String: JSONValue]) -> Data { CanonicalJSON.encode(.object(fields)) }

    /// Google's error shape: `{"error": {"code", "message", "errors": [{"message", "domain", "reason"}], "status"}}`.
    /// https://cloud.google.com/apis/design/errors#http_mapping
    static func googleError(_ code: Int, _ status: String, _ message: String, reason: String, domain: String = "global") -> Answer {
        Answer(status: code, body: json(["error": .object([
            "code": .integer(Int64(code)), "message": .string(message), "status": .string(status),
            "errors": .array([.object(["message": .string(message), "domain": .string(domain), "reason": .string(reason)])]),
        ])]))
    }

    static var purchaseNotFound: Answer {
        googleError(404, "NOT_FOUND", "The purchase token was not found.", reason: "notFound")
    }

    static var invalidPurchaseState: Answer {
        googleError(400, "FAILED_PRECONDITION", "The purchase is not in a valid state to perform the desired operation.",
                    reason: "invalidPurchaseState", domain: "androidpublisher")
    }

    /// An injected failure, as Google words it.
    static func failure(_ status: Int) -> Answer {
        switch status {
        case 429: googleError(429, "RESOURCE_EXHAUSTED", "Quota exceeded for quota metric 'Queries' of service 'androidpublisher.googleapis.com'.",
                              reason: "rateLimitExceeded")
        case 503: googleError(503, "UNAVAILABLE", "The service is currently unavailable.", reason: "backendError")
        case 500..<600: googleError(status, "INTERNAL", "Internal error encountered.", reason: "backendError")
        case 401: googleError(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.", reason: "authError")
        case 403: googleError(403, "PERMISSION_DENIED", "The current user has insufficient permissions to perform the requested operation.",
                              reason: "permissionDenied")
        default: googleError(status, "FAILED_PRECONDITION", "Injected failure.", reason: "failedPrecondition")
        }
    }

    /// An acknowledge body must be an `AcknowledgeRequest`: a JSON object with
    /// at most `developerPayload` (Google refuses unknown fields).
    static func acknowledgeRequestRefusal(_ body: Data) -> Answer? {
        if body.isEmpty { return nil }
        guard case .success(.object(let fields)) = JSONValue.parse(body) else {
            return googleError(400, "INVALID_ARGUMENT", "Invalid JSON payload received.", reason: "invalid")
        }
        for (name, value) in fields {
            guard name == "developerPayload", case .string = value else {
                return googleError(400, "INVALID_ARGUMENT", "Invalid JSON payload received. Unknown name \"\(name)\".", reason: "invalid")
            }
        }
        return nil
    }

    /// The product ids of a `SubscriptionPurchaseV2`'s line items.
    static func lineItemProducts(_ fields: [String: JSONValue]) -> [String] {
        guard case .array(let items)? = fields["lineItems"] else { return [] }
        return items.compactMap { item in
            guard case .object(let line) = item, case .string(let id)? = line["productId"] else { return nil }
            return id
        }
    }
}
