import DNSCore
import Logging
import NIOCore
import NIOPosix

/// One query over TCP on a new connection (RFC 7766).
enum TCPExchange {
    /// Connects to `address`, sends `query` with its 2-byte length prefix (RFC 1035 §4.2.2) and waits for an
    /// acceptable reply until `timeout`, which covers the connect too.
    ///
    /// One query per connection, closed afterwards; RFC 7766 §6.2.1 allows it (reuse and pipelining are optional).
    static func run(
        _ query: PendingQuery, to address: SocketAddress, timeout: TimeAmount, on loop: any EventLoop, logger: Logger
    ) async -> ExchangeOutcome {
        await ExchangeRunner.run(on: loop, timeout: timeout) { promise in
            let connected = ClientBootstrap(group: loop)
                .connectTimeout(timeout)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let handler = TCPReplyHandler(query: query, promise: promise, logger: logger)
                        try channel.pipeline.syncOperations.addHandler(handler)
                    }
                }
                .connect(to: address)
            connected.whenSuccess { channel in
                let wire = query.wire
                var frame = channel.allocator.buffer(capacity: wire.count + 2)
                frame.writeInteger(UInt16(truncatingIfNeeded: wire.count))
                frame.writeBytes(wire)
                channel.writeAndFlush(frame).whenFailure { error in promise.succeed(.failed("send", error)) }
            }
            return connected
        }
    }
}

/// Splits the TCP byte stream into length-prefixed messages and completes the try with the first acceptable one.
///
/// A message may arrive split over several reads and several may arrive in one read. The prefix is 16 bits, so a
/// frame never exceeds 65 535 bytes and at most one incomplete frame (under 65 537 bytes) is ever buffered.
/// Mismatched frames are dropped (RFC 7766 §7: responses are matched by ID and question); the try keeps reading
/// until its deadline.
final class TCPReplyHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let query: PendingQuery
    private let promise: EventLoopPromise<ExchangeOutcome>
    private let logger: Logger
    private var pending: ByteBuffer?
    private var finished = false

    init(query: PendingQuery, promise: EventLoopPromise<ExchangeOutcome>, logger: Logger) {
        self.query = query
        self.promise = promise
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !finished else { return }
        var incoming = unwrapInboundIn(data)
        if pending == nil {
            pending = incoming
        } else {
            pending!.writeBuffer(&incoming)
        }
        while !finished, let frame = nextFrame() {
            switch query.classify(frame, overTCP: true) {
            case .accept(let message):
                finish(.response(message))
            case .truncated:
                // classify never reports truncation over TCP.
                break
            case .drop(let reason):
                logger.debug("dropped TCP message", metadata: ["dns.reason": "\(reason)"])
            }
        }
        pending?.discardReadBytes()
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish(.failed("connection closed before an acceptable response"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        finish(.failed("TCP", error))
        context.close(promise: nil)
    }

    /// Removes and returns the next complete message from the buffer, without its length prefix.
    private func nextFrame() -> [UInt8]? {
        guard var buffer = pending, let length = buffer.getInteger(at: buffer.readerIndex, as: UInt16.self),
            buffer.readableBytes >= 2 + Int(length)
        else { return nil }
        pending = nil  // keep the storage uniquely referenced while reading from the local copy
        buffer.moveReaderIndex(forwardBy: 2)
        let frame = buffer.readBytes(length: Int(length)) ?? []
        pending = buffer
        return frame
    }

    private func finish(_ outcome: ExchangeOutcome) {
        guard !finished else { return }
        finished = true
        pending = nil
        promise.succeed(outcome)
    }
}
