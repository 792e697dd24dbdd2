import Foundation
import SubledgerApp
import SubledgerAppTesting
import Testing

/// Clients that hold connections without finishing requests: each limit of
/// the HTTP server, through a real server on loopback. About time: scripts/test
/// runs them alone, and the timeouts leave a second for a loaded machine.
@Suite struct HTTPServerLimitTests {
    static let healthRequest = "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n"

    @Test func aHeadThatNeverCompletesIsAnswered408AndClosed() async throws {
        try await withLiveServer(configure: { $0.httpReadTimeout = .seconds(1) }) { port, _ in
            let slow = try await RawConnection.open(port: port)
            try await slow.send("GET /health HTTP/1.1\r\nHost: loc")
            #expect(try await slow.closed(within: .milliseconds(200)) == nil, "closed before its read timeout")
            let answer = try await slow.closed(within: .seconds(5))
            #expect(answer?.hasPrefix("HTTP/1.1 408") == true, "\(answer ?? "still open")")
            #expect(answer?.contains("request_timeout") == true)
            await slow.close()
        }
    }

    @Test func aConnectionThatSendsNothingIsClosedAfterTheReadTimeout() async throws {
        try await withLiveServer(configure: { $0.httpReadTimeout = .seconds(1) }) { port, _ in
            let silent = try await RawConnection.open(port: port)
            let answer = try await silent.closed(within: .seconds(5))
            #expect(answer?.hasPrefix("HTTP/1.1 408") == true, "\(answer ?? "still open")")
            await silent.close()
        }
    }

    /// The connection's one timer, scheduled for the first request, moves to
    /// the deadline of a later one.
    @Test func aLaterRequestOnAKeepAliveConnectionIsTimedToo() async throws {
        try await withLiveServer(configure: { $0.httpReadTimeout = .seconds(1) }) { port, _ in
            let connection = try await RawConnection.open(port: port)
            try await connection.send(Self.healthRequest)
            try await Task.sleep(for: .milliseconds(600))
            try await connection.send("GET /health HTTP/1.1\r\nHo")
            #expect(try await connection.closed(within: .milliseconds(300)) == nil, "closed before the second request's timeout")
            let answer = try await connection.closed(within: .seconds(5))
            #expect(answer?.hasPrefix("HTTP/1.1 200") == true, "\(answer ?? "still open")")
            #expect(answer?.contains("HTTP/1.1 408") == true, "\(answer ?? "still open")")
            await connection.close()
        }
    }

    @Test func aBodyTricklingAByteAtATimeIsCutOff() async throws {
        try await withLiveServer(configure: { $0.httpReadTimeout = .seconds(1) }) { port, _ in
            let slow = try await RawConnection.open(port: port)
            try await slow.send("POST /v1/appstore/notifications HTTP/1.1\r\nHost: localhost\r\n"
                + "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n")
            // Every byte arrives well within the timeout; the body as a whole does not.
            let clock = ContinuousClock()
            let start = clock.now
            while slow.isOpen, clock.now - start < .seconds(5) {
                try? await slow.send("{")
                try await Task.sleep(for: .milliseconds(100))
            }
            let answer = try await slow.closed(within: .seconds(1))
            #expect(answer?.contains("408") == true, "\(answer ?? "still open after 5 s")")
            #expect(clock.now - start < .seconds(4))
            await slow.close()
        }
    }

    @Test func anIdleKeepAliveConnectionIsClosed() async throws {
        try await withLiveServer(configure: { $0.httpIdleTimeout = .milliseconds(600) }) { port, _ in
            let idle = try await RawConnection.open(port: port)
            try await idle.send(Self.healthRequest)
            #expect(try await idle.closed(within: .milliseconds(300)) == nil, "closed before its idle timeout")
            let answer = try await idle.closed(within: .seconds(5))
            #expect(answer?.hasPrefix("HTTP/1.1 200") == true, "\(answer ?? "still open")")
            #expect(answer?.contains("408") == false, "an idle connection is not a late request")
            await idle.close()
        }
    }

    @Test func connectionsOverTheCapWaitUntilOneCloses() async throws {
        try await withLiveServer(configure: { $0.httpMaximumConnections = 4 }) { port, _ in
            var held: [RawConnection] = []
            for _ in 0..<4 {
                let connection = try await RawConnection.open(port: port)
                try await connection.send("GET /health HTTP/1.1\r\n")
                held.append(connection)
            }
            try await Task.sleep(for: .milliseconds(200))
            let fifth = try await RawConnection.open(port: port)
            try await fifth.send("GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            #expect(try await fifth.closed(within: .milliseconds(700)) == nil, "served beyond the cap")
            await held[0].close()
            let answer = try await fifth.closed(within: .seconds(5))
            #expect(answer?.hasPrefix("HTTP/1.1 200") == true, "\(answer ?? "not served after a slot freed")")
            for connection in held { await connection.close() }
            await fifth.close()
        }
    }

    @Test func healthStaysReachableWhileSlowClientsFillEverySlot() async throws {
        try await withLiveServer(configure: {
            $0.httpMaximumConnections = 40
            $0.httpReadTimeout = .seconds(1)
        }) { port, _ in
            var slow: [RawConnection] = []
            for _ in 0..<40 {
                let connection = try await RawConnection.open(port: port)
                try await connection.send("GET /health HTTP/1.1\r\nHo")
                slow.append(connection)
            }
            let clock = ContinuousClock()
            let start = clock.now
            let probe = try await RawConnection.open(port: port)
            try await probe.send("GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            let answer = try await probe.closed(within: .seconds(5))
            #expect(answer?.hasPrefix("HTTP/1.1 200") == true, "\(answer ?? "health unreachable")")
            #expect(clock.now - start < .seconds(4))
            for connection in slow {
                let evicted = try await connection.closed(within: .seconds(2))
                #expect(evicted?.hasPrefix("HTTP/1.1 408") == true)
                await connection.close()
            }
            await probe.close()
        }
    }

    @Test func theLimitsAreReadFromTheEnvironment() throws {
        let configuration = try SubledgerConfiguration(environment: [
            "SUBLEDGER_HTTP_READ_TIMEOUT": "2.5", "SUBLEDGER_HTTP_IDLE_TIMEOUT": "30", "SUBLEDGER_HTTP_MAX_CONNECTIONS": "12",
        ])
        #expect(configuration.httpReadTimeout == .milliseconds(2500))
        #expect(configuration.httpIdleTimeout == .seconds(30))
        #expect(configuration.httpMaximumConnections == 12)
        let defaults = SubledgerConfiguration()
        #expect(defaults.httpReadTimeout == .seconds(10) && defaults.httpIdleTimeout == .seconds(60)
                && defaults.httpMaximumConnections == 1000)
        #expect(throws: ConfigurationError.self) {
            try SubledgerConfiguration(environment: ["SUBLEDGER_HTTP_MAX_CONNECTIONS": "0"])
        }
    }
}
