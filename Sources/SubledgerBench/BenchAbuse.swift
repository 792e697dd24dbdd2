import CommandSupport
import Foundation
import Logging
import SubledgerApp
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `subledger bench --measure abuse`: the ingest phase alone, then the same
/// phase while `slowClients` connections are held open by clients that never
/// finish a request, as the unauthenticated notification route allows anyone
/// to. The service runs with its default read and idle timeouts and room for
/// the slow clients and the benchmark's own connections.
extension Bench {
    func measureAbuse(conninfo: String, logger: Logger) async throws {
        let duration = Duration.milliseconds(Int64(seconds * 1000))
        let service = try await startService(conninfo: conninfo, logger: logger) { configuration in
            configuration.httpMaximumConnections = slowClients + writers + 64
        }
        defer { service.server.cancel() }
        print("")
        print("subledger bench: ingest beside \(slowClients) slow connections (read timeout "
              + "\(SubledgerConfiguration().httpReadTimeout), \(writers) writers, \(seconds) s each)")
        let (alone, _) = try await measureIngest(port: service.port, duration: duration, run: "alone")
        let slow = SlowClients(port: service.port, count: slowClients)
        let holding = Thread { slow.run() }
        holding.name = "bench-slow-clients"
        holding.start()
        defer { slow.stop() }
        try await Task.sleep(for: .seconds(2))
        let opened = slow.opened
        let (beside, _) = try await measureIngest(port: service.port, duration: duration, run: "beside")
        let statistics = slow.statistics
        print("")
        print(padded("POST …/events", 44) + padded("requests/s", 12, left: true) + padded("p50 ms", 10, left: true)
              + padded("p99 ms", 10, left: true))
        for (name, figures) in [("alone", alone), ("beside \(slowClients) slow connections", beside)] {
            print(padded(name, 44) + padded(String(format: "%.0f", figures.rate), 12, left: true)
                  + padded(String(format: "%.2f", figures.p50.milliseconds), 10, left: true)
                  + padded(String(format: "%.2f", figures.p99.milliseconds), 10, left: true))
        }
        print("slow connections: \(opened) open when the second run started; \(statistics.opened) opened in all, "
              + "\(statistics.answered408) answered 408 and closed by the server")
    }
}

/// Clients that open connections and never finish a request: each sends the
/// start of a head, then one more byte every second. One the server closes
/// is opened again at once, as an attacker's would be.
final class SlowClients: Sendable {
    let port: Int
    let count: Int
    private let running = Atomic<Bool>(true)
    private let counts = Mutex<(opened: Int, answered408: Int, open: Int)>((0, 0, 0))

    init(port: Int, count: Int) {
        self.port = port
        self.count = count
    }

    var opened: Int { counts.withLock { $0.open } }
    var statistics: (opened: Int, answered408: Int) { counts.withLock { ($0.opened, $0.answered408) } }

    func stop() { running.store(false, ordering: .relaxed) }

    /// Holds the connections until `stop`; blocking, on a thread of its own.
    func run() {
        var connections: [HTTPLoadConnection?] = Array(repeating: nil, count: count)
        let head = Array("POST /v1/appstore/notifications HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".utf8)
        while running.load(ordering: .relaxed) {
            let started = ContinuousClock.now
            var open = 0
            for index in connections.indices where running.load(ordering: .relaxed) {
                if let connection = connections[index] {
                    if isOpen(connection), Self.send(connection, [UInt8(ascii: "a")]) {
                        open += 1
                        continue
                    }
                    connections[index] = nil
                }
                guard let connection = try? HTTPLoadConnection(port: port, timeout: .seconds(1)), Self.send(connection, head) else { continue }
                connections[index] = connection
                counts.withLock { $0.opened += 1 }
                open += 1
            }
            counts.withLock { $0.open = open }
            let rest = .seconds(1) - (ContinuousClock.now - started)
            if rest > .zero { Thread.sleep(forTimeInterval: rest.timeInterval) }
        }
    }

    private static func send(_ connection: HTTPLoadConnection, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { Glibc.send(connection.socket, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) } == bytes.count
    }

    /// False once the server answered or closed (counting its 408s).
    private func isOpen(_ connection: HTTPLoadConnection) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 512)
        let received = buffer.withUnsafeMutableBytes { recv(connection.socket, $0.baseAddress!, $0.count, Int32(MSG_DONTWAIT)) }
        if received > 0 {
            if String(decoding: buffer[0..<received], as: UTF8.self).hasPrefix("HTTP/1.1 408") { counts.withLock { $0.answered408 += 1 } }
            return false
        }
        return received < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
    }
}
