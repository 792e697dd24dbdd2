import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where webhook endpoints may point, so that an `admin` key cannot make the
/// service POST to itself, to a cloud metadata address or to hosts of its
/// private network and read the outcome back (SSRF).
///
/// Without `allowPrivate` (`SUBLEDGER_WEBHOOK_ALLOW_PRIVATE`) a URL must be
/// `https`, carry no credentials, and its host must resolve only to public
/// addresses: not loopback, unspecified, private (RFC 1918), shared
/// (100.64/10), link-local, unique-local (fc00::/7), multicast, reserved or
/// documentation ranges, nor an IPv6 form embedding one of those IPv4 ones.
/// It is checked when the endpoint is registered and again before each
/// connection, on the addresses the name resolves to then, and the
/// connection goes to the checked address (`PinnedHTTPClients`). With
/// `allowPrivate` any address is allowed, and plain `http` only to loopback.
public struct WebhookDestinations: Sendable {
    public var allowPrivate: Bool

    public init(allowPrivate: Bool) {
        self.allowPrivate = allowPrivate
    }

    /// Why a destination is refused, in words safe to answer and to store.
    public struct Refusal: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// A URL that passed the checks of its text.
    struct Target: Sendable {
        var url: String
        var isHTTPS: Bool
        /// As the HTTP client sees it: no brackets around an IPv6 address.
        var host: String
        /// The address when the host is one, not a name.
        var literal: IPAddress?
    }

    public static let maximumURLBytes = 2048

    /// The checks of the text alone: an absolute `https` (or, allowed
    /// private, `http`) URL with a host and without `user:password@`.
    func target(_ text: String) -> Result<Target, Refusal> {
        guard text.utf8.count <= Self.maximumURLBytes else {
            return .failure(Refusal(description: "longer than \(Self.maximumURLBytes) bytes"))
        }
        guard !text.unicodeScalars.contains(where: { $0.value < 0x21 || $0.value == 0x7F }),
              let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
              let rawHost = url.host, !rawHost.isEmpty else {
            return .failure(Refusal(description: "not an absolute https URL with a host"))
        }
        guard url.user == nil && url.password == nil, !Self.authority(of: text).contains("@") else {
            return .failure(Refusal(description: "credentials in the URL (user:password@) are not accepted"))
        }
        if scheme == "http" && !allowPrivate {
            return .failure(Refusal(description: "https is required"))
        }
        let host = rawHost.hasPrefix("[") && rawHost.hasSuffix("]") ? String(rawHost.dropFirst().dropLast()) : rawHost
        return .success(Target(url: text, isHTTPS: scheme == "https", host: host, literal: IPAddress(host)))
    }

    /// The part between `scheme://` and the path.
    private static func authority(of text: String) -> Substring {
        guard let start = text.range(of: "://")?.upperBound else { return "" }
        let rest = text[start...]
        return rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
    }

    /// Whether `address` may be connected to for `target`. A resolved
    /// address is not quoted: the answer must not tell an `admin` what an
    /// internal name resolves to.
    func check(_ address: IPAddress, for target: Target) -> Refusal? {
        let kind = address.kind
        let subject = target.literal == nil ? "\(target.host) resolves to an address that is not" : "\(address) is not"
        if !target.isHTTPS && kind != .loopback {
            return Refusal(description: "plain http is allowed only to loopback; \(subject)")
        }
        if kind != .global && !allowPrivate {
            return Refusal(description: target.literal == nil ? "\(target.host) resolves to a \(kind.rawValue) address; only public addresses are allowed"
                           : "\(address) is a \(kind.rawValue) address; only public addresses are allowed")
        }
        return nil
    }

    /// At registration: the text's checks, then the address's, or the
    /// resolved addresses' when the name resolves within `timeout` (one
    /// that does not is accepted; each connection checks again).
    public func checkForRegistration(_ text: String, timeout: Duration = .seconds(2)) async -> Refusal? {
        let target: Target
        switch self.target(text) {
        case .failure(let refusal): return refusal
        case .success(let checked): target = checked
        }
        if let literal = target.literal { return check(literal, for: target) }
        guard let addresses = try? await HostResolver.resolve(target.host, timeout: timeout), !addresses.isEmpty else {
            return nil
        }
        return addresses.lazy.compactMap { check($0, for: target) }.first
    }

