import DiscoverAPI
import NIOCore
import NIOPosix

/// One client connection to the daemon: writes calls, matches replies to calls in order.
///
/// Replies arrive strictly in call order (varlink), so pending calls form a FIFO: the head receives
/// each reply, and leaves the queue on its final one. All state lives on the channel's event loop.
final class VarlinkConnection: Sendable {
    let channel: any Channel
    private let handler: NIOLoopBound<ReplyHandler>

    private init(channel: any Channel, handler: NIOLoopBound<ReplyHandler>) {
        self.channel = channel
        self.handler = handler
    }

    /// Connects to the daemon's socket.
    static func connect(path: String, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) async throws
        -> VarlinkConnection
    {
        let bootstrap = ClientBootstrap(group: group)
        let channel: any Channel
        do {
            channel = try await bootstrap.connect(unixDomainSocketPath: path).get()
        } catch {
            let reason = SocketDiagnosis.reason(connecting: path, error: error)
            throw DiscoverError(
                code: .daemonUnreachable, parameters: ["socket": .string(path), "reason": .string(reason)],
                message: SocketDiagnosis.message(path: path, reason: reason))
        }
        let handler = try await channel.eventLoop.submit {
            let handler = ReplyHandler()
            try channel.pipeline.syncOperations.addHandler(handler)
            return NIOLoopBound(handler, eventLoop: channel.eventLoop)
        }.get()
        return VarlinkConnection(channel: channel, handler: handler)
    }

    /// Sends a call and waits for its single reply. Cancelling the task abandons the reply.
    func call(_ bytes: [UInt8]) async throws -> VarlinkReplyMessage {
        let pending = PendingBox()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<VarlinkReplyMessage, any Error>) in
                let handler = self.handler
                let channel = self.channel
                channel.eventLoop.execute {
                    handler.value.enqueue(.single(continuation, pending), bytes: bytes, channel: channel)
                }
            }
        } onCancel: {
            let handler = self.handler
            handler.eventLoop.execute { handler.value.abandon(pending) }
        }
    }

    /// Sends a `more` call; replies are yielded until the final one.
    func stream(_ bytes: [UInt8], into continuation: AsyncThrowingStream<VarlinkReplyMessage, any Error>.Continuation) {
        let handler = self.handler
        let channel = self.channel
        channel.eventLoop.execute {
            handler.value.enqueue(.stream(continuation), bytes: bytes, channel: channel)
        }
    }

    /// Sends a call whose reply nobody waits for (`oneway`).
    func send(_ bytes: [UInt8]) {
        channel.writeAndFlush(ByteBuffer(bytes: bytes), promise: nil)
    }

    func close() {
        channel.close(promise: nil)
    }

    var isActive: Bool { channel.isActive }
}

/// Identifies a one-shot call so a cancelled caller's reply can be dropped when it arrives.
final class PendingBox: Sendable {}

final class ReplyHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    enum Pending {
        case single(CheckedContinuation<VarlinkReplyMessage, any Error>?, PendingBox)
        case stream(AsyncThrowingStream<VarlinkReplyMessage, any Error>.Continuation)
    }

    private var framer = VarlinkFramer(maxMessageSize: 16 * 1024 * 1024)
    private var pending = CircularBuffer<Pending>()
    private var closed = false

    func enqueue(_ call: Pending, bytes: [UInt8], channel: any Channel) {
        guard !closed else {
            fail(call, DiscoverError(code: .connectionClosed, message: "the connection to discoverd is closed"))
            return
        }
        pending.append(call)
        channel.writeAndFlush(ByteBuffer(bytes: bytes), promise: nil)
    }

    func abandon(_ box: PendingBox) {
        for index in pending.indices {
            if case .single(let continuation?, let candidate) = pending[index], candidate === box {
                continuation.resume(throwing: CancellationError())
                pending[index] = .single(nil, box)
            }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        framer.append(unwrapInboundIn(data).readableBytesView)
        while true {
            let message: ArraySlice<UInt8>?
            do {
                message = try framer.next()
            } catch {
                failAll(DiscoverError(code: .protocolError, message: "reply from discoverd is too large"))
                context.close(promise: nil)
                return
            }
            guard let message else { return }
            let reply: VarlinkReplyMessage
            do {
                reply = try VarlinkReplyMessage.decode(message)
            } catch {
                failAll(DiscoverError(code: .protocolError, message: "discoverd sent a reply that is not valid JSON"))
                context.close(promise: nil)
                return
            }
            deliver(reply)
        }
    }

    private func deliver(_ reply: VarlinkReplyMessage) {
        guard let head = pending.first else { return }
        switch head {
        case .single(let continuation, _):
            pending.removeFirst()
            continuation?.resume(returning: reply)
        case .stream(let continuation):
            continuation.yield(reply)
            if !reply.continues || reply.error != nil {
                pending.removeFirst()
                continuation.finish()
            }
        }
    }

    private func fail(_ call: Pending, _ error: DiscoverError) {
        switch call {
        case .single(let continuation, _): continuation?.resume(throwing: error)
        case .stream(let continuation): continuation.finish(throwing: error)
        }
    }

    private func failAll(_ error: DiscoverError) {
        closed = true
        while let call = pending.popFirst() { fail(call, error) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        failAll(DiscoverError(code: .connectionClosed, message: "discoverd closed the connection"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
