import DNSCore
import Logging
import NIOCore
import NIOPosix

/// Sends UPDATE messages to a server over TCP (RFC 2136 §3.8 allows it; an UPDATE with TXT and addresses easily
/// outgrows 512 bytes, and TCP needs no truncation handling), each try on a fresh connection.
struct UpdateClient: Sendable {
    let attempts: Int
    let timeout: Duration
    let logger: Logger

    /// Sends `message` to `server` and returns the checked reply; a try that gets no answer in time (or a
    /// connection error) is retried, up to `attempts` tries.
    /// - Throws: `timeout` when no try got an answer; `badReplySignature` for a reply whose TSIG fails.
    func send(_ message: UpdateMessage, to server: UpdateServerAddress) async throws(WideAreaError) -> UpdateMessage.Reply {
        var lastProblem = "no answer"
        for attempt in 1...attempts {
            switch await Self.exchange(message.wire, server: server, timeout: timeout) {
            case .success(let bytes):
                do {
                    return try message.check(reply: bytes)
                } catch where error.code == .lookupFailed {
                    lastProblem = error.message
                }
            case .failure(let problem):
                lastProblem = problem.description
            }
            if Task.isCancelled { break }
            logger.info(
                "UPDATE try failed", metadata: ["server": "\(server)", "try": "\(attempt)", "error": "\(lastProblem)"])
        }
        throw WideAreaError(
            .timeout, "update server \(server) did not answer the UPDATE after \(attempts) tries (\(lastProblem))")
    }

    struct Problem: Error, CustomStringConvertible {
        var description: String
    }

    /// One try: connect, send the length-prefixed message, read one length-prefixed reply (RFC 1035 §4.2.2).
    static func exchange(_ wire: [UInt8], server: UpdateServerAddress, timeout: Duration) async -> Result<[UInt8], Problem> {
        let address: SocketAddress
        do {
            address = try SocketAddress(ipAddress: server.host, port: server.port)
        } catch {
            return .failure(Problem(description: "\(server.host) is not an IP address"))
        }
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let promise = loop.makePromise(of: [UInt8].self)
        let deadline = loop.scheduleTask(in: .nanoseconds(Int64(timeout.components.seconds) * 1_000_000_000
            + timeout.components.attoseconds / 1_000_000_000))
        {
            promise.fail(Problem(description: "timed out after \(timeout)"))
        }
        let connected = ClientBootstrap(group: loop)
            .connectTimeout(.seconds(Int64(max(1, timeout.components.seconds))))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(FramedReplyHandler(promise: promise))
                }
            }
            .connect(to: address)
        connected.whenSuccess { channel in
            var buffer = channel.allocator.buffer(capacity: wire.count + 2)
            buffer.writeInteger(UInt16(wire.count))
            buffer.writeBytes(wire)
            channel.writeAndFlush(buffer).whenFailure { promise.fail($0) }
        }
        connected.whenFailure { promise.fail($0) }
        promise.futureResult.whenComplete { _ in
            deadline.cancel()
            connected.whenSuccess { $0.close(promise: nil) }
        }
        return await withTaskCancellationHandler {
            do {
                return .success(try await promise.futureResult.get())
            } catch let problem as Problem {
                return .failure(problem)
            } catch {
                return .failure(Problem(description: "\(error)"))
            }
        } onCancel: {
            promise.fail(Problem(description: "cancelled"))
        }
    }
}

/// Collects one length-prefixed DNS message from a TCP stream and completes the promise with it.
private final class FramedReplyHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let promise: EventLoopPromise<[UInt8]>
    private var received: ByteBuffer?

    init(promise: EventLoopPromise<[UInt8]>) {
        self.promise = promise
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var incoming = unwrapInboundIn(data)
        if received == nil {
            received = incoming
        } else {
            received!.writeBuffer(&incoming)
        }
        guard let buffer = received, let length = buffer.getInteger(at: buffer.readerIndex, as: UInt16.self),
            buffer.readableBytes >= 2 + Int(length)
        else { return }
        promise.succeed(buffer.getBytes(at: buffer.readerIndex + 2, length: Int(length)) ?? [])
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(UpdateClient.Problem(description: "the server closed the connection without a reply"))
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(error)
        context.close(promise: nil)
    }
}
