import HTTPAPI
import Hummingbird
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import SubledgerApp
import SubledgerAppTesting

/// Runs the whole application, server included, on 127.0.0.1 and an
/// ephemeral port, for `body`; shuts it down after.
func withLiveServer(
    configure: (inout SubledgerConfiguration) -> Void = { _ in },
    _ body: @Sendable (_ port: Int, AppDependencies) async throws -> Void
) async throws {
    var dependencies = try await makeDependencies()
    dependencies.configuration.host = "127.0.0.1"
    dependencies.configuration.port = 0
    configure(&dependencies.configuration)
    let (ports, portSink) = AsyncStream.makeStream(of: Int.self)
    let app = buildApplication(dependencies, onServerRunning: { channel in
        portSink.yield(channel.localAddress?.port ?? 0)
        portSink.finish()
    })
    let group = ServiceGroup(services: [app], logger: Logger(label: "live-server-tests"))
    let finishing = dependencies
    try await withThrowingTaskGroup(of: Void.self) { tasks in
        tasks.addTask { try await group.run() }
        var iterator = ports.makeAsyncIterator()
        let port = await iterator.next() ?? 0
        do {
            try await body(port, finishing)
        } catch {
            await group.triggerGracefulShutdown()
            try? await tasks.waitForAll()
            await finishing.pool.close()
            throw error
        }
        await group.triggerGracefulShutdown()
        try await tasks.waitForAll()
        await finishing.pool.close()
    }
}

/// A plain TCP connection to the server, for clients a normal HTTP client
/// would not be: slow, partial, idle.
struct RawConnection: Sendable {
    let channel: any Channel
    /// Everything the server sent, once it has closed the connection.
    let received: EventLoopFuture<String>

    static func open(port: Int) async throws -> RawConnection {
        let promise = MultiThreadedEventLoopGroup.singleton.any().makePromise(of: String.self)
        do {
            let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(ReceivedText(promise: promise))
                    }
                }
                .connect(host: "127.0.0.1", port: port).get()
            return RawConnection(channel: channel, received: promise.futureResult)
        } catch {
            promise.fail(error)
            throw error
        }
    }

    func send(_ text: String) async throws {
        try await channel.writeAndFlush(ByteBuffer(string: text)).get()
    }

    var isOpen: Bool { channel.isActive }

    /// Waits up to `limit` for the server to close; its bytes when it did, nil when not.
    func closed(within limit: Duration) async throws -> String? {
        let clock = ContinuousClock()
        let end = clock.now + limit
        while channel.isActive, clock.now < end {
            try await Task.sleep(for: .milliseconds(20))
        }
        return channel.isActive ? nil : try await received.get()
    }

    func close() async {
        try? await channel.close()
    }
}

/// Collects the bytes a connection receives and hands them over when it closes.
private final class ReceivedText: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private var text = ""
    private let promise: EventLoopPromise<String>

    init(promise: EventLoopPromise<String>) { self.promise = promise }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        text += buffer.readString(length: buffer.readableBytes) ?? ""
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.succeed(text)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
