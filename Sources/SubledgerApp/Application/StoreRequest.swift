import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// One request to a store's server API (Apple's or Google's) with a bearer
/// token: JSON accepted, a JSON body when there is one, the answer read up
/// to 16 MiB. Retries, pacing and what a status means stay with each client.
enum StoreRequest {
    static func send(url: String, method: HTTPMethod, bearer: String, body: Data?, timeout: Duration,
                     http: HTTPClient) async throws -> (status: Int, headers: HTTPHeaders, body: Data) {
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer \(bearer)")
        request.headers.add(name: "Accept", value: "application/json")
        request.headers.add(name: "User-Agent", value: "subledger")
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        let response = try await http.execute(request, timeout: .nanoseconds(Int64(timeout / .nanoseconds(1))))
        let bytes = try await response.body.collect(upTo: 16 << 20)
        return (Int(response.status.code), response.headers, Data(bytes.readableBytesView))
    }
}
