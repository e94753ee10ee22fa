import DNSCore
import NIOCore
import Resolver

/// Serves DNS over TCP (RFC 7766): 2-byte length framing, several queries per connection answered as they
/// complete (out of order allowed, §7), an idle timeout, and no reading while the client does not read.
final class StubTCPHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Queries of one connection in progress at once; beyond that the connection stops reading.
    static let maxPending = 64

    private let responder: StubResponder
    private let idleTimeout: TimeAmount
    private var buffer: ByteBuffer?
    private var pending = 0
    private var readingPaused = false
    private var idleTimer: Scheduled<Void>?
    private var closed = false

    init(responder: StubResponder, idleTimeout: TimeAmount) {
        self.responder = responder
        self.idleTimeout = idleTimeout
    }

    func channelActive(context: ChannelHandlerContext) {
        armIdleTimer(context: context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var incoming = unwrapInboundIn(data)
        if buffer == nil { buffer = incoming } else { buffer!.writeBuffer(&incoming) }
        processFrames(context: context)
    }

    private func processFrames(context: ChannelHandlerContext) {
        let client = StubClient(context.channel.remoteAddress)
        var refreshes = PendingRefreshes()
        // Reload may turn cookies on or off.
        let cookies = responder.cookies
        let loop = context.eventLoop
        let bound = NIOLoopBound((self, context), eventLoop: loop)
        var wrote = false
        // A client that does not read its replies gets no more answers (and no more reads) until it does: what it
        // costs stays near the write buffer's high-water mark.
        while pending < Self.maxPending, context.channel.isWritable, var current = buffer, let length = current.getInteger(
            at: current.readerIndex, as: UInt16.self), current.readableBytes >= 2 + Int(length)
        {
            current.moveReaderIndex(forwardBy: 2)
            let message = current.readBytes(length: Int(length)) ?? []
            buffer = current.readableBytes == 0 ? nil : current
            // Only whole queries count as activity: a client dribbling a frame cannot hold the connection open.
            armIdleTimer(context: context)
            if message.isEmpty { continue }
            pending += 1
            let outcome = responder.handle(
                message, client: client, overTCP: true, cookies: cookies, refreshes: &refreshes
            ) {
                { reply in
                    loop.execute {
                        let (handler, context) = bound.value
                        handler.complete(reply, context: context, flush: true)
                    }
                }
            }
            switch outcome {
            case .reply(let reply):
                complete(reply, context: context, flush: false)
                wrote = true
            case .drop:
                pending -= 1
            case .pending:
                break
            }
        }
        if wrote { context.flush() }
        // Stale answers are on their way: now their refreshes may start.
        responder.startRefreshes(refreshes)
        updateReading(context: context)
    }

    private func complete(_ reply: [UInt8], context: ChannelHandlerContext, flush: Bool) {
        pending -= 1
        guard !closed else { return }
        var out = context.channel.allocator.buffer(capacity: reply.count + 2)
        out.writeInteger(UInt16(truncatingIfNeeded: reply.count))
        out.writeBytes(reply)
        context.write(wrapOutboundOut(out), promise: nil)
        if flush {
            context.flush()
            // Frames held back by the pending limit can go now.
            processFrames(context: context)
        }
    }

    /// Reads while fewer than `maxPending` queries run and the client takes its replies.
    private func updateReading(context: ChannelHandlerContext) {
        let shouldPause = pending >= Self.maxPending || !context.channel.isWritable
        if shouldPause != readingPaused {
            readingPaused = shouldPause
            context.channel.setOption(ChannelOptions.autoRead, value: !shouldPause).whenFailure { _ in }
            if !shouldPause { context.read() }
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable && !closed {
            // Frames already read while the client was not reading.
            processFrames(context: context)
        }
        updateReading(context: context)
        context.fireChannelWritabilityChanged()
    }

    /// RFC 7766 §6.2.3: close a connection that has been idle (no complete query read, nothing pending, or a
    /// client that stopped reading) for the timeout.
    private func armIdleTimer(context: ChannelHandlerContext) {
        idleTimer?.cancel()
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        idleTimer = context.eventLoop.scheduleTask(in: idleTimeout) {
            let (handler, context) = bound.value
            if handler.pending > 0 && context.channel.isWritable {
                handler.armIdleTimer(context: context)
            } else {
                context.close(promise: nil)
            }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        closed = true
        idleTimer?.cancel()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
