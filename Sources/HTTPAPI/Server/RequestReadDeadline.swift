import Hummingbird
import NIOCore
import NIOHTTPTypes

/// Answers 408 and closes a connection whose request does not arrive in time.
///
/// The clock starts when a connection opens and when the first byte of a
/// later request arrives, and stops when the parser reports the request's end
/// (`RequestProgressHandler`). Between requests nothing runs here: an idle
/// keep-alive connection is the idle timeout's. Sits first in the pipeline and
/// writes its answer as raw bytes, so a client that never completes a head is
/// answered too.
///
/// A request only sets and clears a deadline; the one timer of the connection
/// is scheduled when none is pending and, when it fires, moves itself to the
/// deadline of the request being read then, or lapses. A timer scheduled and
/// cancelled for every request cost the no-database route a quarter of its
/// rate in `subledger bench`.
final class RequestReadDeadline: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let timeout: TimeAmount
    /// When the request being read must be complete; nil: none is being read.
    private var deadline: NIODeadline?
    private var timer: Scheduled<Void>?
    private var context: ChannelHandlerContext?
    /// A response has begun and not ended: a 408 now would corrupt it.
    private var isResponding = false

    init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { start() }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stopTimer()
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        start()
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        stopTimer()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        start()
        context.fireChannelRead(data)
    }

    /// The parser has the whole request.
    func requestEnded() { deadline = nil }

    func responseStarted() { isResponding = true }

    func responseEnded() { isResponding = false }

    private func start() {
        guard deadline == nil, context != nil else { return }
        let due = NIODeadline.now() + timeout
        deadline = due
        if timer == nil { schedule(at: due) }
    }

    private func schedule(at due: NIODeadline) {
        guard let context else { return }
        timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: due) { [self] in
            timer = nil
            guard let deadline else { return }
            if deadline <= .now() { expire() } else { schedule(at: deadline) }
        }
    }

    private func stopTimer() {
        deadline = nil
        timer?.cancel()
        timer = nil
    }

    private func expire() {
        guard let context, context.channel.isActive else { return }
        guard !isResponding else {
            context.close(promise: nil)
            return
        }
        let promise = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(Self.answer), promise: promise)
        promise.futureResult.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }

    /// The whole 408, written below the HTTP encoder.
    private static let answer: ByteBuffer = {
        let body = APIError.requestTimeout.body
        var buffer = ByteBuffer(string: "HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\n"
            + "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n")
        buffer.writeBytes(body)
        return buffer
    }()
}

/// Tells the read deadline where requests end and responses begin, as the
/// parser and the encoder see them.
final class RequestProgressHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let deadline: RequestReadDeadline

    init(deadline: RequestReadDeadline) {
        self.deadline = deadline
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .end = unwrapInboundIn(data) { deadline.requestEnded() }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head: deadline.responseStarted()
        case .end: deadline.responseEnded()
        case .body: break
        }
        context.write(data, promise: promise)
    }
}
