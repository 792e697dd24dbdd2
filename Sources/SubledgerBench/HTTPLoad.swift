import CommandSupport
import Foundation
import SubledgerApp
#if canImport(Glibc)
import Glibc
#endif

/// The benchmark's load generator: one blocking loopback socket per client on
/// a thread of its own, sending HTTP/1.1 keep-alive requests and reading each
/// response by its `Content-Length`. It costs a fraction of what a full HTTP
/// client does per request, so on a small machine that runs the service, its
/// clients and PostgreSQL together the figures are the service's.
final class HTTPLoadConnection {
    let socket: Int32
    private var buffer: [UInt8]
    /// Bytes of `buffer` received and not yet consumed.
    private var buffered = 0..<0

    /// A response as the load generator needs it.
    struct Response {
        var status: Int
        var bodyLength: Int
    }

    /// Connects to `port` on 127.0.0.1, with `timeout` on every send and receive.
    init(port: Int, timeout: Duration = .seconds(30)) throws {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw BenchFailure(description: "socket failed: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(UInt32(0x7F00_0001).bigEndian)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            let code = errno
            close(socket)
            throw BenchFailure(description: "connect to port \(port) failed: errno \(code)")
        }
        var noDelay: Int32 = 1
        setsockopt(socket, Int32(IPPROTO_TCP), TCP_NODELAY, &noDelay, socklen_t(MemoryLayout<Int32>.size))
        let seconds = timeout.components.seconds
        var limit = timeval(tv_sec: Int(seconds), tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        self.socket = socket
        self.buffer = [UInt8](repeating: 0, count: 64 * 1024)
    }

    deinit { close(socket) }

    /// Sends one complete request and reads its response.
    func exchange(_ request: [UInt8]) throws -> Response {
        try send(request)
        return try receive()
    }

    /// A request's bytes: `method target`, keep-alive, the given headers and body.
    static func request(_ method: String, _ target: String, headers: [(String, String)] = [], body: String? = nil) -> [UInt8] {
        var text = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        if let body { text += "Content-Length: \(body.utf8.count)\r\n\r\n\(body)" } else { text += "\r\n" }
        return Array(text.utf8)
    }

    private func send(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes { Glibc.send(socket, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw BenchFailure(description: "send failed: errno \(errno)") }
            sent += count
        }
    }

    /// Reads more bytes after what is buffered; false at the end of the stream.
    private func fill() throws -> Bool {
        if buffered.lowerBound > 0 {
            // Keep the unread bytes at the front.
            buffer.withUnsafeMutableBytes { $0.baseAddress!.copyMemory(from: $0.baseAddress! + buffered.lowerBound, byteCount: buffered.count) }
            buffered = 0..<buffered.count
        }
        if buffered.upperBound == buffer.count { buffer += [UInt8](repeating: 0, count: buffer.count) }
        while true {
            let upper = buffered.upperBound
            let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress! + upper, $0.count - upper, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw BenchFailure(description: "receive failed: errno \(errno)") }
            buffered = buffered.lowerBound..<(upper + count)
            return count > 0
        }
    }

    /// One response: the status line and headers, then `Content-Length` bytes of body.
    private func receive() throws -> Response {
        var headerEnd: Int?
        var searched = buffered.lowerBound
        while headerEnd == nil {
            headerEnd = Self.endOfHeaders(in: buffer, from: searched, to: buffered.upperBound)
            if headerEnd == nil {
                searched = max(buffered.lowerBound, buffered.upperBound - 3)
                let offset = buffered.lowerBound
                guard try fill() else { throw BenchFailure(description: "the server closed the connection") }
                searched -= offset
            }
        }
        // Read in place, without Strings: the clients share the two cores
        // with the service they measure.
        guard let status = Self.status(in: buffer, from: buffered.lowerBound, to: headerEnd!) else {
            throw BenchFailure(description: "not an HTTP/1.1 response: \(Self.text(buffer, buffered.lowerBound, headerEnd!).prefix(80))")
        }
        guard let length = Self.contentLength(in: buffer, from: buffered.lowerBound, to: headerEnd!) else {
            throw BenchFailure(description: "a response without Content-Length: \(Self.text(buffer, buffered.lowerBound, headerEnd!).prefix(200))")
        }
        buffered = (headerEnd! + 4)..<buffered.upperBound
        while buffered.count < length {
            guard try fill() else { throw BenchFailure(description: "the server closed the connection mid-body") }
        }
        buffered = (buffered.lowerBound + length)..<buffered.upperBound
        return Response(status: status, bodyLength: length)
    }

