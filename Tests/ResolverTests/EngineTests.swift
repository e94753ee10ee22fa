import DNSCore
import Foundation
import Synchronization
import Testing

@testable import Resolver

/// An in-memory upstream for the engine's pure logic: scripted answers, a query counter, and a gate that
/// holds answers back so tests can make queries overlap. (Real upstreams are exercised by the lab tests.)
final class ScriptedTransport: DNSTransport {
    enum Reply: Sendable {
        /// `ede`: an Extended DNS Error in the reply's OPT record, as a validating upstream gives one.
        case answer([ResourceRecord], rcode: RCode = .noError, ede: ExtendedDNSError? = nil)
        case timeout
    }

    private let script: Mutex<[String: Reply]>
    private let counts = Mutex<[String: Int]>([:])
    private let gate = Mutex<CheckedContinuation<Void, Never>?>(nil)
    private let gated = Mutex(false)
    private let waiting = Mutex<[CheckedContinuation<Void, Never>]>([])

    init(_ script: [String: Reply]) { self.script = Mutex(script) }

    static func key(_ name: String, _ type: RRType) -> String { "\(DNSName.normalized(name)) \(type)" }

    func set(_ name: String, _ type: RRType, _ reply: Reply) { script.withLock { $0[Self.key(name, type)] = reply } }
    func count(_ name: String, _ type: RRType) -> Int { counts.withLock { $0[Self.key(name, type)] ?? 0 } }
    var total: Int { counts.withLock { $0.values.reduce(0, +) } }

    /// While closed, queries wait; `open()` releases them.
    func close() { gated.withLock { $0 = true } }
    func open() {
        gated.withLock { $0 = false }
        for waiter in waiting.withLock({ list in defer { list = [] }; return list }) { waiter.resume() }
    }

    func query(_ question: DNSQuestion) async throws(DNSTransportError) -> DNSExchange {
        let key = Self.key(question.name, question.type)
        counts.withLock { $0[key, default: 0] += 1 }
        if gated.withLock({ $0 }) {
            await withCheckedContinuation { continuation in
                let stillGated = gated.withLock { $0 }
                if stillGated { waiting.withLock { $0.append(continuation) } } else { continuation.resume() }
            }
        }
        let attempt = QueryAttempt(
            name: question.name, type: question.type, server: "test", transport: .udp, milliseconds: 1, rcode: "NOERROR")
        switch script.withLock({ $0[key] }) {
        case .answer(let records, let rcode, let ede)?:
            let header = DNSHeader(
                id: 1, qr: true, opcode: 0, aa: true, tc: false, rd: true, ra: true, ad: false, cd: false,
                rcode: UInt8(truncatingIfNeeded: rcode.rawValue), questionCount: 1, answerCount: UInt16(records.count),
                authorityCount: 0, additionalCount: 0)
            return DNSExchange(
                message: DNSMessage(
                    header: header, rcode: rcode, questions: [question], answer: records,
                    edns: ede.map {
                        EDNSInfo(udpPayloadSize: 1232, version: 0, dnssecOK: false, extendedErrors: [$0])
                    }),
                attempts: [attempt])
        case .timeout?, nil:
            throw DNSTransportError(code: .timeout, message: "no answer", attempts: [attempt])
        }
    }
}

// Record builders.
func aRecord(_ name: String, _ address: [UInt8], ttl: UInt32 = 300) -> ResourceRecord {
    ResourceRecord(name: name, type: .a, ttl: ttl, rdata: address)
}

func cnameRecord(_ name: String, _ target: String, ttl: UInt32 = 300) -> ResourceRecord {
    ResourceRecord(name: name, type: .cname, ttl: ttl, rdata: (try? DNSName(target).wire) ?? [0])
}

/// HTTPS RDATA: priority, target, and `alpn` when given (RFC 9460 wire format).
func httpsRecord(_ name: String, priority: UInt16, target: String, alpn: [String] = [], ttl: UInt32 = 300) -> ResourceRecord {
    var rdata: [UInt8] = [UInt8(priority >> 8), UInt8(priority & 0xff)]
    rdata += target == "." ? [0] : ((try? DNSName(target).wire) ?? [0])
    if !alpn.isEmpty {
        let value = alpn.flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) }
        rdata += [0, 1, UInt8(value.count >> 8), UInt8(value.count & 0xff)] + value
    }
    return ResourceRecord(name: name, type: .https, ttl: ttl, rdata: rdata)
}

