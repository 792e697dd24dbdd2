import AsyncHTTPClient
import Foundation
import NIOCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Resolves host names with `getaddrinfo`, on a thread of its own (it
/// blocks), and keeps each answer `timeToLive`, so a busy endpoint does not
/// cost a lookup per delivery. The address a delivery connects to is the one
/// checked from this answer (`PinnedHTTPClients`), so a name that changes
/// its address between the check and the connection (DNS rebinding) is not
/// followed.
actor HostResolver {
    static let shared = HostResolver()

    struct ResolutionFailed: Error {}

    let timeToLive: Duration = .seconds(30)
    private var cache: [String: (addresses: [IPAddress], until: ContinuousClock.Instant)] = [:]

    func addresses(of host: String) async throws -> [IPAddress] {
        if let cached = cache[host], cached.until > .now { return cached.addresses }
        let addresses = try await Self.resolve(host, timeout: .seconds(5))
        if cache.count > 1000 { cache = cache.filter { $0.value.until > .now } }
        cache[host] = (addresses, .now + timeToLive)
        return addresses
    }

    /// Every address `host` resolves to (TCP), in the resolver's order.
    static func resolve(_ host: String, timeout: Duration) async throws -> [IPAddress] {
        try await withDeadline(timeout) {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[IPAddress], Error>) in
                let thread = Thread {
                    var hints = addrinfo()
                    hints.ai_family = AF_UNSPEC
                    #if canImport(Glibc)
                    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
                    #else
                    hints.ai_socktype = SOCK_STREAM
                    #endif
                    var list: UnsafeMutablePointer<addrinfo>?
                    guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else {
                        continuation.resume(throwing: ResolutionFailed())
                        return
                    }
                    defer { freeaddrinfo(first) }
                    var addresses: [IPAddress] = []
                    var entry: UnsafeMutablePointer<addrinfo>? = first
                    while let current = entry {
                        if let socket = current.pointee.ai_addr {
                            switch Int32(current.pointee.ai_family) {
                            case AF_INET:
                                socket.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
                                    var address = v4.pointee.sin_addr
                                    addresses.append(IPAddress(bytes: withUnsafeBytes(of: &address) { Array($0) }))
                                }
                            case AF_INET6:
                                socket.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
                                    var address = v6.pointee.sin6_addr
                                    addresses.append(IPAddress(bytes: withUnsafeBytes(of: &address) { Array($0) }))
                                }
                            default: break
                            }
                        }
                        entry = current.pointee.ai_next
                    }
                    var unique: [IPAddress] = []
                    for address in addresses where !unique.contains(address) { unique.append(address) }
                    continuation.resume(returning: unique)
                }
                thread.stackSize = 256 * 1024
                thread.start()
            }
        }
    }
}

/// HTTP clients that connect a host name to one checked address: each
/// client's `dnsOverride` maps the name to it, while the request keeps the
/// name for its `Host` header, TLS server name and certificate check. One
/// client per (name, address), redirects never followed; a client dropped
/// from the cache is shut down once its requests have had time to end.
actor PinnedHTTPClients {
    static let shared = PinnedHTTPClients()

    let capacity = 128
    private var clients: [String: HTTPClient] = [:]
    private var order: [String] = []

    func client(host: String, address: IPAddress) -> HTTPClient {
        let key = host + "\u{0}" + address.description
        if let client = clients[key] { return client }
        var configuration = HTTPClient.Configuration(redirectConfiguration: .disallow)
        configuration.dnsOverride = [host: address.description]
        let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
        clients[key] = client
        order.append(key)
        if order.count > capacity {
            let evicted = order.removeFirst()
            if let old = clients.removeValue(forKey: evicted) {
                Task {
                    try? await Task.sleep(for: .seconds(120))
                    try? await old.shutdown()
                }
            }
        }
        return client
    }
}
