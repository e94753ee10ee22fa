import DNSCore
import DiscoverAPI
@testable import DiscoverServer
import Foundation
import Resolver
import Synchronization
import Testing

/// Cache hits answered from a kept reply: patched per call, never served for other data, stale answers refreshed
/// once, and the same answer as the full path.
@Suite struct ResolverCacheHitsTests {
    struct NoUpstream: DNSTransport {
        func query(_ question: DNSQuestion) async throws(DNSTransportError) -> DNSExchange {
            throw DNSTransportError(code: .timeout, message: "no upstream in unit tests", attempts: [])
        }
    }

    final class Clock: CacheClock {
        private let time = Mutex<Double>(1_800_000_000)
        func now() -> Double { time.withLock { $0 } }
        func advance(_ seconds: Double) { time.withLock { $0 += seconds } }
    }

    /// A resolver without upstream, the routes of its cache hits, and the replies they keep.
    struct Fixture {
        let clock = Clock()
        let resolver: DNSResolver
        let kept: KeptReplies
        let routes: RouteTable

        init(optimisticSetting: Bool = true, capacity: Int = 4096) {
            resolver = DNSResolver(transport: NoUpstream(), clock: clock)
            kept = KeptReplies(capacity: capacity)
            var routes = RouteTable()
            ResolverCacheHits.register(
                into: &routes, resolver: resolver, optimistic: { ($0 ?? true) && optimisticSetting }, kept: kept)
            self.routes = routes
        }

