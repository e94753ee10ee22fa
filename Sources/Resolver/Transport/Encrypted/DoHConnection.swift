import DNSCore
import Logging
import NIOHPACK
import NIOCore
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS

/// The kept DNS-over-HTTPS connection to one upstream (RFC 8484): HTTP/2 over TLS, one stream per query.
///
/// Queries are POSTed as `application/dns-message` (RFC 8484 §4.1), padded like DoT queries (RFC 8467), on one
/// HTTP/2 connection whose streams run side by side. A reply counts only when its status is 200, its content type
/// `application/dns-message` and its body a DNS message answering the query; anything else (HTTP 500, another
/// type, a truncated or garbage body, a reset stream) ends the try with a reason, and the connection stays.
/// Verification, idle close and back-off are those of ``DoTConnection``.
final class DoHConnection: EncryptedConnection, @unchecked Sendable {
    // @unchecked Sendable: every `var` below is read and written only on `loop` (entry points hop there first).
    let loop: any EventLoop
    let address: SocketAddress
    let server: UpstreamServer
    let statistics: UpstreamStatistics
    private let tls: TLSClientContext
    private let idleTimeout: TimeAmount
    private let logger: Logger

    private var channel: (any Channel)?
    private var multiplexer: NIOHTTP2Handler.StreamMultiplexer?
    private var connecting = false
    /// Tries waiting for the connection to be ready.
    private var queued: [(PendingQuery, EventLoopPromise<ExchangeOutcome>)] = []
    private var active = 0
    private var backoff = ReconnectBackoff()
    private var idleClose: Scheduled<Void>?

    /// The largest DNS message a reply body may hold.
    static let maximumBody = 65_535

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

    func shutdown() {
        loop.execute {
            self.idleClose?.cancel()
            self.channel?.close(promise: nil)
        }
    }

    func start(_ query: PendingQuery, timeout: TimeAmount, promise: EventLoopPromise<ExchangeOutcome>) {
        loop.preconditionInEventLoop()
        guard let padded = query.padded(keepalive: false) else {
            promise.succeed(.failed("the query cannot carry EDNS padding"))
            return
        }
        let deadline = loop.scheduleTask(in: timeout) { promise.succeed(.timedOut) }
        active += 1
        idleClose?.cancel()
        idleClose = nil
        promise.futureResult.whenComplete { _ in
            deadline.cancel()
            self.active -= 1
            self.armIdleClose()
        }
        if let multiplexer {
            send(padded, promise: promise, on: multiplexer)
        } else if let refusal = backoff.refusal() {
            promise.succeed(refusal)
        } else {
            queued.append((padded, promise))
            if !connecting { connect(timeout: timeout) }
        }
    }

    private func send(
        _ query: PendingQuery, promise: EventLoopPromise<ExchangeOutcome>,
        on multiplexer: NIOHTTP2Handler.StreamMultiplexer
    ) {
        let server = self.server
        let logger = self.logger
        let created = loop.makePromise(of: (any Channel).self)
        multiplexer.createStreamChannel(promise: created) { stream in
            stream.eventLoop.makeCompletedFuture {
                try stream.pipeline.syncOperations.addHandler(
                    DoHStreamHandler(query: query, server: server, promise: promise, logger: logger))
            }
        }
        created.futureResult.whenFailure { error in promise.succeed(.failed("HTTP/2 stream: \(error)")) }
        // Closing the stream when the try ends (a timeout, a cancel) resets it; the connection stays.
        promise.futureResult.whenComplete { _ in created.futureResult.whenSuccess { $0.close(promise: nil) } }
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
        let ready = loop.makePromise(of: NIOHTTP2Handler.StreamMultiplexer.self)
        let connected = ClientBootstrap(group: loop)
            .connectTimeout(timeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(handler)
                    try channel.pipeline.syncOperations.addHandler(
                        DoHConnectionEvents(connection: self, reasons: reasons, ready: ready))
                }
            }
            .connect(to: address)
        connected.whenComplete { result in
            switch result {
            case .success(let channel):
                self.channel = channel
                channel.closeFuture.whenComplete { _ in self.closed(channel) }
            case .failure(let error):
                self.connecting = false
                self.statistics.connectionClosed()
                self.connectFailed(.failed("connect: \(error)"))
            }
        }
        ready.futureResult.whenComplete { result in
            self.connecting = false
            switch result {
            case .success(let multiplexer):
                self.multiplexer = multiplexer
                let waiting = self.queued
                self.queued = []
                for (query, promise) in waiting { self.send(query, promise: promise, on: multiplexer) }
            case .failure:
                break
            }
        }
    }

    private func connectFailed(_ outcome: ExchangeOutcome) {
        let delay = backoff.failed(outcome)
        logger.info(
            "encrypted upstream not reachable",
            metadata: ["reason": "\(outcome.reason)", "dns.retry-ms": "\(delay.nanoseconds / 1_000_000)"])
        statistics.failed(outcome.reason)
        let waiting = queued
        queued = []
        for (_, promise) in waiting { promise.succeed(outcome) }
    }

    private func closed(_ closing: any Channel) {
        guard channel === closing else { return }
        channel = nil
        multiplexer = nil
        statistics.connectionClosed()
        let waiting = queued
        queued = []
        for (_, promise) in waiting { promise.succeed(.failed(EncryptedConnections.closedByServer)) }
    }

    private func armIdleClose() {
        guard active == 0, idleClose == nil, let channel else { return }
        idleClose = loop.scheduleTask(in: idleTimeout) {
            self.idleClose = nil
            if self.active == 0 { channel.close(promise: nil) }
        }
    }

    // MARK: - From the pipeline (on `loop`)

    fileprivate func handshakeCompleted(version: String?, alpn: String?, channel: any Channel,
        ready: EventLoopPromise<NIOHTTP2Handler.StreamMultiplexer>)
    {
        backoff.succeeded()
        statistics.handshake(version: version, verifiedName: server.tlsName ?? server.host, resumed: false)
        guard alpn == "h2" else {
            let outcome = ExchangeOutcome.failed("the server did not agree to HTTP/2 (ALPN \(alpn ?? "none"))")
            ready.fail(ChannelError.inappropriateOperationForState)
            connectFailed(outcome)
            channel.close(promise: nil)
            return
        }
        do {
            let multiplexer = try channel.pipeline.syncOperations.configureHTTP2Pipeline(
                mode: .client, connectionConfiguration: .init(), streamConfiguration: .init(),
                inboundStreamInitializer: { $0.close() })
            ready.succeed(multiplexer)
        } catch {
            ready.fail(error)
            connectFailed(.failed("HTTP/2 set-up: \(error)"))
            channel.close(promise: nil)
        }
    }

    fileprivate func errorCaught(_ error: any Error, channel: any Channel, reasons: VerificationReasons,
        ready: EventLoopPromise<NIOHTTP2Handler.StreamMultiplexer>)
    {
        let outcome = TLSClientContext.outcome(for: error, reasons: reasons)
        ready.fail(error)
        if multiplexer == nil {
            connectFailed(outcome)
        } else {
            statistics.failed(outcome.reason)
        }
        channel.close(promise: nil)
    }
}

