import DNSCore
import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2

/// How DoH queries to one upstream are sent (RFC 8484 §4.1), kept across its connections.
///
/// POST (`application/dns-message` body) first; a server that answers a POST with HTTP 405 (method not allowed),
/// 415 (unsupported media type) or 501 (not implemented) is asked the same query again with GET, and every later
/// query to it uses GET. `get` from the start: `discover query --https-get` (like `kdig +https-get`).
final class DoHMethod: @unchecked Sendable {
    // @unchecked Sendable: `get` is read and written only on the pool's event loop.
    private(set) var get: Bool
    /// The HTTP status that made the upstream switch to GET.
    private(set) var switchedBecause: String?

    init(get: Bool = false) {
        self.get = get
    }

    /// The statuses by which a server says it takes no POST (RFC 9110 §15.5.6, §15.5.16, §15.6.2).
    static let refusesPOST: Set<String> = ["405", "415", "501"]

    func switchToGET(status: String) {
        get = true
        switchedBecause = status
    }
}

/// DNS over HTTPS on one connection of a ``TLSConnectionPool`` (RFC 8484): HTTP/2, one stream per query.
///
/// Queries are padded like DoT queries (RFC 8467) and sent as ``DoHMethod`` says, on one HTTP/2 connection whose
/// streams run side by side. A reply counts only when its status is 200, its content type `application/dns-message`
/// and its body a DNS message answering the query; anything else (HTTP 500, another type, a truncated or garbage
/// body, a reset stream) ends the try with a reason, and the connection stays.
final class DoHSession: TLSSession, @unchecked Sendable {
    // @unchecked Sendable: every `var` is read and written only on its pool's event loop.
    static let sendsKeepalive = false
    /// The largest DNS message a reply body may hold.
    static let maximumBody = 65_535

    private let server: UpstreamServer
    private let method: DoHMethod
    private let statistics: UpstreamStatistics
    private let logger: Logger
    /// The path of the server's URI template; nil only for an ``UpstreamServer`` made in code with an unusable
    /// path (the parsers of settings and DDR designations refuse those).
    private let template: DoHPathTemplate?
    private var multiplexer: NIOHTTP2Handler.StreamMultiplexer?
    /// What the streams of this connection need to know of it.
    private let connection = DoHConnectionState()
    var serverKeepalive: TimeAmount? { nil }

    init(server: UpstreamServer, method: DoHMethod, statistics: UpstreamStatistics, logger: Logger) {
        self.server = server
        self.template = try? DoHPathTemplate(server.path)
        self.method = method
        self.statistics = statistics
        self.logger = logger
    }

    func channelHandlers() -> [any ChannelHandler] { [] }

    func handshakeCompleted(alpn: String?, channel: any Channel, goingAway: @escaping () -> Void) throws {
        guard alpn == "h2" else {
            throw DoHSetupError(text: "the server did not agree to HTTP/2 (ALPN \(alpn ?? "none"))")
        }
        do {
            multiplexer = try channel.pipeline.syncOperations.configureHTTP2Pipeline(
                mode: .client, connectionConfiguration: .init(), streamConfiguration: .init(),
                inboundStreamInitializer: { $0.close() })
            try channel.pipeline.syncOperations.addHandler(GoAwayWatcher(connection: connection, goingAway: goingAway))
        } catch {
            throw DoHSetupError(text: "HTTP/2 set-up: \(error)")
        }
    }

    /// Every stream closes itself when its try ends (``send(_:completion:on:)``).
    func ended(_ completion: TryCompletion) {}

    func send(_ query: PendingQuery, completion: TryCompletion, on channel: any Channel) {
        guard let multiplexer else {
            completion.succeed(.failed("internal: DoH query before HTTP/2 was set up"))
            return
        }
        let get = method.get
        // RFC 8484 §4.1: with GET the ID is 0, so that equal queries are equal URIs for HTTP caches.
        let sent = get ? query.withID(0) : query
        let created = channel.eventLoop.makePromise(of: (any Channel).self)
        let retryWithGET: ((String) -> Void)? =
            get
            ? nil
            : { [self] status in
                if !method.get {
                    method.switchToGET(status: status)
                    statistics.note("GET: the server answered POST with HTTP \(status)")
                    logger.info(
                        "DoH server refuses POST, using GET from now on", metadata: ["dns.http-status": "\(status)"])
                }
                send(query, completion: completion, on: channel)
            }
        guard let template else {
            completion.succeed(.failed("the DoH path '\(server.path)' is not a path or URI template"))
            return
        }
        let request = DoHStreamHandler.Request(
            query: sent, server: server, template: template, get: get, connection: connection, completion: completion,
            retryWithGET: retryWithGET)
        multiplexer.createStreamChannel(promise: created) { stream in
            stream.eventLoop.makeCompletedFuture {
                try stream.pipeline.syncOperations.addHandler(DoHStreamHandler(request))
            }
        }
        created.futureResult.whenFailure { error in completion.succeed(.failed("HTTP/2 stream: \(error)")) }
        // Closing the stream when the try ends (a timeout, a cancel) resets it; the connection stays.
        completion.onEnd { _ in created.futureResult.whenSuccess { $0.close(promise: nil) } }
    }
}

/// The state of one DoH connection its streams read: whether the server said GOAWAY (RFC 9113 §6.8).
/// @unchecked Sendable: written and read on the connection's event loop only.
final class DoHConnectionState: @unchecked Sendable {
    var goingAway = false
}