    /// Before a connection: the address to connect to, every resolved one
    /// having passed the checks; nil for a URL naming an address itself,
    /// and when private addresses are allowed (tests and development: the
    /// client then tries every address, e.g. `localhost`'s `::1` and
    /// `127.0.0.1`, all of them checked here).
    func addressForConnection(_ target: Target) async -> Result<IPAddress?, Refusal> {
        if let literal = target.literal {
            return check(literal, for: target).map { .failure($0) } ?? .success(nil)
        }
        let addresses: [IPAddress]
        do {
            addresses = try await HostResolver.shared.addresses(of: target.host)
        } catch {
            return .failure(Refusal(description: "the host name does not resolve"))
        }
        guard let first = addresses.first else { return .failure(Refusal(description: "the host name does not resolve")) }
        if let refusal = addresses.lazy.compactMap({ check($0, for: target) }).first { return .failure(refusal) }
        return .success(allowPrivate ? nil : first)
    }
}

/// An IPv4 or IPv6 address, and what kind of network it belongs to.
struct IPAddress: Sendable, Hashable, CustomStringConvertible {
    enum Kind: String, Sendable {
        case global = "public"
        case loopback
        case unspecified
        case privateNetwork = "private (RFC 1918)"
        case sharedNetwork = "shared address space (100.64.0.0/10)"
        case linkLocal = "link-local"
        case uniqueLocal = "unique-local (fc00::/7)"
        case multicast
        case reserved = "reserved or documentation"
    }

    /// 4 or 16 bytes, network order.
    let bytes: [UInt8]

    init?(_ text: String) {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            bytes = withUnsafeBytes(of: &v4) { Array($0) }
            return
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            bytes = withUnsafeBytes(of: &v6) { Array($0) }
            return
        }
        return nil
    }

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    var description: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        let text = bytes.withUnsafeBytes { raw in inet_ntop(family, raw.baseAddress, &buffer, socklen_t(buffer.count)) }
        return text == nil ? "?" : String(cString: buffer)
    }

    var kind: Kind {
        bytes.count == 4 ? Self.kind(v4: bytes) : Self.kind(v6: bytes)
    }

    private static func kind(v4 b: [UInt8]) -> Kind {
        switch (b[0], b[1], b[2]) {
        case (0, 0, 0) where b[3] == 0: return .unspecified
        case (0, _, _): return .reserved
        case (127, _, _): return .loopback
        case (10, _, _), (172, 16...31, _), (192, 168, _): return .privateNetwork
        case (100, 64...127, _): return .sharedNetwork
        case (169, 254, _): return .linkLocal
        case (192, 0, 0), (192, 0, 2), (198, 18...19, _), (198, 51, 100), (203, 0, 113): return .reserved
        case (224...239, _, _): return .multicast
        case (240...255, _, _): return .reserved
        default: return .global
        }
    }

    private static func kind(v6 b: [UInt8]) -> Kind {
        let zeroPrefix = b[0..<10].allSatisfy { $0 == 0 }
        if zeroPrefix && b[10] == 0xFF && b[11] == 0xFF { return kind(v4: Array(b[12..<16])) }  // ::ffff:a.b.c.d
        if zeroPrefix && b[10] == 0 && b[11] == 0 {
            if b[12..<15].allSatisfy({ $0 == 0 }) {
                if b[15] == 0 { return .unspecified }
                if b[15] == 1 { return .loopback }
            }
            return .reserved  // ::a.b.c.d, deprecated
        }
        if b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xFF && b[3] == 0x9B {
            // 64:ff9b::/96 translates to the IPv4 address it ends with; 64:ff9b:1::/48 is local.
            return b[4..<12].allSatisfy { $0 == 0 } ? kind(v4: Array(b[12..<16])) : .reserved
        }
        if b[0] == 0x20 && b[1] == 0x02 { return kind(v4: Array(b[2..<6])) }  // 6to4
        if b[0] & 0xFE == 0xFC { return .uniqueLocal }
        if b[0] == 0xFE && b[1] & 0xC0 == 0x80 { return .linkLocal }
        if b[0] == 0xFE && b[1] & 0xC0 == 0xC0 { return .reserved }  // site-local, deprecated
        if b[0] == 0xFF { return .multicast }
        if b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0D && b[3] == 0xB8 { return .reserved }  // documentation
        if b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x00 && b[3] == 0x00 { return .reserved }  // Teredo
        if b[0] == 0x01 && b[1..<8].allSatisfy({ $0 == 0 }) { return .reserved }  // discard 100::/64
        return .global
    }
}
