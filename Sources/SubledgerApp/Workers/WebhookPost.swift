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

    /// Posts `body` to `url`, signed with `secrets` when there are any (the
    /// current one first, then one still valid after a rotation) and naming
    /// the change in `Subledger-Event-Id` when `eventID` is given.
    ///
    /// With `destinations` (a registered endpoint) the destination is checked
    /// first and the connection pinned to the checked address, and a failure
    /// is described by its class only (status, timeout, redirect, connection
    /// failed, refused destination): the error is read back through the API
    /// and must not tell an `admin` more about the network than that. Without
    /// (the operator's reminder webhook) nothing is checked and the error
    /// says more (a redirect's `Location`, escaped and cut).
    static func send(_ body: Data, to url: String, secrets: [String], eventID: String? = nil,
                     destinations: WebhookDestinations? = nil,
                     client defaultClient: HTTPClient, timeout: Duration) async -> Result<Void, WebhookDeliveryFailure> {
        var client = defaultClient
        if let destinations {
            switch destinations.target(url) {
            case .failure(let refusal):
                return .failure(WebhookDeliveryFailure(description: "destination refused: \(refusal)"))
            case .success(let target):
                switch await destinations.addressForConnection(target) {
                case .failure(let refusal):
                    return .failure(WebhookDeliveryFailure(description: "destination refused: \(refusal)"))
                case .success(let address?):
                    client = await PinnedHTTPClients.shared.client(host: target.host, address: address)
                case .success(nil):
                    break
                }
            }
        }
        let detailed = destinations == nil
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "subledger")
        if let eventID { request.headers.add(name: "Subledger-Event-Id", value: eventID) }
        if !secrets.isEmpty {
            request.headers.add(name: WebhookSignature.headerName,
                                value: WebhookSignature.header(body: body, secrets: secrets, timestamp: Int(Date().timeIntervalSince1970)))
        }
        request.body = .bytes(ByteBuffer(bytes: body))
        do {
            let (status, location) = try await withDeadline(timeout) { [request, client] in
                let response = try await client.execute(request, timeout: .nanoseconds(Int64(timeout / .nanoseconds(1))))
                var read = 0
                for try await chunk in response.body {
                    read += chunk.readableBytes
                    if read > maximumResponseBytes { break }
                }
                return (response.status.code, response.headers.first(name: "location"))
            }
            if (300..<400).contains(status) {
                guard detailed else {
                    return .failure(WebhookDeliveryFailure(description: "HTTP \(status): redirects are not followed; configure the final URL"))
                }
                return .failure(WebhookDeliveryFailure(
                    description: "HTTP \(status) redirect to \(location.map { UntrustedText.escaped($0, limit: 200) } ?? "nowhere"): "
                        + "redirects are not followed; configure the final URL"))
            }
            return (200..<300).contains(status) ? .success(()) : .failure(WebhookDeliveryFailure(description: "HTTP \(status)"))
        } catch is DeadlineExceeded {
            return .failure(WebhookDeliveryFailure(description: "no answer within \(timeout)"))
        } catch {
            guard detailed else { return .failure(WebhookDeliveryFailure(description: "connection failed")) }
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