    private static func text(_ buffer: [UInt8], _ start: Int, _ end: Int) -> String {
        String(decoding: buffer[start..<end], as: UTF8.self)
    }

    private static let prefix = Array("HTTP/1.1 ".utf8)
    private static let name = Array("content-length:".utf8)

    /// The status code of a head starting `HTTP/1.1 NNN`.
    private static func status(in buffer: [UInt8], from start: Int, to end: Int) -> Int? {
        guard end - start >= prefix.count + 3, buffer[start..<(start + prefix.count)].elementsEqual(prefix) else { return nil }
        var status = 0
        for byte in buffer[(start + prefix.count)..<(start + prefix.count + 3)] {
            guard (48...57).contains(byte) else { return nil }
            status = status * 10 + Int(byte - 48)
        }
        return status
    }

    /// The value of the head's `Content-Length` header (any case).
    private static func contentLength(in buffer: [UInt8], from start: Int, to end: Int) -> Int? {
        var line = start
        while line < end {
            var next = line
            while next < end, buffer[next] != 13 { next += 1 }
            if next - line > name.count,
               zip(buffer[line..<(line + name.count)], name).allSatisfy({ ($0 | 0x20) == $1 || $0 == $1 }) {
                var index = line + name.count
                while index < next, buffer[index] == 32 || buffer[index] == 9 { index += 1 }
                var value = 0
                var digits = 0
                while index < next, (48...57).contains(buffer[index]) {
                    value = value * 10 + Int(buffer[index] - 48)
                    digits += 1
                    index += 1
                }
                while index < next, buffer[index] == 32 || buffer[index] == 9 { index += 1 }
                return digits > 0 && digits < 16 && index == next ? value : nil
            }
            line = next + 2
        }
        return nil
    }

    /// The index of the `\r\n\r\n` that ends the headers, if it arrived.
    private static func endOfHeaders(in buffer: [UInt8], from start: Int, to end: Int) -> Int? {
        var index = start
        while index + 3 < end {
            if buffer[index] == 13, buffer[index + 1] == 10, buffer[index + 2] == 13, buffer[index + 3] == 10 { return index }
            index += 1
        }
        return nil
    }
}

extension Bench {
    /// Runs `operation` on `writers` threads, each with its own connection,
    /// for `duration`; the rate and the latency percentiles of single requests.
    func latencies(_ name: String, port: Int, duration: Duration,
                   _ operation: @escaping @Sendable (_ connection: HTTPLoadConnection, _ writer: Int, _ count: Int) throws -> Void)
        async throws -> (figures: HTTPFigures, counts: [Int])
    {
        let progress = TerminalProgress(label: name)
        let started = ContinuousClock.now
        let deadline = started + duration
        let perWriter = try await withThrowingTaskGroup(of: (Int, [Duration]).self) { group in
            for writer in 0..<writers {
                group.addTask {
                    try await Self.onThread(named: "bench-client-\(writer)") {
                        let connection = try HTTPLoadConnection(port: port)
                        var samples = [Duration]()
                        samples.reserveCapacity(16 * 1024)
                        var count = 0
                        while ContinuousClock.now < deadline {
                            let start = ContinuousClock.now
                            try operation(connection, writer, count)
                            samples.append(ContinuousClock.now - start)
                            count += 1
                            if writer == 0 {
                                progress.update(String(format: "%3.0f%%", min(1, (ContinuousClock.now - started) / duration) * 100))
                            }
                        }
                        return (writer, samples)
                    }
                }
            }
            var perWriter = [[Duration]](repeating: [], count: writers)
            for try await (writer, samples) in group { perWriter[writer] = samples }
            return perWriter
        }
        let elapsed = ContinuousClock.now - started
        let samples = perWriter.flatMap { $0 }.sorted()
        let rate = Double(samples.count) / elapsed.timeInterval
        progress.finish(String(format: "%.0f requests/s", rate))
        func percentile(_ fraction: Double) -> Duration { BenchStatistics.percentile(fraction, of: samples) ?? .zero }
        return (HTTPFigures(rate: rate, p50: percentile(0.5), p99: percentile(0.99)), perWriter.map(\.count))
    }

    /// Runs blocking `body` on a new thread of its own; the caller suspends.
    static func onThread<T: Sendable>(named name: String, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread { continuation.resume(with: Result { try body() }) }
            thread.name = name
            thread.stackSize = 512 * 1024
            thread.start()
        }
    }
}
