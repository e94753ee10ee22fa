import DNSCore
import Logging
import NIOCore
import NIOPosix
import Resolver
import Testing

@testable import DNSStub

#if canImport(Glibc)
import Glibc
#endif

/// `[stub] max-tcp` on a real loopback listener: the connection over the cap is closed at accept, the open ones are
/// served, Reload raises the cap for connections accepted afterwards, and the usage Status reports follows.
@Suite struct StubTCPLimitTests {
    struct SocketError: Error, CustomStringConvertible {
        let description: String
        init(_ call: String) { description = "\(call): \(String(cString: strerror(errno)))" }
    }

    /// A blocking TCP client on 127.0.0.1 whose reads give up after 5 s.
    struct Client {
        let fd: CInt

        init(port: Int) throws {
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw SocketError("socket") }
            var timeout = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(port).bigEndian
            address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard connected == 0 else {
                Glibc.close(fd)
                throw SocketError("connect")
            }
        }

        /// Sends a NOTIFY (answered at once with NOTIMP, no look-up) and returns the reply's RCODE, or nil when
        /// the server closed the connection instead.
        func ask() throws -> UInt8? {
            var query: [UInt8] = [0x12, 0x34, 0x20, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]
            query += [3] + Array("www".utf8) + [7] + Array("example".utf8) + [0, 0, 1, 0, 1]
            let framed = [UInt8(query.count >> 8), UInt8(query.count & 0xFF)] + query
            // A connection closed at accept may already refuse the write (EPIPE, ECONNRESET): that is "closed" too.
            guard framed.withUnsafeBytes({ send($0.baseAddress, $0.count) }) == framed.count else { return nil }
            var reply = [UInt8](repeating: 0, count: 512)
            var have = 0
            while have < 2 || have < 2 + Int(reply[0]) << 8 + Int(reply[1]) {
                let n = reply.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + have, $0.count - have, 0) }
                if n == 0 || (n < 0 && errno == ECONNRESET) { return nil }
                guard n > 0 else { throw SocketError("recv") }
                have += n
            }
            return reply[2 + 3] & 0x0F
        }

        private func send(_ pointer: UnsafeRawPointer?, _ count: Int) -> Int {
            Glibc.send(fd, pointer, count, Int32(MSG_NOSIGNAL))
        }

        func close() { Glibc.close(fd) }
    }

    struct NoUpstream: DNSTransport {
        func query(_ question: DNSQuestion) async throws(DNSTransportError) -> DNSExchange {
            throw DNSTransportError(code: .timeout, message: "no upstream in this test")
        }
    }

    @Test func theConnectionOverMaxTCPIsClosedAtAcceptAndTheOpenOnesAreServed() async throws {
        var settings = StubSettings(
            listen: [HostAndPort(host: "127.0.0.1", port: 0)], answerLocal: false, maxTCPConnections: 2)
        let logger = Logger(label: "test")
        let responder = StubResponder(
            resolver: DNSResolver(transport: NoUpstream()), local: nil, settings: settings, logger: logger)
        let server = DNSStubServer(responder: responder, settings: settings, logger: logger)
        await server.bind()
        let port = try #require(server.tcpLocalAddresses.first?.port)
        let clientThread = NIOThreadPool(numberOfThreads: 1)
        clientThread.start()
        let run = { (body: @Sendable @escaping () throws -> UInt8?) async throws -> UInt8? in
            try await clientThread.runIfActive(body)
        }

        let first = try Client(port: port)
        let second = try Client(port: port)
        #expect(try await run { try first.ask() } == 4, "NOTIMP: served")
        #expect(try await run { try second.ask() } == 4)
        #expect(server.tcpUsage().connections == 2)
        let third = try Client(port: port)
        #expect(try await run { try third.ask() } == nil, "over max-tcp: closed at accept")
        third.close()
        #expect(try await run { try first.ask() } == 4, "the open connection is still served")
        let usage = server.tcpUsage()
        #expect(usage.refused == 1)
        #expect(usage.nearestToCap.isEmpty, "loopback is exempt from the per-address cap")

        // Reload raises the cap: the next connection is served.
        settings.maxTCPConnections = 3
        responder.update(settings)
        let fourth = try Client(port: port)
        #expect(try await run { try fourth.ask() } == 4, "max-tcp = 3 after the reload")
        #expect(server.tcpUsage().connections == 3)
        for client in [first, second, fourth] { client.close() }
        await server.closeAll()
        try await clientThread.shutdownGracefully()
    }

    @Test func theAddressesNearestToTheCapComeMostFirstInAStableOrder() {
        let counts: [[UInt8]: Int] = [[192, 0, 2, 1]: 3, [192, 0, 2, 9]: 30, [192, 0, 2, 5]: 3, [192, 0, 2, 7]: 1]
        let nearest = DNSStubServer.nearest(counts, count: 3)
        #expect(nearest.map(\.key) == [[192, 0, 2, 9], [192, 0, 2, 1], [192, 0, 2, 5]])
        #expect(nearest.map(\.value) == [30, 3, 3])
    }
}
