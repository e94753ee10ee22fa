import DNSCore
import Logging
import NIOCore
import Synchronization
import Testing

@testable import DNSStub
@testable import Resolver

// What the stub decides for a query (forward, chase a CNAME, serve stale, answer through mDNS, refuse), tested
// through StubResponder's public `handle` with a scripted upstream and a scripted `.local` source: no sockets, no
// root, no lab. The lab's Python suites (Tests/stub) test the same behaviour with real clients.

/// An upstream that answers from a script and counts what it is asked.
final class ScriptedUpstream: DNSTransport {
    private let script: Mutex<[String: [ResourceRecord]]>
    private let failures: [String: (RCode, ExtendedDNSError?)]
    private let asked = Mutex<[String: Int]>([:])

    /// - Parameter failures: names answered with an error code instead, and an EDE in the reply's OPT record.
    init(_ script: [String: [ResourceRecord]], failures: [String: (RCode, ExtendedDNSError?)] = [:]) {
        self.script = Mutex(script)
        self.failures = failures
    }

    static func key(_ name: String, _ type: RRType) -> String { "\(DNSName.normalized(name)) \(type)" }

    func count(_ name: String, _ type: RRType) -> Int { asked.withLock { $0[Self.key(name, type)] ?? 0 } }
    var total: Int { asked.withLock { $0.values.reduce(0, +) } }

    func query(_ question: DNSQuestion) async throws(DNSTransportError) -> DNSExchange {
        let key = Self.key(question.name, question.type)
        asked.withLock { $0[key, default: 0] += 1 }
        let attempt = QueryAttempt(
            name: question.name, type: question.type, server: "scripted", transport: .udp, milliseconds: 1,
            rcode: "NOERROR")
        if let (rcode, ede) = failures[key] {
            let header = DNSHeader(
                id: 1, qr: true, opcode: 0, aa: false, tc: false, rd: true, ra: true, ad: false, cd: false,
                rcode: UInt8(rcode.rawValue), questionCount: 1, answerCount: 0, authorityCount: 0, additionalCount: 1)
            let edns = EDNSInfo(
                udpPayloadSize: 1232, version: 0, dnssecOK: false, extendedErrors: ede.map { [$0] } ?? [])
            return DNSExchange(
                message: DNSMessage(header: header, rcode: rcode, questions: [question], edns: edns),
                attempts: [attempt])
        }
        guard let records = script.withLock({ $0[key] }) else {
            throw DNSTransportError(code: .timeout, message: "not in the script", attempts: [attempt])
        }
        let header = DNSHeader(
            id: 1, qr: true, opcode: 0, aa: false, tc: false, rd: true, ra: true, ad: false, cd: false, rcode: 0,
            questionCount: 1, answerCount: UInt16(records.count), authorityCount: 0, additionalCount: 0)
        return DNSExchange(
            message: DNSMessage(header: header, rcode: .noError, questions: [question], answer: records),
            attempts: [attempt])
    }
}

/// `.local` records from a script, as Avahi's record browser would give them.
final class ScriptedLocalRecords: LocalRecordSource {
    private let records: [String: [ResourceRecord]]
    private let asked = Mutex(0)

    init(_ records: [String: [ResourceRecord]]) { self.records = records }

    var lookups: Int { asked.withLock { $0 } }

    func lookup(name: DNSName, type: RRType, class rrClass: RRClass, interface: Int32?, window: Duration)
        async throws(LocalLookupError) -> [ResourceRecord]
    {
        asked.withLock { $0 += 1 }
        return records["\(name.text) \(type)"] ?? []
    }
}

/// A clock that moves only when told to.
final class StepClock: CacheClock {
    private let time = Mutex<Double>(1_800_000_000)
    func now() -> Double { time.withLock { $0 } }
    func advance(_ seconds: Double) { time.withLock { $0 += seconds } }
}

@Suite("What the DNS stub decides")
struct StubDecisionTests {
    static let loopback = StubClient(try! SocketAddress(ipAddress: "127.0.0.1", port: 40000))
    static let stranger = StubClient(try! SocketAddress(ipAddress: "203.0.113.9", port: 40000))

    static func a(_ name: String, _ address: [UInt8], ttl: UInt32 = 60) -> ResourceRecord {
        ResourceRecord(name: name, type: .a, ttl: ttl, rdata: address)
    }

    static func cname(_ name: String, to target: String, ttl: UInt32 = 60) throws -> ResourceRecord {
        ResourceRecord(name: name, type: .cname, ttl: ttl, rdata: try DNSName(target).wire)
    }

