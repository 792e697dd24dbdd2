import AsyncHTTPClient
import Foundation
import JSON
import NIOCore

/// Why one webhook attempt failed, in words safe to store and log.
public struct WebhookDeliveryFailure: Error, Sendable {
    public var description: String
}

/// One signed webhook POST, as every dispatcher sends it (reminders, the
/// change feed): any 2xx is success; a redirect is not followed (the
/// receiver's `Location` is quoted, escaped and cut); the answer's body is
/// read and dropped up to `maximumResponseBytes`, so a large 2xx page is
/// still a success; no answer within `timeout` is a failure.
enum WebhookPost {
    /// How much of a receiver's answer is read before it is dropped.
    static let maximumResponseBytes = 64 * 1024

    /// Posts `body` to `url`, signed with `secret` when there is one and
    /// naming the change in `Subledger-Event-Id` when `eventID` is given.
    static func send(_ body: Data, to url: String, secret: String?, eventID: String? = nil,
                     client: HTTPClient, timeout: Duration) async -> Result<Void, WebhookDeliveryFailure> {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "subledger")
        if let eventID { request.headers.add(name: "Subledger-Event-Id", value: eventID) }
        if let secret {
            request.headers.add(name: WebhookSignature.headerName,
                                value: WebhookSignature.header(body: body, secret: secret, timestamp: Int(Date().timeIntervalSince1970)))
        }
        request.body = .bytes(ByteBuffer(bytes: body))
        do {
            let (status, location) = try await withDeadline(timeout) { [request] in
                let response = try await client.execute(request, timeout: .nanoseconds(Int64(timeout / .nanoseconds(1))))
                var read = 0
                for try await chunk in response.body {
                    read += chunk.readableBytes
                    if read > maximumResponseBytes { break }
                }
                return (response.status.code, response.headers.first(name: "location"))
            }
            if (300..<400).contains(status) {
                return .failure(WebhookDeliveryFailure(
                    description: "HTTP \(status) redirect to \(location.map { UntrustedText.escaped($0, limit: 200) } ?? "nowhere"): "
                        + "redirects are not followed; configure the final URL"))
            }
            return (200..<300).contains(status) ? .success(()) : .failure(WebhookDeliveryFailure(description: "HTTP \(status)"))
        } catch is DeadlineExceeded {
            return .failure(WebhookDeliveryFailure(description: "no answer within \(timeout)"))
        } catch {
            return .failure(WebhookDeliveryFailure(description: UntrustedText.escaped("\(error)", limit: 500)))
        }
    }

    /// `firstRetry · 2^(attempt−1)`, capped at `maximum`.
    static func backoff(afterAttempt attempt: Int, firstRetry: Duration, maximum: Duration) -> Duration {
        let factor = 1 << min(max(attempt - 1, 0), 30)
        return min(firstRetry * factor, maximum)
    }
}

extension HTTPClient {
    /// A client that follows no redirect: webhook deliveries, so only the
    /// receiver's own 2xx marks a change (or reminder) sent, and receipt
    /// validation, so the shared secret in its body is never re-sent to
    /// wherever a redirect points. Lives as long as the process.
    public static let withoutRedirects = HTTPClient(
        eventLoopGroup: HTTPClient.defaultEventLoopGroup,
        configuration: HTTPClient.Configuration(redirectConfiguration: .disallow))
}
