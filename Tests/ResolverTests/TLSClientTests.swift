import Foundation
import NIOCore
import NIOEmbedded
import NIOTLS
import NIOPosix
import Logging
import Testing

@testable import Resolver

/// The TLS client over OpenSSL (`CTLSShim`, ``TLSClientHandler``): what it sends before any server speaks, what it
/// does with garbage, and the words for a refused certificate. Real handshakes, resumption and refusals run against
/// Unbound in the lab (Tests/stub/test_stub_encrypted.py).
@Suite struct TLSClientTests {
    /// A trust store for contexts that never see a server: any readable PEM file will do for OpenSSL, even one
    /// without a certificate; the system store is there on every Debian machine that has ca-certificates.
    static let trust = TLSClientContext.systemTrustStore

    @Test func alpnIsLengthPrefixed() {
        #expect(TLSClientContext.alpnWire(["h2"]) == [2, 0x68, 0x32])
        #expect(TLSClientContext.alpnWire(["h2", "dot"]) == [2, 0x68, 0x32, 3, 0x64, 0x6F, 0x74])
        #expect(TLSClientContext.alpnWire([]).isEmpty)
    }

    @Test(arguments: [
        (10, TLSClientContext.Identity.configured, "certificate expired (CN=x)"),
        (9, .configured, "certificate not yet valid (CN=x)"),
        (20, .configured, "certificate not signed by a trusted CA (CN=x)"),
        (19, .configured, "certificate not signed by a trusted CA (CN=x)"),
        (18, .configured, "certificate not signed by a trusted CA (CN=x)"),
        (62, .configured, "certificate does not match the expected name or address (CN=x)"),
        (64, .configured, "certificate does not match the expected name or address (CN=x)"),
        (
            64, .address("192.0.2.1"),
            "certificate does not name the plain upstream's address 192.0.2.1 (RFC 9462 §4.2) (CN=x)"
        ),
        (23, .configured, "certificate refused: certificate revoked (CN=x)"),
        // The shim's pin check; its subject starts with the server key's own pin (TLSClientHandler.failure).
        (50, .configured, "certificate key matches no pin-sha256 (the server's key: CN=x)"),
    ])
    func refusedCertificatesAreExplained(_ code: Int, _ identity: TLSClientContext.Identity, _ text: String) {
        let error = TLSClientError.verification(
            code: code, text: code == 23 ? "certificate revoked" : "t", subject: "CN=x", detail: "d")
        #expect(TLSClientContext.outcome(for: error, identity: identity).described == Described.insecure(text))
    }

    @Test func otherFailuresKeepTheirKind() {
        #expect(
            TLSClientContext.outcome(for: TLSClientError.uncleanShutdown, identity: .configured).described
                == Described.failed("the server closed the TLS connection uncleanly"))
        #expect(
            TLSClientContext.outcome(for: TLSClientError.handshake("alert"), identity: .configured).described
                == Described.insecure("TLS handshake failed: alert"))
        // Without authentication a certificate verdict is not what failed.
        let verification = TLSClientError.verification(code: 10, text: "t", subject: "s", detail: "wrong version")
        #expect(
            TLSClientContext.outcome(for: verification, identity: .unauthenticated).described
                == Described.insecure("TLS handshake failed: wrong version"))
        #expect(
            TLSClientContext.outcome(for: ChannelError.ioOnClosedChannel, identity: .configured).described
                == Described.failed("\(ChannelError.ioOnClosedChannel)"))
    }

    @Test func aMissingTrustStoreIsASetUpError() {
        #expect(throws: TLSClientError.self) {
            _ = try TLSClientContext(caFile: "/nonexistent/ca.pem", serverName: "dns.example", alpn: [])
        }
        // A pinned upstream checks its server's key, not a chain: it needs no trust store, and checks no name.
        let pinned = try? TLSClientContext(
            caFile: "/nonexistent/ca.pem", serverName: "dns.example", alpn: [], pins: [Array(repeating: 7, count: 32)])
        #expect(pinned?.pinned == true && pinned?.serverName == "dns.example")
    }

    /// An embedded channel with a TLS client for `dns.example` at 192.0.2.1 and an error recorder behind it,
    /// connected: the ClientHello is waiting in its outbound buffer.
    static func connected(alpn: [String] = []) throws -> (EmbeddedChannel, ErrorRecorder) {
        let tls = try TLSClientContext(caFile: trust, serverName: "dns.example", alpn: alpn)
        let errors = ErrorRecorder()
        let channel = EmbeddedChannel()
        let server = try SocketAddress(ipAddress: "192.0.2.1", port: 853)
        try channel.pipeline.syncOperations.addHandler(try tls.handler(remote: server))
        try channel.pipeline.syncOperations.addHandler(errors)
        try channel.connect(to: server).wait()
        return (channel, errors)
    }

    @Test func clientHelloGoesOutOnActivationAndPlaintextWaitsForTheHandshake() throws {
        let (channel, _) = try Self.connected(alpn: ["h2"])
        var hello = try #require(try channel.readOutbound(as: ByteBuffer.self))
        // A TLS handshake record (22) carrying a ClientHello (1) that names the server (SNI) and offers h2.
        let bytes = hello.readBytes(length: hello.readableBytes) ?? []
        #expect(bytes.first == 22 && bytes.count > 5 && bytes[5] == 1)
        #expect(bytes.containsSubsequence(Array("dns.example".utf8)))
        #expect(bytes.containsSubsequence([2, 0x68, 0x32]))
        // Plaintext written now is held back, not sent in clear.
        let sent = channel.eventLoop.makePromise(of: Void.self)
        channel.writeAndFlush(ByteBuffer(string: "secret query"), promise: sent)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        _ = try? channel.finish()
        #expect(throws: (any Error).self) { try sent.futureResult.wait() }
    }

    @Test func garbageFromTheServerFailsTheHandshakeAndClosesTheChannel() throws {
        let (channel, errors) = try Self.connected()
        _ = try channel.readOutbound(as: ByteBuffer.self)
        try channel.writeInbound(ByteBuffer(string: "HTTP/1.1 400 Bad Request\r\n\r\n"))
        #expect(!channel.isActive)
        let error = try #require(errors.errors.first as? TLSClientError)
        guard case .handshake(let detail) = error else {
            Issue.record("not a handshake failure: \(error)")
            return
        }
        #expect(!detail.isEmpty)
        #expect(
            TLSClientContext.outcome(for: error, identity: .configured).described
                == Described.insecure("TLS handshake failed: \(detail)"))
    }

    @Test func serverClosingMidHandshakeIsAnUncleanShutdown() throws {
        let (channel, errors) = try Self.connected()
        channel.pipeline.fireChannelInactive()
        #expect(errors.errors.compactMap { $0 as? TLSClientError } == [.uncleanShutdown])
    }
}

