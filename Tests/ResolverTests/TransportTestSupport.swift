import DNSCore
import NIOCore
import NIOPosix
import Synchronization

@testable import Resolver

/// A query as the fake upstream received it.
struct LoopbackQuery: Sendable {
    /// Order of arrival at this server, UDP and TCP together, from 0.
    var index: Int
    var transport: QueryTransport
    var id: UInt16
    /// The parsed query; `nil` if it did not parse (it always should).
    var message: DNSMessage?
    /// The client's source port.
    var sourcePort: Int
    var bytes: [UInt8]

    var question: DNSQuestion { message?.question ?? DNSQuestion(name: ".", type: .a) }
}

/// What the fake upstream sends back for one query.
enum LoopbackReply: Sendable {
    /// One message (over TCP with its length prefix), after a delay.
    case send([UInt8], after: Duration = .zero)
    /// TCP only: the message with its length prefix, in pieces of `size` bytes with `gap` between writes.
    case sendInPieces([UInt8], size: Int, gap: Duration)
    /// TCP only: several length-prefixed messages in one write.
    case sendTogether([[UInt8]])
    /// TCP only: close the connection.
    case close
}

/// A programmable DNS server on loopback, UDP and TCP on the same port, for transport tests only.
///
/// `script` decides the replies for every query it receives; it runs on the server's event loop.
final class LoopbackUpstream: Sendable {
    typealias Script = @Sendable (LoopbackQuery) -> [LoopbackReply]

    let server: UpstreamServer
    private let udp: any Channel
    private let tcp: any Channel
    private let log: LoopbackUpstreamLog

    private init(server: UpstreamServer, udp: any Channel, tcp: any Channel, log: LoopbackUpstreamLog) {
        self.server = server
        self.udp = udp
        self.tcp = tcp
        self.log = log
    }

    /// Binds UDP on an ephemeral port of `host`, then TCP on the same port.
    static func start(host: String = "127.0.0.1", script: @escaping Script) async throws -> LoopbackUpstream {
        let group = MultiThreadedEventLoopGroup.singleton
        let log = LoopbackUpstreamLog()
        var lastError: (any Error)?
        for _ in 0..<20 {
            let udp = try await DatagramBootstrap(group: group)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(LoopbackUDPHandler(log: log, script: script))
                    }
                }
                .bind(host: host, port: 0).get()
            guard let port = udp.localAddress?.port else { throw LoopbackUpstreamError.noPort }
            do {
                let tcp = try await ServerBootstrap(group: group)
                    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                    .childChannelInitializer { channel in
                        channel.eventLoop.makeCompletedFuture {
                            try channel.pipeline.syncOperations.addHandler(LoopbackTCPHandler(log: log, script: script))
                        }
                    }
                    .bind(host: host, port: port).get()
                return LoopbackUpstream(server: UpstreamServer(host: host, port: port), udp: udp, tcp: tcp, log: log)
            } catch {
                lastError = error  // the TCP port is taken: try another UDP port
                try? await udp.close()
            }
        }
        throw lastError ?? LoopbackUpstreamError.noPort
    }

    /// Every query received so far, in order.
    var received: [LoopbackQuery] { log.all }

    func stop() async {
        try? await udp.close()
        try? await tcp.close()
    }
}

enum LoopbackUpstreamError: Error {
    case noPort
}

/// The queries a fake upstream received; shared by its UDP and TCP handlers.
final class LoopbackUpstreamLog: Sendable {
    private let queries = Mutex<[LoopbackQuery]>([])

    func record(_ transport: QueryTransport, _ bytes: [UInt8], sourcePort: Int) -> LoopbackQuery {
        queries.withLock { queries in
            let message = try? DNSMessage.parse(bytes)
            let id = (try? DNSHeader.parse(bytes))?.id ?? 0
            let query = LoopbackQuery(
                index: queries.count, transport: transport, id: id, message: message, sourcePort: sourcePort,
                bytes: bytes)
            queries.append(query)
            return query
        }
    }

    var all: [LoopbackQuery] { queries.withLock { $0 } }
}