    static func responder(
        upstream: ScriptedUpstream, local: ScriptedLocalRecords = ScriptedLocalRecords([:]),
        clock: StepClock = StepClock(), settings: StubSettings = StubSettings(listen: [])
    ) -> StubResponder {
        let resolver = DNSResolver(transport: upstream, clock: clock, logger: Logger(label: "test"))
        return StubResponder(resolver: resolver, local: local, settings: settings, logger: Logger(label: "test"))
    }

    /// Sends one query (with EDNS) and returns the reply's bytes, whether answered at once or later.
    static func ask(
        _ responder: StubResponder, _ labels: [String], type: UInt16 = 1, from client: StubClient = loopback
    ) async throws -> [UInt8] {
        let (later, feed) = AsyncStream<[UInt8]>.makeStream()
        var refreshes = PendingRefreshes()
        let immediate = responder.handle(
            Wire.query(labels, type: type, edns: Wire.opt()), client: client, overTCP: false, refreshes: &refreshes,
            later: {
                { bytes in
                    feed.yield(bytes)
                    feed.finish()
                }
            })
        switch immediate {
        case .reply(let bytes):
            responder.startRefreshes(refreshes)
            return bytes
        case .pending:
            for await bytes in later { return bytes }
            throw StubTestFailure("the late reply never came")
        case .drop:
            throw StubTestFailure("the query was dropped")
        }
    }

    struct StubTestFailure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// Whether the reply's OPT record carries Extended DNS Error `code` (RFC 8914: option 15), or any EDE.
    static func hasExtendedError(_ reply: [UInt8], code: UInt16? = nil) -> Bool {
        let option: [UInt8] = [0, 15]
        guard reply.count >= 6 else { return false }
        for index in 0..<(reply.count - 5) where Array(reply[index..<(index + 2)]) == option {
            guard let code else { return true }
            if Array(reply[(index + 4)..<(index + 6)]) == [UInt8(code >> 8), UInt8(code & 0xFF)] { return true }
        }
        return false
    }

    @Test func aNameIsForwardedOnceAndTheSecondQueryIsAnsweredFromTheCache() async throws {
        let upstream = ScriptedUpstream(["www.example.com. A": [Self.a("www.example.com.", [192, 0, 2, 1])]])
        let responder = Self.responder(upstream: upstream)
        for _ in 0..<2 {
            let reply = try DNSMessage.parse(try await Self.ask(responder, ["www", "example", "com"]))
            #expect(reply.rcode == .noError)
            #expect(reply.answer.map(\.rdata) == [[192, 0, 2, 1]])
            #expect(!reply.header.aa, "forwarded data is never authoritative")
        }
        #expect(upstream.count("www.example.com.", .a) == 1)
    }

    @Test func aCNAMEIsChasedToItsTargetAndTheReplyCarriesTheChain() async throws {
        let upstream = ScriptedUpstream([
            "alias.example.com. A": [try Self.cname("alias.example.com.", to: "target.example.net.")],
            "target.example.net. A": [Self.a("target.example.net.", [192, 0, 2, 7])],
        ])
        let responder = Self.responder(upstream: upstream)
        let reply = try DNSMessage.parse(try await Self.ask(responder, ["alias", "example", "com"]))
        #expect(reply.answer.map(\.type) == [.cname, .a])
        #expect(reply.answer.last?.rdata == [192, 0, 2, 7])
        #expect(upstream.count("target.example.net.", .a) == 1, "the target was asked for")
    }

    @Test func anExpiredAnswerIsServedAtOnceWithTTL30AndStaleAnswerAndRefreshedOnce() async throws {
        let upstream = ScriptedUpstream(["old.example.com. A": [Self.a("old.example.com.", [192, 0, 2, 2], ttl: 60)]])
        let clock = StepClock()
        let responder = Self.responder(upstream: upstream, clock: clock)
        _ = try await Self.ask(responder, ["old", "example", "com"])
        clock.advance(120)
        let bytes = try await Self.ask(responder, ["old", "example", "com"])
        let reply = try DNSMessage.parse(bytes)
        #expect(reply.answer.map(\.rdata) == [[192, 0, 2, 2]])
        #expect(reply.answer.first?.ttl == 30, "RFC 8767: stale answers carry TTL 30")
        #expect(Self.hasExtendedError(bytes, code: 3), "RFC 8914 EDE 3, Stale Answer")
        // The one refresh runs after the stale reply was written.
        let refreshed = await eventuallyTrue { upstream.count("old.example.com.", .a) == 2 }
        #expect(refreshed, "one refresh went upstream")
    }

    @Test func localNamesAreAnsweredThroughMDNSAndNeverForwarded() async throws {
        let upstream = ScriptedUpstream([:])
        let local = ScriptedLocalRecords(["printer.local. A": [Self.a("printer.local.", [192, 0, 2, 40], ttl: 120)]])
        let responder = Self.responder(upstream: upstream, local: local)
        let reply = try DNSMessage.parse(try await Self.ask(responder, ["printer", "local"]))
        #expect(reply.rcode == .noError)
        #expect(reply.answer.map(\.rdata) == [[192, 0, 2, 40]])
        #expect(local.lookups >= 1)
        #expect(upstream.total == 0, "RFC 6762 §22: .local never goes to a unicast server")
    }