@Suite("Resolver engine")
struct EngineTests {
    func makeResolver(_ transport: ScriptedTransport, clock: ManualClock = ManualClock()) -> DNSResolver {
        DNSResolver(transport: transport, clock: clock)
    }

    @Test func httpsServiceModeAndCacheHit() async throws {
        let transport = ScriptedTransport([
            ScriptedTransport.key("h3.test", .https): .answer([httpsRecord("h3.test", priority: 1, target: ".", alpn: ["h3", "h2"])])
        ])
        let resolver = makeResolver(transport)
        let first = try await resolver.resolveHTTPS("h3.test")
        #expect(first.h3)
        #expect(first.source == .network)
        #expect(first.bindings.first?.target == "h3.test.")
        #expect(first.attempts.count == 1)
        let second = try await resolver.resolveHTTPS("H3.TEST.")
        #expect(second.source == .cache)
        #expect(second.attempts.isEmpty)
        #expect(transport.total == 1)
    }

    @Test func identicalConcurrentQueriesAreCoalesced() async throws {
        let transport = ScriptedTransport([
            ScriptedTransport.key("busy.test", .a): .answer([aRecord("busy.test", [192, 0, 2, 1])])
        ])
        transport.close()
        let resolver = makeResolver(transport)
        try await withThrowingTaskGroup(of: [String].self) { group in
            for _ in 0..<100 {
                group.addTask { try await resolver.resolveAddresses("busy.test", family: .ipv4).addresses }
            }
            try await Task.sleep(for: .milliseconds(100))
            transport.open()
            for try await addresses in group { #expect(addresses == ["192.0.2.1"]) }
        }
        #expect(transport.count("busy.test", .a) == 1)
    }

    @Test func staleAnswersAtOnceAndOneRefreshForManyAskers() async throws {
        let clock = ManualClock()
        let transport = ScriptedTransport([
            ScriptedTransport.key("stale.test", .a): .answer([aRecord("stale.test", [192, 0, 2, 7], ttl: 2)])
        ])
        let resolver = makeResolver(transport, clock: clock)
        _ = try await resolver.resolveAddresses("stale.test", family: .ipv4)
        clock.advance(5)
        transport.close()  // the refresh hangs until opened
        var sources: [ResolutionSource] = []
        for _ in 0..<50 {
            let answer = try await resolver.resolveAddresses("stale.test", family: .ipv4)
            #expect(answer.addresses == ["192.0.2.7"])
            #expect(answer.ttl == 30)
            sources.append(answer.source)
        }
        #expect(Set(sources) == [.expiredCache])
        transport.open()
        for _ in 0..<500 where transport.count("stale.test", .a) < 2 { try await Task.sleep(for: .milliseconds(10)) }
        try await Task.sleep(for: .milliseconds(100))  // room for a wrong second refresh to show up
        #expect(transport.count("stale.test", .a) == 2)  // the first fetch and exactly one refresh
        #expect(try await resolver.resolveAddresses("stale.test", family: .ipv4).source == .cache)
    }

    @Test func updatesStreamYieldsStaleThenRefreshed() async throws {
        let clock = ManualClock()
        let transport = ScriptedTransport([
            ScriptedTransport.key("w.test", .https): .answer([httpsRecord("w.test", priority: 1, target: ".", alpn: ["h2"], ttl: 2)])
        ])
        let resolver = makeResolver(transport, clock: clock)
        _ = try await resolver.resolveHTTPS("w.test")
        clock.advance(5)
        transport.set("w.test", .https, .answer([httpsRecord("w.test", priority: 1, target: ".", alpn: ["h3"], ttl: 300)]))
        var seen: [(ResolutionSource, Bool)] = []
        for try await update in resolver.resolveHTTPSUpdates("w.test") { seen.append((update.source, update.h3)) }
        #expect(seen.count == 2)
        #expect(seen.first?.0 == .expiredCache && seen.first?.1 == false)
        #expect(seen.last?.0 == .network && seen.last?.1 == true)
    }

    @Test func failedRefreshKeepsStaleData() async throws {
        let clock = ManualClock()
        let transport = ScriptedTransport([
            ScriptedTransport.key("flaky.test", .a): .answer([aRecord("flaky.test", [192, 0, 2, 9], ttl: 2)])
        ])
        let resolver = makeResolver(transport, clock: clock)
        _ = try await resolver.resolveAddresses("flaky.test", family: .ipv4)
        clock.advance(5)
        transport.set("flaky.test", .a, .answer([], rcode: .servFail))
        let stale = try await resolver.resolveAddresses("flaky.test", family: .ipv4)
        #expect(stale.source == .expiredCache)
        // The refresh runs in the background: wait for it (bounded), whatever the load on the machine.
        for _ in 0..<500 where resolver.cache.statistics.refreshFailures == 0 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(resolver.cache.statistics.refreshFailures == 1)
        let again = try await resolver.resolveAddresses("flaky.test", family: .ipv4)
        #expect(again.addresses == ["192.0.2.9"])
        #expect(again.source == .expiredCache)
        // Not optimistic: the failure shows.
        await #expect(throws: ResolverError.self) {
            _ = try await resolver.resolveAddresses("flaky.test", family: .ipv4, optimistic: false)
        }
    }

