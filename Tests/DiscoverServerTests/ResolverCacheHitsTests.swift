import DiscoverAPI
@testable import DiscoverServer
import Foundation
import Resolver
import Testing

/// The `ResolveHTTPS` reply kept with a cache entry: patched per hit, and never served for newer data.
@Suite struct ResolverCacheHitsTests {
    struct NoUpstream: DNSTransport {
        func query(_ question: DNSQuestion) async throws(DNSTransportError) -> DNSExchange {
            throw DNSTransportError(code: .timeout, message: "no upstream in unit tests", attempts: [])
        }
    }

    /// HTTPS RDATA with priority 1, target "." and the given ALPN ids.
    static func https(_ name: String, alpn: [String]) -> ResourceRecord {
        let value = alpn.flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) }
        let rdata: [UInt8] = [0, 1, 0, 0, 1, UInt8(value.count >> 8), UInt8(value.count & 0xff)] + value
        return ResourceRecord(name: name, type: .https, ttl: 300, rdata: rdata)
    }

    static func store(_ resolver: DNSResolver, alpn: [String]) {
        resolver.cache.store(
            .positive(CachedRRset(records: [https("h3.test.", alpn: alpn)])),
            for: CacheKey(name: "h3.test.", type: RRType.https.rawValue), ttl: 300)
    }

    static func decode(_ message: [UInt8]) throws -> ResolveHTTPSReply {
        try VarlinkReplyMessage.decode(message.dropLast()).parameters(ResolveHTTPSReply.self)
    }

    @Test func aHitIsServedFromTheKeptEncodingWithItsOwnFields() throws {
        let resolver = DNSResolver(transport: NoUpstream())
        Self.store(resolver, alpn: ["h3", "h2"])
        let hit = try #require(resolver.cachedHTTPS("h3.test"))
        let first = try #require(ResolverCacheHits.httpsMessage(hit, port: 443))
        let memo = try #require(hit.memos.first ?? nil)
        #expect(memo.encoded(443, as: EncodedHTTPSReply.self)?.generations == [memo.generation], "kept with the entry")
        #expect(first == (try VarlinkReply.encode(hit.value.wire)), "the same bytes as encoding the reply")

        var later = try #require(resolver.cachedHTTPS("h3.test"))
        later.value.ttl = 17
        later.value.elapsedMilliseconds = 0.25
        let patched = try Self.decode(try #require(ResolverCacheHits.httpsMessage(later, port: 443)))
        #expect(patched.ttl == 17)
        #expect(patched.timing == Timing(totalMs: 0.25))
        #expect(patched.source == .cache && patched.staleSeconds == nil)
        #expect(patched.records.map(\.alpn) == [["h3", "h2"]])

        later.value.source = .expiredCache
        later.value.staleSeconds = 42
        let stale = try Self.decode(try #require(ResolverCacheHits.httpsMessage(later, port: 443)))
        #expect(stale.source == .expiredCache && stale.staleSeconds == 42)
    }

    @Test func aRefreshedEntryIsNeverServedFromTheOldEncoding() throws {
        let resolver = DNSResolver(transport: NoUpstream())
        Self.store(resolver, alpn: ["h3"])
        let old = try #require(resolver.cachedHTTPS("h3.test"))
        #expect(try Self.decode(try #require(ResolverCacheHits.httpsMessage(old, port: 443))).h3)
        Self.store(resolver, alpn: ["h2"])
        let new = try #require(resolver.cachedHTTPS("h3.test"))
        let reply = try Self.decode(try #require(ResolverCacheHits.httpsMessage(new, port: 443)))
        #expect(!reply.h3)
        #expect(reply.records.map(\.alpn) == [["h2"]])
        // A hit holding the old entry's memo but newer generations does not reuse it either.
        var mixed = old
        mixed.memos = new.memos
        mixed.value = new.value
        #expect(try Self.decode(try #require(ResolverCacheHits.httpsMessage(mixed, port: 443))).records.map(\.alpn) == [["h2"]])
    }
}
