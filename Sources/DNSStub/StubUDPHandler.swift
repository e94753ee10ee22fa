import NIOCore

/// Serves DNS over UDP on one datagram channel: answers cache hits inline and flushes once per read batch.
final class StubUDPHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    typealias OutboundOut = AddressedEnvelope<ByteBuffer>

    private let responder: StubResponder
    private var wrote = false

    init(responder: StubResponder) {
        self.responder = responder
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        let remote = envelope.remoteAddress
        let channel = context.channel
        let bytes = Array(envelope.data.readableBytesView)
        let outcome = responder.handle(bytes, client: remote, overTCP: false) { reply in
            let buffer = channel.allocator.buffer(bytes: reply)
            channel.writeAndFlush(AddressedEnvelope(remoteAddress: remote, data: buffer), promise: nil)
        }
        if case .reply(let reply) = outcome {
            let buffer = context.channel.allocator.buffer(bytes: reply)
            context.write(wrapOutboundOut(AddressedEnvelope(remoteAddress: remote, data: buffer)), promise: nil)
            wrote = true
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if wrote {
            wrote = false
            context.flush()
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A datagram socket reports ICMP errors of earlier sends here (a client that went away); the socket stays
        // usable for everyone else, so nothing is closed.
    }
}
