import DNSCore
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS

/// The kept DNS-over-TLS connection to one upstream (RFC 7858), shared by every query to it.
///
/// - One TLS connection, opened by the first query; queries are pipelined on it and replies matched by ID in any
///   order (RFC 7766 §6.2.1.1, RFC 7858 §3.3). An ID already waiting on the connection is never reused.
/// - Every query carries an empty edns-tcp-keepalive option (RFC 7828) and is padded to a multiple of 128 bytes
///   (RFC 7830, RFC 8467 §4.1).
/// - The certificate is always verified (chain against the trust store, then the name or the address): a failure
///   ends the try with ``ExchangeOutcome/insecure(_:)`` and nothing is sent in clear text.
/// - A connection idle for `idleTimeout` is closed; one the server closed is reopened by the next query. A failed
///   connect or handshake starts a back-off (250 ms doubling up to 8 s) during which tries fail at once with the
///   same reason, so the resolver serves stale answers instead of waiting.
final class DoTConnection: EncryptedConnection, @unchecked Sendable {
    // @unchecked Sendable: every `var` below is read and written only on `loop` (each entry point hops there
    // first; `preconditionInEventLoop` guards the internal ones).
    let loop: any EventLoop
    let address: SocketAddress
    let server: UpstreamServer
    let statistics: UpstreamStatistics
    private let tls: TLSClientContext
    private let idleTimeout: TimeAmount
    private let logger: Logger

    private var channel: (any Channel)?
    private var connecting = false
    private var pending: [UInt16: Waiter] = [:]
    private var backoff = ReconnectBackoff()
    private var idleClose: Scheduled<Void>?

    private struct Waiter {
        var query: PendingQuery
        var promise: EventLoopPromise<ExchangeOutcome>
        var written = false
    }

    init(
        server: UpstreamServer, address: SocketAddress, tls: TLSClientContext, statistics: UpstreamStatistics,
        idleTimeout: Duration, loop: any EventLoop, logger: Logger
    ) {
        self.server = server
        self.address = address
        self.tls = tls
        self.statistics = statistics
        self.idleTimeout = TimeAmount(idleTimeout)
        self.loop = loop
        var logger = logger
        logger[metadataKey: "dns.server"] = "\(server)"
        self.logger = logger
    }

    /// Closes the connection (on reload, when the upstream is gone); waiting tries fail.
    func shutdown() {
        loop.execute {
            self.idleClose?.cancel()
            self.channel?.close(promise: nil)
        }
    }

    func start(_ query: PendingQuery, timeout: TimeAmount, promise: EventLoopPromise<ExchangeOutcome>) {
        loop.preconditionInEventLoop()
        var query = query
        while pending[query.id] != nil {
            query = query.withID(UInt16.random(in: .min ... .max))
        }
        guard let padded = query.padded(keepalive: true) else {
            promise.succeed(.failed("the query cannot carry EDNS padding"))
            return
        }
        let id = padded.id
        let deadline = loop.scheduleTask(in: timeout) { promise.succeed(.timedOut) }
        pending[id] = Waiter(query: padded, promise: promise)
        idleClose?.cancel()
        idleClose = nil
        promise.futureResult.whenComplete { _ in
            deadline.cancel()
            if self.pending[id]?.promise.futureResult === promise.futureResult { self.pending[id] = nil }
            self.armIdleClose()
        }
        if let channel {
            write(id, on: channel)
        } else if let refusal = backoff.refusal() {
            promise.succeed(refusal)
        } else if !connecting {
            connect(timeout: timeout)
        }
    }

    private func write(_ id: UInt16, on channel: any Channel) {
        guard var waiter = pending[id], !waiter.written else { return }
        waiter.written = true
        pending[id] = waiter
        var frame = channel.allocator.buffer(capacity: waiter.query.wire.count + 2)
        frame.writeInteger(UInt16(truncatingIfNeeded: waiter.query.wire.count))
        frame.writeBytes(waiter.query.wire)
        channel.writeAndFlush(frame).whenFailure { error in waiter.promise.succeed(.failed("send: \(error)")) }
    }

