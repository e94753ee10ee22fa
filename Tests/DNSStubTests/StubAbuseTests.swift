import DNSCore
import Logging
import NIOCore
import Resolver
import Testing

@testable import DNSStub

/// The stub facing a network: refusals never larger than the query and rate-limited, DNS Cookies (RFC 7873,
/// RFC 9018).
@Suite struct StubAbuseTests {
    /// A query for `www.example` A with an OPT record holding `options`.
    static func query(id: UInt16 = 0x1234, options: [UInt8]? = nil) -> [UInt8] {
        var out: [UInt8] = [UInt8(id >> 8), UInt8(id & 0xFF), 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, options == nil ? 0 : 1]
        out += [3] + Array("www".utf8) + [7] + Array("example".utf8) + [0, 0, 1, 0, 1]
        if let options {
            out += [0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0, UInt8(options.count >> 8), UInt8(options.count & 0xFF)] + options
        }
        return out
    }

    static let clientCookie: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]
    static let client = StubClient(try! SocketAddress(ipAddress: "198.51.100.7", port: 5353))

    @Test func sipHashMatchesTheReferenceVectors() {
        let key: (UInt64, UInt64) = (0x0706_0504_0302_0100, 0x0F0E_0D0C_0B0A_0908)
        #expect(SipHash24.hash([], key: key) == 0x726F_DB47_DD0E_0E31)
        #expect(SipHash24.hash(Array(0..<15), key: key) == 0xA129_CA61_49BE_45E5)
    }

    @Test func aRefusalIsNoLargerThanItsQuery() throws {
        for bytes in [Self.query(), Self.query(options: []), Self.query(options: [0, 10, 0, 8] + Self.clientCookie)] {
            let query = try StubQuery.parse(bytes)
            let refusal = StubReply.bareRefusal(to: query)
            #expect(refusal.count <= bytes.count)
            #expect(refusal[3] & 0x0F == 5, "REFUSED")
            #expect(refusal[0] == 0x12 && refusal[1] == 0x34)
            #expect(refusal[11] == 0, "no OPT, no EDE")
        }
    }

    @Test func refusalsAreRateLimitedPerPrefix() {
        let limiter = StubRefusalLimiter(perSecond: 5, globalPerSecond: 8)
        let neighbour = StubClient(try! SocketAddress(ipAddress: "198.51.100.200", port: 1))
        let other = StubClient(try! SocketAddress(ipAddress: "203.0.113.9", port: 1))
        #expect((0..<10).filter { _ in limiter.admit(Self.client, now: 100) }.count == 5)
        #expect(!limiter.admit(neighbour, now: 100), "the same /24 shares the budget")
        #expect((0..<10).filter { _ in limiter.admit(other, now: 100) }.count == 3, "the global cap")
        #expect(limiter.admit(Self.client, now: 101), "a new second, a new budget")
    }

    @Test func theCookieOptionIsFoundAndMalformedOnesAreNamed() {
        #expect(StubCookies.cookie(in: Self.query()) == .none)
        #expect(StubCookies.cookie(in: Self.query(options: [])) == .none)
        #expect(
            StubCookies.cookie(in: Self.query(options: [0, 10, 0, 8] + Self.clientCookie))
                == .present(client: Self.clientCookie, server: [], payload: 1232))
        #expect(StubCookies.cookie(in: Self.query(options: [0, 10, 0, 5, 1, 2, 3, 4, 5])) == .malformed)
        #expect(StubCookies.cookie(in: Self.query(options: [0, 10, 0, 12] + Array(repeating: 1, count: 12))) == .malformed)
    }

    @Test func aServerCookieIsAddedToTheOPTAndVerifies() throws {
        let cookies = StubCookies(secret: (1, 2))
        let bytes = Self.query(options: [0, 10, 0, 8] + Self.clientCookie)
        let query = try StubQuery.parse(bytes)
        let (reply, _) = StubReply.make(to: query, code: .noError, includeDNSSEC: false, limit: 1232)
        let withCookie = cookies.adding(to: reply, clientCookie: Self.clientCookie, client: Self.client, now: 5000, limit: 1232)
        #expect(withCookie.count == reply.count + 4 + 24)
        // The reply parses as a message whose OPT holds our COOKIE: read it back as if it were a query.
        var asQuery = withCookie
        asQuery[2] &= 0x7F
        guard case .present(let client, let server, _) = StubCookies.cookie(in: asQuery) else {
            Issue.record("no cookie in the reply")
            return
        }
        #expect(client == Self.clientCookie)
        #expect(server.count == 16 && server[0] == 1)
        #expect(cookies.verify(server, clientCookie: client, client: Self.client, now: 5100))
        #expect(!cookies.verify(server, clientCookie: client, client: Self.client, now: 5000 + 3601), "too old")
        let elsewhere = StubClient(try! SocketAddress(ipAddress: "198.51.100.8", port: 1))
        #expect(!cookies.verify(server, clientCookie: client, client: elsewhere, now: 5100), "bound to the address")
        #expect(
            cookies.adding(to: reply, clientCookie: Self.clientCookie, client: Self.client, now: 1, limit: reply.count + 10)
                == reply, "not when it would not fit")
    }

    struct NoUpstream: DNSTransport {
        func query(_ question: DNSQuestion) async throws(DNSTransportError) -> DNSExchange {
            throw DNSTransportError(code: .timeout, message: "no upstream in this test")
        }
    }

    /// `cookies = auto` follows the listen addresses; Reload turns cookies on or off with the same secret, so the
    /// server cookies clients hold stay valid.
    @Test func reloadTurnsCookiesOnAndOffAndKeepsTheSecret() throws {
        func stub(_ host: String) -> (StubResponder, DNSStubServer, StubSettings) {
            let settings = StubSettings(listen: [HostAndPort(host: host, port: 5399)])
            let responder = StubResponder(
                resolver: DNSResolver(transport: NoUpstream()), local: nil, settings: settings,
                logger: Logger(label: "test"))
            return (responder, DNSStubServer(responder: responder, settings: settings, logger: Logger(label: "test")),
                settings)
        }
        let (responder, server, base) = stub("192.0.2.1")
        let first = try #require(server.cookies, "auto: on beyond loopback")
        var settings = base
        settings.cookies = false
        responder.update(settings)
        #expect(server.cookies == nil, "cookies = no")
        responder.update(base)
        let again = try #require(server.cookies, "back to auto")
        #expect(again.secret == first.secret, "the same secret")

        let (loopbackResponder, loopback, loopbackBase) = stub("127.0.0.1")
        #expect(loopback.cookies == nil, "auto: off on loopback only")
        settings = loopbackBase
        settings.cookies = true
        loopbackResponder.update(settings)
        #expect(loopback.cookies != nil, "cookies = yes")
    }
}