        /// HTTPS RDATA with priority 1, target "." and the given ALPN ids.
        func storeHTTPS(_ name: String, alpn: [String], ttl: UInt32 = 300) {
            let value = alpn.flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) }
            let rdata: [UInt8] = [0, 1, 0, 0, 1, UInt8(value.count >> 8), UInt8(value.count & 0xff)] + value
            store(ResourceRecord(name: name, type: .https, ttl: ttl, rdata: rdata))
        }

        func store(_ record: ResourceRecord) {
            resolver.cache.store(
                .positive(CachedRRset(records: [record])),
                for: CacheKey(name: record.name, type: record.type.rawValue), ttl: record.ttl)
        }

        func call(_ method: String, _ parameters: String) throws -> ImmediateReply? {
            let message = Array(#"{"method":"\#(method)","parameters":\#(parameters)}"#.utf8)
            let call = try VarlinkCall.decode(
                ArraySlice(message),
                scannable: [
                    Methods.resolveHTTPS.name: ResolveHTTPSParameters.self,
                    Methods.resolveAddresses.name: ResolveAddressesParameters.self,
                ])
            let handler = try #require(routes.immediate[method])
            return handler(call, .unknown)
        }

        func https(_ parameters: String) throws -> ResolveHTTPSReply? {
            try call(Methods.resolveHTTPS.name, parameters).map { try decode($0.bytes) }
        }

        func decode<R: Decodable>(_ message: [UInt8], as type: R.Type = R.self) throws -> R {
            #expect(message.last == 0)
            return try VarlinkReplyMessage.decode(message.dropLast()).parameters(R.self)
        }
    }

    /// The reply without its timing (the only field that differs between two equal answers).
    static func untimed(_ reply: ResolveHTTPSReply) -> ResolveHTTPSReply {
        var reply = reply
        reply.timing = Timing(totalMs: 0)
        return reply
    }

    @Test func aKeptReplyIsTheFullReplyWithThisCallsFields() throws {
        let fixture = Fixture()
        fixture.storeHTTPS("h3.test.", alpn: ["h3", "h2"])
        let first = try #require(try fixture.https(#"{"name":"h3.test"}"#))
        #expect(fixture.kept.count == 1)
        fixture.clock.advance(10.5)
        let message = try #require(try fixture.call(Methods.resolveHTTPS.name, #"{"name":"h3.test"}"#))
        #expect(message.afterWrite == nil)
        let second: ResolveHTTPSReply = try fixture.decode(message.bytes)
        // What the full path answers now, written by the full encoder.
        var expected = try #require(fixture.resolver.cachedHTTPS("h3.test")).value.wire
        expected.timing = second.timing
        #expect(message.bytes == (try VarlinkReply.encode(expected)), "byte for byte the full path's reply")
        #expect(second.ttl == 290 && first.ttl == 300, "the TTL counts down")
        #expect(second.source == .cache && second.staleSeconds == nil)
        var unpatched = second
        unpatched.ttl = first.ttl
        #expect(Self.untimed(unpatched) == Self.untimed(first))
        #expect(second.records.map(\.alpn) == [["h3", "h2"]])
    }

    @Test func theFullPathWritesWhatTheFullEncoderWrites() throws {
        let fixture = Fixture()
        fixture.storeHTTPS("h3.test.", alpn: ["h3", "h2"])
        // Nothing is kept yet: the full path answers, fresh.
        let fresh = try #require(try fixture.call(Methods.resolveHTTPS.name, #"{"name":"h3.test"}"#))
        let freshReply: ResolveHTTPSReply = try fixture.decode(fresh.bytes)
        var expected = try #require(fixture.resolver.cachedHTTPS("h3.test")).value.wire
        expected.timing = freshReply.timing
        #expect(fresh.bytes == (try VarlinkReply.encode(expected)), "fresh, byte for byte")
        // Another spelling is another key: the full path again, now on a stale entry.
        fixture.clock.advance(400)
        let stale = try #require(try fixture.call(Methods.resolveHTTPS.name, #"{"name":"H3.test"}"#))
        let staleReply: ResolveHTTPSReply = try fixture.decode(stale.bytes)
        #expect(staleReply.source == .expiredCache && staleReply.staleSeconds == 100)
        var expectedStale = try #require(fixture.resolver.cachedHTTPS("H3.test")).value.wire
        expectedStale.timing = staleReply.timing
        #expect(stale.bytes == (try VarlinkReply.encode(expectedStale)), "stale, byte for byte")
        #expect(stale.afterWrite != nil, "the full path elects the refresh too")
    }

    @Test func newDataIsNeverServedFromAnOldReply() throws {
        let fixture = Fixture()
        fixture.storeHTTPS("h3.test.", alpn: ["h3"])
        #expect(try fixture.https(#"{"name":"h3.test"}"#)?.h3 == true)
        #expect(try fixture.https(#"{"name":"h3.test"}"#)?.h3 == true)
        fixture.storeHTTPS("h3.test.", alpn: ["h2"])
        let reply = try #require(try fixture.https(#"{"name":"h3.test"}"#))
        #expect(!reply.h3)
        #expect(reply.records.map(\.alpn) == [["h2"]])
        #expect(try fixture.https(#"{"name":"h3.test"}"#)?.records.map(\.alpn) == [["h2"]])
        fixture.resolver.flush("h3.test")
        #expect(try fixture.call(Methods.resolveHTTPS.name, #"{"name":"h3.test"}"#) == nil, "a flushed entry is a miss")
    }

    @Test func aChangedAliasTargetIsNeverServedFromAnOldReply() throws {
        let fixture = Fixture()
        // alias.test. HTTPS 0 h3.test.
        let target = try DNSName("h3.test.").wire
        fixture.store(ResourceRecord(name: "alias.test.", type: .https, ttl: 300, rdata: [0, 0] + target))
        fixture.storeHTTPS("h3.test.", alpn: ["h3"])
        let first = try #require(try fixture.https(#"{"name":"alias.test"}"#))
        #expect(first.aliasChain == ["h3.test."] && first.h3)
        #expect(try fixture.https(#"{"name":"alias.test"}"#)?.h3 == true)
        fixture.storeHTTPS("h3.test.", alpn: ["h2"])
        #expect(try fixture.https(#"{"name":"alias.test"}"#)?.h3 == false)
    }

    @Test func aStaleReplyElectsOneRefreshAndHonoursOptimism() throws {
        let fixture = Fixture()
        fixture.storeHTTPS("h3.test.", alpn: ["h3"])
        _ = try fixture.https(#"{"name":"h3.test"}"#)
        fixture.clock.advance(400)
        #expect(try fixture.call(Methods.resolveHTTPS.name, #"{"name":"h3.test","optimistic":false}"#) == nil)
        let stale = try #require(try fixture.call(Methods.resolveHTTPS.name, #"{"name":"h3.test"}"#))
        let reply: ResolveHTTPSReply = try fixture.decode(stale.bytes)
        #expect(reply.source == .expiredCache && reply.staleSeconds == 100 && reply.ttl == 30)
        #expect(stale.afterWrite != nil, "this call starts the refresh, after its reply is written")
        let next = try #require(try fixture.call(Methods.resolveHTTPS.name, #"{"name":"h3.test"}"#))
        #expect(next.afterWrite == nil, "one refresh is elected")

        let pessimistic = Fixture(optimisticSetting: false)
        pessimistic.storeHTTPS("h3.test.", alpn: ["h3"])
        _ = try pessimistic.https(#"{"name":"h3.test"}"#)
        pessimistic.clock.advance(400)
        #expect(try pessimistic.call(Methods.resolveHTTPS.name, #"{"name":"h3.test"}"#) == nil)
    }

    @Test func eachSpellingAndPortIsKeptApart() throws {
        let fixture = Fixture()
        fixture.storeHTTPS("h3.test.", alpn: ["h3"])
        fixture.storeHTTPS("_8443._https.h3.test.", alpn: ["h2"])
        let plain = try #require(try fixture.https(#"{"name":"h3.test"}"#))
        let loud = try #require(try fixture.https(#"{"name":"H3.TEST."}"#))
        let port = try #require(try fixture.https(#"{"name":"h3.test","port":8443}"#))
        #expect(fixture.kept.count == 3)
        #expect(Self.untimed(plain) == Self.untimed(loud))
        #expect(try fixture.https(#"{"name":"H3.TEST."}"#).map(Self.untimed) == Self.untimed(loud))
        #expect(port.queryName == "_8443._https.h3.test." && port.records.map(\.alpn) == [["h2"]])
        #expect(try fixture.https(#"{"name":"h3.test","port":8443}"#).map(Self.untimed) == Self.untimed(port))
    }

    @Test func addressRepliesAreKeptPerFamily() throws {
        let fixture = Fixture()
        fixture.store(ResourceRecord(name: "h3.test.", type: .a, ttl: 300, rdata: [192, 0, 2, 1]))
        fixture.store(ResourceRecord(name: "h3.test.", type: .aaaa, ttl: 100, rdata: [0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [1]))
        let method = Methods.resolveAddresses.name
        let both: ResolveAddressesReply = try fixture.decode(try #require(try fixture.call(method, #"{"name":"h3.test"}"#)).bytes)
        #expect(both.addresses == ["2001:db8::1", "192.0.2.1"] && both.ttl == 100)
        fixture.clock.advance(50)
        let again = try #require(try fixture.call(method, #"{"name":"h3.test"}"#))
        let reply: ResolveAddressesReply = try fixture.decode(again.bytes)
        #expect(reply.addresses == both.addresses && reply.ttl == 50 && reply.source == .cache)
        var expected = try #require(fixture.resolver.cachedAddresses("h3.test")).value.wire
        expected.timing = reply.timing
        #expect(again.bytes == (try VarlinkReply.encode(expected)), "byte for byte the full path's reply")
        let four: ResolveAddressesReply = try fixture.decode(
            try #require(try fixture.call(method, #"{"name":"h3.test","family":"ipv4"}"#)).bytes)
        #expect(four.addresses == ["192.0.2.1"] && four.ttl == 250)
        #expect(fixture.kept.count == 2)
        fixture.clock.advance(100)
        let stale: ResolveAddressesReply = try fixture.decode(try #require(try fixture.call(method, #"{"name":"h3.test"}"#)).bytes)
        #expect(stale.source == .expiredCache && stale.ttl == 30)
    }

    @Test func theTableStartsOverWhenFull() throws {
        let fixture = Fixture(capacity: 2)
        for name in ["a.test.", "b.test.", "c.test."] { fixture.storeHTTPS(name, alpn: ["h3"]) }
        for name in ["a.test", "b.test", "c.test", "c.test"] {
            #expect(try fixture.https(#"{"name":"\#(name)"}"#)?.name == name + ".")
            #expect(fixture.kept.count <= 2)
        }
    }

    /// The router answers the hot methods from the message's bytes: the same reply as the handler given the decoded
    /// call, and everything it cannot read there (another method, a stream, an escape) the long way.
    @Test func theRouterAnswersHitsFromTheMessageBytes() throws {
        let fixture = Fixture()
        fixture.storeHTTPS("h3.test.", alpn: ["h3"])
        fixture.store(ResourceRecord(name: "h3.test.", type: .a, ttl: 300, rdata: [192, 0, 2, 1]))
        let router = MethodRouter(fixture.routes, logger: .init(label: "test"))
        func route(_ text: String, answerNow: Bool = true) throws -> MethodRouter.Routed {
            try router.route(ArraySlice(Array(text.utf8)), peer: .unknown, answerNow: answerNow)
        }
        func answer(_ text: String) throws -> [UInt8]? {
            if case .answered(let reply) = try route(text) { return reply.bytes }
            return nil
        }
        let https = Methods.resolveHTTPS.name
        for text in [
            #"{"method":"\#(https)","parameters":{"name":"h3.test"}}"#,
            #"{"parameters":{"port":443,"name":"h3.test"},"method":"\#(https)"}"#,
            #"{"method":"\#(https)","parameters":{"name":"h3.test","optimistic":null},"more":false}"#,
        ] {
            let bytes = try #require(try answer(text), "\(text)")
            let reply: ResolveHTTPSReply = try fixture.decode(bytes)
            var expected = try #require(fixture.resolver.cachedHTTPS("h3.test")).value.wire
            expected.timing = reply.timing
            #expect(bytes == (try VarlinkReply.encode(expected)), "\(text)")
        }
        let addresses: ResolveAddressesReply = try fixture.decode(
            try #require(try answer(#"{"method":"\#(Methods.resolveAddresses.name)","parameters":{"name":"h3.test","family":"ipv4"}}"#)))
        #expect(addresses.addresses == ["192.0.2.1"])
        // Read the long way (Codable), and still answered synchronously by the same handler.
        #expect(try answer(#"{"method":"\#(https)","parameters":{"name":"h3\u002etest"}}"#) != nil)
        #expect(try answer(#"{"method":"\#(https)","parameters":{"name":"h3.test","name":"h3.test"}}"#) != nil)
        // Not answered now: a stream, a oneway call, a miss, a method one byte off, a shorter one, and (below) a call
        // behind an unanswered one.
        for text in [
            #"{"method":"\#(https)","parameters":{"name":"h3.test"},"more":true}"#,
            #"{"method":"\#(https)","parameters":{"name":"h3.test"},"oneway":true}"#,
            #"{"method":"\#(https)","parameters":{"name":"missing.test"}}"#,
            #"{"method":"io.discoverd.Resolver.ResolveHTTPX","parameters":{"name":"h3.test"}}"#,
            #"{"method":"io.discoverd.Resolver.Resolve","parameters":{"name":"h3.test"}}"#,
        ] {
            guard case .call(let call) = try route(text) else {
                Issue.record("answered: \(text)")
                continue
            }
            #expect(call.method.hasPrefix("io.discoverd.Resolver."))
        }
        guard case .call = try route(#"{"method":"\#(https)","parameters":{"name":"h3.test"}}"#, answerNow: false) else {
            Issue.record("answered although an earlier call is unanswered")
            return
        }
        #expect(throws: VarlinkError.self) { try route(#"{"method":"\#(https)","#) }
    }
}