final class ErrorRecorder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    var errors: [any Error] = []
    func errorCaught(context: ChannelHandlerContext, error: any Error) { errors.append(error) }
}

extension Array where Element == UInt8 {
    fileprivate func containsSubsequence(_ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= count else { return needle.isEmpty }
        return (0...(count - needle.count)).contains { Array(self[$0..<($0 + needle.count)]) == needle }
    }
}

/// An outcome as text with its kind, to compare (``ExchangeOutcome`` is not Equatable).
private enum Described {
    static func insecure(_ reason: String) -> String { "insecure: \(reason)" }
    static func failed(_ reason: String) -> String { "failed: \(reason)" }
}

extension ExchangeOutcome {
    fileprivate var described: String {
        switch self {
        case .insecure(let reason): "insecure: \(reason)"
        case .failed(let reason): "failed: \(reason)"
        default: "\(self)"
        }
    }
}

/// A server that accepts TCP and never answers the ClientHello: the connection must not stay counted as open.
@Suite struct TLSHandshakeTimeoutTests {
    /// Accepts and reads, never writes.
    final class Silent: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
    }

    @Test func aHandshakeThatNeverFinishesFailsAndClosesTheConnection() async throws {
        let group = MultiThreadedEventLoopGroup.singleton
        let server = try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in channel.pipeline.addHandler(Silent()) }
            .bind(host: "127.0.0.1", port: 0).get()
        defer { server.close(promise: nil) }
        let port = try #require(server.localAddress?.port)
        let upstream = try UpstreamServer(parsing: "127.0.0.1:\(port)#dns.example.test")
        let statistics = UpstreamStatistics()
        let connection = try EncryptedConnections.make(
            upstream, address: try SocketAddress(ipAddress: "127.0.0.1", port: port),
            configuration: .init(caFile: TLSClientTests.trust), statistics: statistics, group: group,
            logger: Logger(label: "test"))
        let outcome = await connection.exchange(try TransportMatchingTests.pending(), timeout: .milliseconds(300))
        guard case .timedOut = outcome else {
            Issue.record("expected the try to time out, got \(outcome)")
            return
        }
        // The handshake's own deadline closes the connection: nothing stays open, the reason is kept.
        var open = 1
        for _ in 0..<50 {
            open = statistics.status(server: upstream, transport: "tls", origin: .configured, note: nil).connectionsOpen
            if open == 0 { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        let status = statistics.status(server: upstream, transport: "tls", origin: .configured, note: nil)
        #expect(open == 0 && status.connectionsOpened == 1, "\(status)")
        #expect(status.lastFailure?.contains("TLS handshake not finished") == true, "\(status)")
        connection.shutdown()
    }
}

/// ``LoopDoTConnection``'s connect, without a TLS server: what a refused connect and an unreachable upstream give.
@Suite struct LoopDoTConnectTests {
    /// A loopback port nobody listens on (bound, then closed).
    static func closedPort() throws -> Int {
        let channel = try DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).wait()
        let port = try #require(channel.localAddress?.port)
        try channel.close().wait()
        return port
    }

    @Test func aRefusedConnectFailsTheTryAtOnceWithItsReason() async throws {
        let port = try Self.closedPort()
        let upstream = try UpstreamServer(parsing: "127.0.0.1:\(port)#dns.example.test")
        let statistics = UpstreamStatistics()
        let connection = try EncryptedConnections.make(
            upstream, address: try SocketAddress(ipAddress: "127.0.0.1", port: port),
            configuration: .init(caFile: TLSClientTests.trust), statistics: statistics,
            group: MultiThreadedEventLoopGroup.singleton, logger: Logger(label: "test"))
        defer { connection.shutdown() }
        #expect(connection is LoopDoTConnection)
        // A refused connect is a failure with its reason, not a try left to time out (the timeout is long).
        let outcome = await connection.exchange(try TransportMatchingTests.pending(), timeout: .seconds(30))
        guard case .failed(let reason) = outcome else {
            Issue.record("expected a failure, got \(outcome)")
            return
        }
        #expect(reason.contains("connect: Connection refused"), "\(reason)")
        // Nothing stays open (the back-off that follows is 250 ms: too short to assert here without timing).
        let status = statistics.status(server: upstream, transport: "tls", origin: .configured, note: nil)
        #expect(status.connectionsOpened == 1 && status.connectionsOpen == 0, "\(status)")
        #expect(status.lastFailure?.contains("Connection refused") == true, "\(status)")
    }
}