    @Test func cnameAnswerWithoutTargetRecordsIsFollowedWithASecondQuery() async throws {
        let transport = ScriptedTransport([
            ScriptedTransport.key("www.test", .a): .answer([cnameRecord("www.test", "cdn.other")]),
            ScriptedTransport.key("cdn.other", .a): .answer([aRecord("cdn.other", [198, 51, 100, 4])]),
        ])
        let resolver = makeResolver(transport)
        let answer = try await resolver.resolveAddresses("www.test", family: .ipv4)
        #expect(answer.addresses == ["198.51.100.4"])
        #expect(transport.count("cdn.other", .a) == 1)
    }

    @Test func aliasLoopIsBoundedAndLeavesNoBindings() async throws {
        let transport = ScriptedTransport([
            ScriptedTransport.key("a.test", .https): .answer([httpsRecord("a.test", priority: 0, target: "b.test")]),
            ScriptedTransport.key("b.test", .https): .answer([httpsRecord("b.test", priority: 0, target: "a.test")]),
        ])
        let resolution = try await makeResolver(transport).resolveHTTPS("a.test")
        #expect(resolution.bindings.isEmpty)
        #expect(resolution.note?.contains("loop") == true)
        #expect(transport.total == 2)
    }

    @Test(arguments: [
        (RCode.nxDomain, ResolverError.Code.noSuchName),
        (RCode.servFail, ResolverError.Code.upstreamFailure),
        (RCode.refused, ResolverError.Code.upstreamFailure),
    ])
    func rcodesMapToAPIErrors(rcode: RCode, expected: ResolverError.Code) async {
        let transport = ScriptedTransport([ScriptedTransport.key("x.test", .https): .answer([], rcode: rcode)])
        do {
            _ = try await makeResolver(transport).resolveHTTPS("x.test")
            Issue.record("expected \(expected)")
        } catch {
            #expect(error.code == expected)
        }
    }

    @Test func anUpstreamsExtendedErrorComesWithItsFailure() async {
        let bogus = ExtendedDNSError(code: 6, text: "validation failure <x.test. A>")
        let transport = ScriptedTransport([
            ScriptedTransport.key("x.test", .a): .answer([], rcode: .servFail, ede: bogus),
            ScriptedTransport.key("y.test", .a): .answer([], rcode: .servFail),
        ])
        let resolver = makeResolver(transport)
        do {
            _ = try await resolver.resolveAddresses("x.test", family: .ipv4)
            Issue.record("expected a failure")
        } catch {
            #expect(error.code == .upstreamFailure && error.upstreamError == bogus)
            #expect(error.description == "x.test.: upstream answered SERVFAIL (EDE 6 (DNSSEC Bogus): \(bogus.text))")
        }
        do {
            _ = try await resolver.resolveAddresses("y.test", family: .ipv4)
            Issue.record("expected a failure")
        } catch {
            #expect(error.code == .upstreamFailure && error.upstreamError == nil)
        }
    }

    @Test func nodataIsNotAnErrorAndPortPrefixIsUsed() async throws {
        let transport = ScriptedTransport([
            ScriptedTransport.key("_8443._https.p.test", .https): .answer([], rcode: .noError)
        ])
        let resolution = try await makeResolver(transport).resolveHTTPS("p.test", port: 8443)
        #expect(resolution.queryName == "_8443._https.p.test.")
        #expect(resolution.bindings.isEmpty)
        #expect(!resolution.h3)
    }

    @Test func timeoutIsReported() async {
        let transport = ScriptedTransport([:])
        await #expect(throws: ResolverError.self) { _ = try await makeResolver(transport).resolveHTTPS("silent.test") }
    }

