import Hummingbird
import HummingbirdCore
import Logging
import NIOCore

/// What one client may hold of the HTTP server: the notification route needs
/// no key, so anyone can open connections and send slowly.
public struct HTTPServerLimits: Sendable {
    /// A request whose head and body have not arrived within this is answered 408 and closed.
    public var readTimeout: Duration
    /// A keep-alive connection idle this long between requests is closed.
    public var idleTimeout: Duration
    /// Connections open at once; more wait in the listen backlog until one closes.
    public var maximumConnections: Int

    public init(readTimeout: Duration = .seconds(10), idleTimeout: Duration = .seconds(60), maximumConnections: Int = 1000) {
        self.readTimeout = readTimeout
        self.idleTimeout = idleTimeout
        self.maximumConnections = maximumConnections
    }
}

extension HTTPServerBuilder {
    /// HTTP/1.1 with the read and idle timeouts of `limits` (the connection
    /// cap is the application configuration's).
    static func http1(limits: HTTPServerLimits) -> HTTPServerBuilder {
        HTTPServerBuilder { responder in
            TimedHTTP1Channel(
                base: HTTP1Channel(responder: responder, configuration: .init(idleTimeout: TimeAmount(limits.idleTimeout))),
                readTimeout: TimeAmount(limits.readTimeout))
        }
    }
}

/// Hummingbird's HTTP/1.1 channel with a read deadline in front of its parser.
struct TimedHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value
    let base: HTTP1Channel
    let readTimeout: TimeAmount

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let deadline = RequestReadDeadline(timeout: readTimeout)
        do {
            // Before the parser: the clock starts with a request's first byte,
            // which the parser does not report until the head is complete.
            try channel.pipeline.syncOperations.addHandler(deadline, position: .first)
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        let value = base.setup(channel: channel, logger: logger)
        do {
            // After the parser, where a request's end and a response's start show.
            let operations = channel.pipeline.syncOperations
            let connectionState = try operations.handler(type: HTTPConnectionStateHandler.self)
            try operations.addHandler(RequestProgressHandler(deadline: deadline), position: .before(connectionState))
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return value
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}
