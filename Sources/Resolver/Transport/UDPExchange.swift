import DNSCore
import Logging
import NIOCore
import NIOPosix

/// One query over UDP on a fresh connected socket.
enum UDPExchange {
    /// The largest DNS message a datagram can carry; servers may ignore our EDNS size (RFC 6891 §6.2.5), and a
    /// reply cut short by a smaller receive buffer would be dropped as unparseable.
    static let receiveBufferSize = 65_535

    /// Sends `query` to `address` from a new socket and waits for an acceptable reply until `timeout`.
    ///
    /// RFC 5452 §9.2: every try uses a new socket, so the kernel picks a new random ephemeral source port (Linux
    /// randomises UDP ports), and the socket is connected, so datagrams from any other address or port never reach
    /// us (§9.1). Mismatched, garbage and non-response datagrams are dropped and the try keeps waiting.
    static func run(
        _ query: PendingQuery, to address: SocketAddress, timeout: TimeAmount, on loop: any EventLoop, logger: Logger
    ) async -> ExchangeOutcome {
        await ExchangeRunner.run(on: loop, timeout: timeout) { promise in
            let connected = DatagramBootstrap(group: loop)
                .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: receiveBufferSize))
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let handler = UDPReplyHandler(query: query, promise: promise, logger: logger)
                        try channel.pipeline.syncOperations.addHandler(handler)
                    }
                }
                .connect(to: address)
            connected.whenSuccess { channel in
                channel.writeAndFlush(channel.allocator.buffer(bytes: query.wire)).whenFailure { error in
                    promise.succeed(.failed("send", error))
                }
            }
            return connected
        }
    }
}

/// Reads datagrams on a try's socket until one is acceptable.
final class UDPReplyHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>

    private let query: PendingQuery
    private let promise: EventLoopPromise<ExchangeOutcome>
    private let logger: Logger

    init(query: PendingQuery, promise: EventLoopPromise<ExchangeOutcome>, logger: Logger) {
        self.query = query
        self.promise = promise
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var envelope = unwrapInboundIn(data)
        let bytes = envelope.data.readBytes(length: envelope.data.readableBytes) ?? []
        switch query.classify(bytes, overTCP: false) {
        case .accept(let message):
            promise.succeed(.response(message))
        case .truncated(let rcode):
            promise.succeed(.truncated(rcode))
        case .drop(let reason):
            logger.debug("dropped UDP datagram", metadata: ["dns.reason": "\(reason)"])
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // On a connected UDP socket this is an ICMP error (port or host unreachable): nothing will come.
        promise.succeed(.failed("receive", error))
    }
}