/// Sees the server's GOAWAY on the connection (frames of stream 0 come out of the HTTP/2 handler): from then on
/// the pool sends nothing more there, and a stream that ends without a reply is a query to send again.
private final class GoAwayWatcher: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame

    private let connection: DoHConnectionState
    private let goingAway: () -> Void

    init(connection: DoHConnectionState, goingAway: @escaping () -> Void) {
        self.connection = connection
        self.goingAway = goingAway
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .goAway = unwrapInboundIn(data).payload, !connection.goingAway {
            connection.goingAway = true
            goingAway()
        }
        context.fireChannelRead(data)
    }
}

struct DoHSetupError: Error, CustomStringConvertible {
    var text: String
    var description: String { text }
}

/// One DoH exchange on one HTTP/2 stream: POST (or GET) the query, check status and content type, read the body.
private final class DoHStreamHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundIn = Never
    typealias OutboundOut = HTTP2Frame.FramePayload

    /// @unchecked Sendable: made and used on the connection's event loop only (the stream initializer runs there).
    struct Request: @unchecked Sendable {
        var query: PendingQuery
        var server: UpstreamServer
        var template: DoHPathTemplate
        var get: Bool
        var connection: DoHConnectionState
        var completion: TryCompletion
        /// A POST refused with 405, 415 or 501 is handed here (with the status) instead of failing.
        var retryWithGET: ((String) -> Void)?
    }

    private let request: Request
    private var status: String?
    private var contentType: String?
    private var body: [UInt8] = []
    private var finished = false

    init(_ request: Request) {
        self.request = request
    }

    func channelActive(context: ChannelHandlerContext) {
        let wire = request.query.wire
        let server = request.server
        if request.get {
            let dns = Data(wire).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            let headers: HPACKHeaders = [
                ":method": "GET", ":scheme": "https", ":authority": server.authority,
                ":path": request.template.getPath(dns: dns), "accept": "application/dns-message",
            ]
            context.writeAndFlush(wrapOutboundOut(.headers(.init(headers: headers, endStream: true))), promise: nil)
        } else {
            let headers: HPACKHeaders = [
                ":method": "POST", ":scheme": "https", ":authority": server.authority,
                ":path": request.template.postPath,
                "content-type": "application/dns-message", "accept": "application/dns-message",
                "content-length": "\(wire.count)",
            ]
            context.write(wrapOutboundOut(.headers(.init(headers: headers))), promise: nil)
            let buffer = context.channel.allocator.buffer(bytes: wire)
            context.writeAndFlush(
                wrapOutboundOut(.data(.init(data: .byteBuffer(buffer), endStream: true))), promise: nil)
        }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !finished else { return }
        switch unwrapInboundIn(data) {
        case .headers(let frame):
            if status == nil {
                let received = frame.headers.first(name: ":status")
                // RFC 9113 §8.1, RFC 9110 §15.2: informational (1xx) header blocks, such as 103 Early Hints, may
                // come before the response's own; they are not the reply.
                if let received, received.utf8.count == 3, received.hasPrefix("1"), !frame.endStream { return }
                status = received
                contentType = frame.headers.first(name: "content-type")
                if let status, DoHMethod.refusesPOST.contains(status), let retry = request.retryWithGET {
                    finished = true
                    retry(status)
                    return
                }
            }
            if frame.endStream { complete() }
        case .data(let frame):
            if case .byteBuffer(var buffer) = frame.data {
                guard body.count + buffer.readableBytes <= DoHSession.maximumBody else {
                    finish(.failed("HTTP reply body larger than a DNS message"))
                    return
                }
                body += buffer.readBytes(length: buffer.readableBytes) ?? []
            }
            if frame.endStream { complete() }
        case .rstStream(let code) where code == .refusedStream && status == nil:
            // RFC 9113 §8.7: REFUSED_STREAM says the request was not processed; it may be sent again.
            finish(.failed(EncryptedConnections.closedByServer))
        case .rstStream(let frame):
            finish(.failed("the server reset the HTTP/2 stream (\(frame))"))
        default:
            break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if status != nil {
            finish(.failed("the HTTP reply body was cut short"))
        } else if connectionGoingAway(context) {
            finish(.failed(EncryptedConnections.closedByServer))
        } else {
            finish(.failed("the HTTP/2 stream closed before a reply"))
        }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // RFC 9113 §6.8: a stream above a GOAWAY's last stream ID was not processed (the HTTP/2 handler closes it
        // with an error); one without a reply when the connection closes was lost with it. Both go out once
        // more on a new connection (``EncryptedTransport/resends(_:)``).
        let unprocessed = status == nil && connectionGoingAway(context)
        finish(.failed(unprocessed ? EncryptedConnections.closedByServer : "HTTP/2: \(error)"))
        context.close(promise: nil)
    }

    /// The server said GOAWAY on this stream's connection, or the connection is closing.
    private func connectionGoingAway(_ context: ChannelHandlerContext) -> Bool {
        request.connection.goingAway || !(context.channel.parent?.isActive ?? false)
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
        switch request.query.classify(body, overTCP: true) {
        case .accept(let message): finish(.response(message))
        case .truncated: finish(.failed("DoH reply marked truncated"))
        case .drop(let reason): finish(.failed("unusable DoH reply: \(reason)"))
        }
    }

    private func finish(_ outcome: ExchangeOutcome) {
        guard !finished else { return }
        finished = true
        request.completion.succeed(outcome)
    }
}