    private func connect(timeout: TimeAmount) {
        connecting = true
        let handler: NIOSSLClientHandler
        let reasons = VerificationReasons()
        do {
            handler = try tls.handler(reasons: reasons)
        } catch {
            connectFailed(.insecure("TLS set-up: \(error)"))
            return
        }
        statistics.connectionOpened()
        let connected = ClientBootstrap(group: loop)
            .connectTimeout(timeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(handler)
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(DNSStreamFrameDecoder()))
                    try channel.pipeline.syncOperations.addHandler(DoTReplyHandler(connection: self, reasons: reasons))
                }
            }
            .connect(to: address)
        connected.whenComplete { result in
            self.connecting = false
            switch result {
            case .success(let channel):
                self.channel = channel
                channel.closeFuture.whenComplete { _ in self.closed(channel) }
                for id in self.pending.keys { self.write(id, on: channel) }
            case .failure(let error):
                self.statistics.connectionClosed()
                self.connectFailed(.failed("connect: \(error)"))
            }
        }
    }

    /// A connect or a handshake failed: every waiting try fails with `outcome`, and a back-off starts.
    private func connectFailed(_ outcome: ExchangeOutcome) {
        loop.preconditionInEventLoop()
        let delay = backoff.failed(outcome)
        logger.info(
            "encrypted upstream not reachable",
            metadata: ["reason": "\(outcome.reason)", "dns.retry-ms": "\(delay.nanoseconds / 1_000_000)"])
        statistics.failed(outcome.reason)
        failAll(outcome)
    }

    private func failAll(_ outcome: ExchangeOutcome) {
        let waiting = pending.values
        pending.removeAll()
        for waiter in waiting { waiter.promise.succeed(outcome) }
    }

    private func closed(_ closing: any Channel) {
        guard channel === closing else { return }
        channel = nil
        statistics.connectionClosed()
        if !pending.isEmpty {
            failAll(.failed(EncryptedConnections.closedByServer))
        }
    }

    private func armIdleClose() {
        guard pending.isEmpty, idleClose == nil, let channel else { return }
        idleClose = loop.scheduleTask(in: idleTimeout) {
            self.idleClose = nil
            if self.pending.isEmpty { channel.close(promise: nil) }
        }
    }

    // MARK: - From the pipeline (on `loop`)

    fileprivate func handshakeCompleted(version: String?) {
        backoff.succeeded()
        statistics.handshake(
            version: version, verifiedName: server.tlsName ?? server.host, resumed: false)
    }

    fileprivate func received(_ frame: [UInt8]) {
        guard frame.count >= 2 else { return }
        let id = UInt16(frame[0]) << 8 | UInt16(frame[1])
        guard let waiter = pending[id] else {
            logger.debug("dropped DoT reply for no waiting query", metadata: ["dns.id": "\(id)"])
            return
        }
        switch waiter.query.classify(frame, overTCP: true) {
        case .accept(let message): waiter.promise.succeed(.response(message))
        case .truncated: break
        case .drop(let reason): logger.debug("dropped DoT message", metadata: ["dns.reason": "\(reason)"])
        }
    }

    fileprivate func errorCaught(_ error: any Error, channel: any Channel, reasons: VerificationReasons) {
        let outcome = TLSClientContext.outcome(for: error, reasons: reasons)
        if case .insecure = outcome {
            connectFailed(outcome)
        } else {
            statistics.failed(outcome.reason)
            failAll(outcome)
        }
        channel.close(promise: nil)
    }
}

/// Hands decoded frames and TLS events to the ``DoTConnection``.
private final class DoTReplyHandler: ChannelInboundHandler {
    typealias InboundIn = [UInt8]
    private let connection: DoTConnection
    private let reasons: VerificationReasons

    init(connection: DoTConnection, reasons: VerificationReasons) {
        self.connection = connection
        self.reasons = reasons
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        connection.received(unwrapInboundIn(data))
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event {
            let version = try? context.pipeline.syncOperations.handler(type: NIOSSLClientHandler.self).tlsVersion
            connection.handshakeCompleted(version: version.map(TLSClientContext.describe))
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        connection.errorCaught(error, channel: context.channel, reasons: reasons)
    }
}

/// Splits a DNS-over-TCP byte stream into messages (RFC 1035 §4.2.2: a 2-byte length, then the message).
struct DNSStreamFrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = [UInt8]

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let length = buffer.getInteger(at: buffer.readerIndex, as: UInt16.self),
            buffer.readableBytes >= 2 + Int(length)
        else { return .needMoreData }
        buffer.moveReaderIndex(forwardBy: 2)
        let frame = buffer.readBytes(length: Int(length)) ?? []
        context.fireChannelRead(wrapInboundOut(frame))
        return .continue
    }
}

/// Reconnect back-off after a failed connect or handshake: 250 ms, doubling, at most 8 s.
struct ReconnectBackoff {
    private var failures = 0
    private var until: NIODeadline = .distantPast
    private var last: ExchangeOutcome?

    /// Records a failure and returns the delay before the next connect.
    mutating func failed(_ outcome: ExchangeOutcome) -> TimeAmount {
        failures += 1
        let delay = TimeAmount.milliseconds(min(8000, 250 << min(failures - 1, 6)))
        until = .now() + delay
        last = outcome
        return delay
    }

    mutating func succeeded() {
        failures = 0
        until = .distantPast
        last = nil
    }

    /// The outcome of a try made during the back-off, or nil when a connect may be made.
    func refusal() -> ExchangeOutcome? {
        guard NIODeadline.now() < until, let last else { return nil }
        switch last {
        case .insecure(let reason): return .insecure("\(reason) (retrying after a back-off)")
        default: return .failed("\(last.reason) (retrying after a back-off)")
        }
    }
}

extension PendingQuery {
    /// The same query with another ID.
    func withID(_ id: UInt16) -> PendingQuery {
        PendingQuery(template: wire, id: id, question: question, nameLength: questionLength - 4)
    }

    /// The query with keepalive and padding options (``EDNSPadding``), or nil if it has no OPT record to carry them.
    func padded(keepalive: Bool) -> PendingQuery? {
        guard let wire = EDNSPadding.pad(wire, questionLength: questionLength, keepalive: keepalive) else {
            return nil
        }
        return PendingQuery(template: wire, id: id, question: question, nameLength: questionLength - 4)
    }
}

extension ExchangeOutcome {
    /// The failure text of an outcome that is not a response.
    var reason: String {
        switch self {
        case .response: "response"
        case .truncated: "truncated"
        case .timedOut: "timeout"
        case .failed(let reason), .insecure(let reason): reason
        case .cancelled: "cancelled"
        }
    }
}