private final class LoopbackUDPHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>

    let log: LoopbackUpstreamLog
    let script: LoopbackUpstream.Script

    init(log: LoopbackUpstreamLog, script: @escaping LoopbackUpstream.Script) {
        self.log = log
        self.script = script
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var envelope = unwrapInboundIn(data)
        let bytes = envelope.data.readBytes(length: envelope.data.readableBytes) ?? []
        let query = log.record(.udp, bytes, sourcePort: envelope.remoteAddress.port ?? 0)
        let channel = context.channel
        let peer = envelope.remoteAddress
        for reply in script(query) {
            guard case .send(let message, let delay) = reply else { continue }
            channel.eventLoop.scheduleTask(in: TimeAmount(delay)) {
                let buffer = channel.allocator.buffer(bytes: message)
                channel.writeAndFlush(AddressedEnvelope(remoteAddress: peer, data: buffer), promise: nil)
            }
        }
    }
}

private final class LoopbackTCPHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    let log: LoopbackUpstreamLog
    let script: LoopbackUpstream.Script
    private var buffer = ByteBuffer()

    init(log: LoopbackUpstreamLog, script: @escaping LoopbackUpstream.Script) {
        self.log = log
        self.script = script
    }

    static func framed(_ message: [UInt8]) -> [UInt8] {
        [UInt8(message.count >> 8 & 0xFF), UInt8(message.count & 0xFF)] + message
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var incoming = unwrapInboundIn(data)
        buffer.writeBuffer(&incoming)
        let channel = context.channel
        while let length = buffer.getInteger(at: buffer.readerIndex, as: UInt16.self),
            buffer.readableBytes >= 2 + Int(length)
        {
            buffer.moveReaderIndex(forwardBy: 2)
            let bytes = buffer.readBytes(length: Int(length)) ?? []
            let query = log.record(.tcp, bytes, sourcePort: channel.remoteAddress?.port ?? 0)
            for reply in script(query) {
                switch reply {
                case .send(let message, let delay):
                    channel.eventLoop.scheduleTask(in: TimeAmount(delay)) {
                        channel.writeAndFlush(channel.allocator.buffer(bytes: Self.framed(message)), promise: nil)
                    }
                case .sendInPieces(let message, let size, let gap):
                    let framed = Self.framed(message)
                    for (number, start) in stride(from: 0, to: framed.count, by: max(1, size)).enumerated() {
                        let piece = Array(framed[start..<min(framed.count, start + max(1, size))])
                        channel.eventLoop.scheduleTask(in: TimeAmount(gap * number)) {
                            channel.writeAndFlush(channel.allocator.buffer(bytes: piece), promise: nil)
                        }
                    }
                case .sendTogether(let messages):
                    let bytes = messages.flatMap(Self.framed)
                    channel.writeAndFlush(channel.allocator.buffer(bytes: bytes), promise: nil)
                case .close:
                    channel.close(promise: nil)
                }
            }
        }
        buffer.discardReadBytes()
    }
}

/// Responses for the fake upstream, built byte by byte (see `TestMessage`).
enum LoopbackAnswer {
    /// A response to `query`: its question (or `name`), `rcode`, TC as given, and one A record with `address`
    /// when the rcode is NOERROR and TC is clear.
    static func to(
        _ query: LoopbackQuery, id: UInt16? = nil, name: String? = nil, rcode: RCode = .noError, tc: Bool = false,
        address: [UInt8] = [192, 0, 2, 1]
    ) -> [UInt8] {
        var message = TestMessage()
        message.id = id ?? query.id
        message.flags = 0x8180 | (tc ? 0x0200 : 0) | (rcode.rawValue & 0x0F)
        let owner = TestMessage.name(name ?? query.question.name)
        message.questions = [TestMessage.question(owner, query.question.type, query.question.class)]
        if rcode == .noError && !tc {
            message.answers = [TestMessage.record(owner, .a, rdata: address)]
        }
        message.additional = [TestMessage.opt()]
        return message.bytes
    }

    /// The IPv4 address in the first answer of `message`, for telling responses apart.
    static func address(of message: DNSMessage) -> [UInt8]? {
        message.answer.first?.rdata
    }
}