    @Test func localNamesAreNXDOMAINWhenLocalLookupsAreOff() async throws {
        let upstream = ScriptedUpstream([:])
        let local = ScriptedLocalRecords(["printer.local. A": [Self.a("printer.local.", [192, 0, 2, 40])]])
        let responder = Self.responder(
            upstream: upstream, local: local, settings: StubSettings(listen: [], answerLocal: false))
        let reply = try DNSMessage.parse(try await Self.ask(responder, ["printer", "local"]))
        #expect(reply.rcode == .nxDomain)
        #expect(local.lookups == 0)
        #expect(upstream.total == 0)
    }

    @Test func aProxyDomainIsAnsweredFromTheLinkWithNamesRewrittenAndTTLsCappedAt10() async throws {
        let upstream = ScriptedUpstream([:])
        let instance = "Web._http._tcp.local."
        let local = ScriptedLocalRecords([
            "_http._tcp.local. PTR": [
                ResourceRecord(name: "_http._tcp.local.", type: .ptr, ttl: 4500, rdata: try DNSName(instance).wire)
            ]
        ])
        var settings = StubSettings(listen: [])
        settings.proxy = DiscoveryProxySettings(domains: [try DNSName("home.example.com")])
        let responder = Self.responder(upstream: upstream, local: local, settings: settings)
        let reply = try DNSMessage.parse(
            try await Self.ask(responder, ["_http", "_tcp", "home", "example", "com"], type: 12))
        #expect(reply.rcode == .noError)
        #expect(reply.answer.count == 1)
        #expect(reply.answer.first?.name == "_http._tcp.home.example.com.")
        let rewritten = try DNSName("Web._http._tcp.home.example.com.").wire
        #expect(reply.answer.first?.rdata == rewritten)
        #expect((reply.answer.first?.ttl ?? 0) <= 10, "RFC 8766: link data is cached briefly")
        #expect(upstream.total == 0, "a proxy domain is never forwarded")
    }

    @Test func aClientOutsideTheAllowListIsRefusedWithoutAnyLookUp() async throws {
        let upstream = ScriptedUpstream(["www.example.com. A": [Self.a("www.example.com.", [192, 0, 2, 1])]])
        let responder = Self.responder(upstream: upstream)
        let reply = try DNSMessage.parse(try await Self.ask(responder, ["www", "example", "com"], from: Self.stranger))
        #expect(reply.rcode == .refused)
        #expect(reply.answer.isEmpty)
        #expect(upstream.total == 0)
    }

    @Test func aNameTheUpstreamCannotAnswerIsSERVFAILWithAnExtendedError() async throws {
        let upstream = ScriptedUpstream([:])
        let responder = Self.responder(upstream: upstream)
        let bytes = try await Self.ask(responder, ["gone", "example", "com"])
        let reply = try DNSMessage.parse(bytes)
        #expect(reply.rcode == .servFail)
        #expect(Self.hasExtendedError(bytes), "RFC 8914: SERVFAIL says why")
        #expect(upstream.count("gone.example.com.", .a) >= 1)
    }

    @Test func anUpstreamsSERVFAILKeepsItsExtendedErrorCodeAndTextAfterTheUpstreamsName() async throws {
        let upstream = ScriptedUpstream(
            [:],
            failures: [
                "bogus.example.com. A": (.servFail, ExtendedDNSError(code: 6, text: "validation failure <bogus>")),
                "refused.example.com. A": (.refused, nil),
            ])
        let responder = Self.responder(upstream: upstream)
        let bogus = try DNSMessage.parse(try await Self.ask(responder, ["bogus", "example", "com"]))
        #expect(bogus.rcode == .servFail)
        #expect(
            bogus.edns?.extendedErrors == [
                ExtendedDNSError(code: 6, text: "scripted answered SERVFAIL: validation failure <bogus>")
            ])
        // Without an EDE from the upstream, the stub's own: 23 Network Error, naming the upstream and its rcode.
        let refused = try DNSMessage.parse(try await Self.ask(responder, ["refused", "example", "com"]))
        #expect(refused.rcode == .servFail)
        #expect(refused.edns?.extendedErrors == [ExtendedDNSError(code: 23, text: "scripted answered REFUSED")])
    }
}

/// Polls `condition` every 10 ms for up to 5 s.
private func eventuallyTrue(_ condition: () -> Bool) async -> Bool {
    for _ in 0..<500 {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return condition()
}