    @Test(arguments: ["a..b", String(repeating: "x", count: 64) + ".test", "ex ample.com", ""])
    func invalidNamesAreRejectedBeforeAnyQuery(name: String) async {
        let transport = ScriptedTransport([:])
        do {
            _ = try await makeResolver(transport).resolveHTTPS(name)
            Issue.record("\(name) accepted")
        } catch {
            #expect(error.code == .invalidName)
        }
        #expect(transport.total == 0)
    }

    @Test func planUsesParallelQueriesAndOrdersQUICFirst() async throws {
        let transport = ScriptedTransport([
            ScriptedTransport.key("web.test", .https): .answer([httpsRecord("web.test", priority: 1, target: ".", alpn: ["h3", "h2"])]),
            ScriptedTransport.key("web.test", .a): .answer([aRecord("web.test", [192, 0, 2, 80])]),
            ScriptedTransport.key("web.test", .aaaa): .answer([]),
        ])
        let resolution = try await makeResolver(transport).connectionPlan(host: "web.test")
        #expect(resolution.plan.h3)
        #expect(resolution.plan.endpoints.map(\.transport) == [.quic, .tcp])
        #expect(resolution.plan.endpoints.allSatisfy { $0.address == "192.0.2.80" })
        #expect(transport.total == 3)
    }

    @Test func altSvcMakesAPlainHostH3() async throws {
        let transport = ScriptedTransport([
            ScriptedTransport.key("plain.test", .https): .answer([]),
            ScriptedTransport.key("plain.test", .a): .answer([aRecord("plain.test", [192, 0, 2, 12])]),
            ScriptedTransport.key("plain.test", .aaaa): .answer([]),
        ])
        let resolver = makeResolver(transport)
        #expect(try await resolver.connectionPlan(host: "plain.test").plan.h3 == false)
        try resolver.reportAltSvc(origin: "https://plain.test", header: #"h3=":443"; ma=3600"#)
        let plan = try await resolver.connectionPlan(host: "plain.test").plan
        #expect(plan.h3)
        #expect(plan.h3Source == .altsvc)
        #expect(throws: ResolverError.self) { try resolver.reportAltSvc(origin: "ftp://x", header: "h3=\":443\"") }
    }

    @Test(
        "an address literal is its own plan, without any query",
        arguments: [
            ("192.0.2.10", "192.0.2.10"), ("2001:db8::10", "2001:db8::10"), ("[2001:DB8:0::10]", "2001:db8::10"),
            ("fe80::1%eth0", "fe80::1%eth0"),
        ])
    func literalPlan(host: String, address: String) async throws {
        let transport = ScriptedTransport([:])
        let resolver = makeResolver(transport)
        let resolution = try await resolver.connectionPlan(host: host, port: 8443)
        #expect(resolution.plan.endpoints.map { "\($0.transport) \($0.address) \($0.port)" } == ["tcp \(address) 8443"])
        #expect(resolution.plan.host == address)
        #expect(!resolution.plan.h3)
        #expect(transport.total == 0)
        #expect(resolution.attempts.isEmpty)

        let assumed = try await resolver.connectionPlan(host: host, port: 8443, assumeH3: true).plan
        #expect(assumed.endpoints.map(\.transport) == [.quic, .tcp])
        #expect(assumed.h3Source == .assumed)
        #expect(transport.total == 0)
    }

    @Test func altSvcReportedForAnAddressAddsQUIC() async throws {
        let transport = ScriptedTransport([:])
        let resolver = makeResolver(transport)
        try resolver.reportAltSvc(origin: "https://192.0.2.10", header: #"h3=":4433""#, reporter: 1000)
        #expect(try await resolver.connectionPlan(host: "192.0.2.10").plan.h3 == false)
        let plan = try await resolver.connectionPlan(host: "192.0.2.10", caller: 1000).plan
        #expect(plan.h3Source == .altsvc)
        #expect(plan.endpoints.map { "\($0.transport) \($0.port)" } == ["quic 4433", "tcp 443"])
        #expect(transport.total == 0)
    }

    @Test func svcbQueriesTypeSixtyFourWithAnOptionalPortPrefix() async throws {
        let transport = ScriptedTransport([:])
        let resolver = makeResolver(transport)
        _ = try? await resolver.resolveSVCB("_dns.resolver.test")
        _ = try? await resolver.resolveSVCB("_dns.resolver.test", port: 853)
        #expect(transport.count("_dns.resolver.test", .svcb) == 1)
        #expect(transport.count("_853._dns.resolver.test", .svcb) == 1)
        #expect(transport.count("_dns.resolver.test", .https) == 0)
    }
}