/// Watches the TLS handshake of a DoH connection and sets up HTTP/2 once `h2` was agreed.
private final class DoHConnectionEvents: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    private let connection: DoHConnection
    private let reasons: VerificationReasons
    private let ready: EventLoopPromise<NIOHTTP2Handler.StreamMultiplexer>

    init(connection: DoHConnection, reasons: VerificationReasons, ready: EventLoopPromise<NIOHTTP2Handler.StreamMultiplexer>) {
        self.connection = connection
        self.reasons = reasons
        self.ready = ready
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted(let alpn) = event {
            let version = try? context.pipeline.syncOperations.handler(type: NIOSSLClientHandler.self).tlsVersion
            // HTTP/2 handlers go after this one; it stays only to report errors.
            connection.handshakeCompleted(
                version: version.map(TLSClientContext.describe), alpn: alpn, channel: context.channel, ready: ready)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        connection.errorCaught(error, channel: context.channel, reasons: reasons, ready: ready)
    }

    func channelInactive(context: ChannelHandlerContext) {
        ready.fail(ChannelError.ioOnClosedChannel)
        context.fireChannelInactive()
    }
}

/// One DoH exchange on one HTTP/2 stream: POST the query, check status and content type, read the body.
private final class DoHStreamHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundIn = Never
    typealias OutboundOut = HTTP2Frame.FramePayload

    private let query: PendingQuery
    private let server: UpstreamServer
    private let promise: EventLoopPromise<ExchangeOutcome>
    private let logger: Logger
    private var status: String?
    private var contentType: String?
    private var body: [UInt8] = []
    private var finished = false

    init(query: PendingQuery, server: UpstreamServer, promise: EventLoopPromise<ExchangeOutcome>, logger: Logger) {
        self.query = query
        self.server = server
        self.promise = promise
        self.logger = logger
    }

    func channelActive(context: ChannelHandlerContext) {
        let headers: HPACKHeaders = [
            ":method": "POST", ":scheme": "https", ":authority": server.authority, ":path": server.path,
            "content-type": "application/dns-message", "accept": "application/dns-message",
            "content-length": "\(query.wire.count)",
        ]
        context.write(wrapOutboundOut(.headers(.init(headers: headers))), promise: nil)
        let buffer = context.channel.allocator.buffer(bytes: query.wire)
        context.writeAndFlush(wrapOutboundOut(.data(.init(data: .byteBuffer(buffer), endStream: true))), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !finished else { return }
        switch unwrapInboundIn(data) {
        case .headers(let frame):
            if status == nil {
                status = frame.headers.first(name: ":status")
                contentType = frame.headers.first(name: "content-type")
            }
            if frame.endStream { complete() }
        case .data(let frame):
            if case .byteBuffer(var buffer) = frame.data {
                guard body.count + buffer.readableBytes <= DoHConnection.maximumBody else {
                    finish(.failed("HTTP reply body larger than a DNS message"))
                    return
                }
                body += buffer.readBytes(length: buffer.readableBytes) ?? []
            }
            if frame.endStream { complete() }
        case .rstStream(let frame):
            finish(.failed("the server reset the HTTP/2 stream (\(frame))"))
        default:
            break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish(.failed(status == nil ? "the HTTP/2 stream closed before a reply" : "the HTTP reply body was cut short"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        finish(.failed("HTTP/2: \(error)"))
        context.close(promise: nil)
    }

    private func complete() {
        guard status == "200" else {
            finish(.failed("HTTP status \(status ?? "missing") from the DoH server"))
            return
        }
        let type = contentType?.split(separator: ";").first.map { $0.filter { !$0.isWhitespace }.lowercased() }
        guard type == "application/dns-message" else {
            finish(.failed("DoH reply of content type '\(contentType ?? "none")', not application/dns-message"))
            return
        }
        switch query.classify(body, overTCP: true) {
        case .accept(let message): finish(.response(message))
        case .truncated: finish(.failed("DoH reply marked truncated"))
        case .drop(let reason): finish(.failed("unusable DoH reply: \(reason)"))
        }
    }

    private func finish(_ outcome: ExchangeOutcome) {
        guard !finished else { return }
        finished = true
        promise.succeed(outcome)
    }
}
