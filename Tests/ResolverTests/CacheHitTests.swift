import DNSCore
import Testing

@testable import Resolver

/// Synchronous cache answers (the API's hot path) against the async methods they stand in for.
@Suite("Cache hits")
struct CacheHitTests {
    static func resolver(_ script: [String: ScriptedTransport.Reply]) -> (DNSResolver, ScriptedTransport, ManualClock) {
        let transport = ScriptedTransport(script)
        let clock = ManualClock()
        return (DNSResolver(transport: transport, clock: clock), transport, clock)
    }

    static let script: [String: ScriptedTransport.Reply] = [
        ScriptedTransport.key("h3.test", .https): .answer([httpsRecord("h3.test.", priority: 1, target: ".", alpn: ["h3", "h2"])]),
        ScriptedTransport.key("alias.test", .https): .answer([httpsRecord("alias.test.", priority: 0, target: "h3.test.")]),
        ScriptedTransport.key("h3.test", .a): .answer([aRecord("h3.test.", [192, 0, 2, 1])]),
        ScriptedTransport.key("h3.test", .aaaa): .answer([]),
    ]

    @Test func aMissIsNilAndQueriesNothing() {
        let (resolver, transport, _) = Self.resolver(Self.script)
        #expect(resolver.cachedHTTPS("h3.test") == nil)
        #expect(resolver.cachedAddresses("h3.test") == nil)
        #expect(resolver.cachedHTTPS("not a name!") == nil)
        #expect(transport.total == 0)
    }

    @Test(arguments: ["h3.test", "alias.test", "H3.Test."])
    func aHitEqualsTheAsyncAnswer(name: String) async throws {
        let (resolver, transport, _) = Self.resolver(Self.script)
        _ = try await resolver.resolveHTTPS(name)
        var expected = try await resolver.resolveHTTPS(name)
        let queries = transport.total
        var hit = try #require(resolver.cachedHTTPS(name))
        #expect(transport.total == queries)
        expected.elapsedMilliseconds = 0
        hit.value.elapsedMilliseconds = 0
        #expect(hit.value == expected)
        #expect(hit.value.source == .cache)
        #expect(hit.dependencies.entries.count == (name == "alias.test" ? 2 : 1))
        #expect(hit.refreshes.isEmpty)
    }

    @Test func anAddressHitEqualsTheAsyncAnswer() async throws {
        let (resolver, _, _) = Self.resolver(Self.script)
        var expected = try await resolver.resolveAddresses("h3.test")
        var hit = try #require(resolver.cachedAddresses("h3.test"))
        expected.elapsedMilliseconds = 0
        hit.value.elapsedMilliseconds = 0
        expected.source = .cache
        expected.attempts = []
        expected.ttl = hit.value.ttl
        #expect(hit.value == expected)
        #expect(resolver.cachedAddresses("h3.test", family: .ipv4)?.value.addresses == ["192.0.2.1"])
    }

    @Test func aStaleHitLeavesItsRefreshToTheCaller() async throws {
        let (resolver, transport, clock) = Self.resolver(Self.script)
        _ = try await resolver.resolveHTTPS("h3.test")
        clock.advance(400)
        let hit = try #require(resolver.cachedHTTPS("h3.test"))
        #expect(hit.value.source == .expiredCache)
        #expect(hit.value.staleSeconds == 100)
        #expect(!hit.refreshes.isEmpty)
        #expect(transport.count("h3.test", .https) == 1, "no refresh before the caller starts it")
        #expect(resolver.cachedHTTPS("h3.test")?.refreshes.isEmpty == true, "one refresh is elected")
        resolver.startRefreshes(hit.refreshes)
        for _ in 0..<500 where transport.count("h3.test", .https) < 2 { try await Task.sleep(for: .milliseconds(2)) }
        #expect(transport.count("h3.test", .https) == 2)
    }

    @Test func aRefreshedEntryHasANewMemo() async throws {
        let (resolver, _, clock) = Self.resolver(Self.script)
        _ = try await resolver.resolveHTTPS("h3.test")
        let before = try #require(resolver.cachedHTTPS("h3.test")?.dependencies.generations.first)
        #expect(resolver.cachedHTTPS("h3.test")?.dependencies.generations.first == before, "same entry, same memo")
        clock.advance(400)
        _ = try await resolver.resolveHTTPS("h3.test", optimistic: false)
        let after = try #require(resolver.cachedHTTPS("h3.test")?.dependencies.generations.first)
        #expect(after != before)
    }

    @Test func statisticsCountAnAnsweredHitOnceAndAnAbandonedOneNotAtAll() async throws {
        let (resolver, _, _) = Self.resolver(Self.script)
        #expect(resolver.cachedHTTPS("h3.test") == nil)
        #expect(resolver.cache.statistics.misses == 0, "the async path that follows counts the miss")
        _ = try await resolver.resolveHTTPS("h3.test")
        let before = resolver.cache.statistics
        #expect(resolver.cachedHTTPS("h3.test") != nil)
        #expect(resolver.cache.statistics.hits == before.hits + 1)
        #expect(resolver.cache.statistics.misses == before.misses)
    }

    // MARK: - Revalidating the entries of an earlier hit

    @Test func unchangedEntriesGiveTheFieldsOfAHit() async throws {
        let (resolver, _, clock) = Self.resolver(Self.script)
        _ = try await resolver.resolveHTTPS("alias.test")
        let hit = try #require(resolver.cachedHTTPS("alias.test"))
        let dependencies = hit.dependencies
        #expect(dependencies.entries.map(\.key.name) == ["alias.test.", "h3.test."])
        clock.advance(100)
        let before = resolver.cache.statistics
        let fields = try #require(resolver.revalidate(dependencies))
        let again = try #require(resolver.cachedHTTPS("alias.test"))
        #expect(fields.source == again.value.source && fields.source == .cache)
        #expect(fields.ttl == again.value.ttl && fields.ttl == 200, "the TTL counts down")
        #expect(fields.staleSeconds == nil && fields.refreshes.isEmpty)
        #expect(resolver.cache.statistics.hits == before.hits + 4, "two entries, counted as a hit counts them")
    }

    @Test func staleEntriesElectOneRefreshAndAreNotServedWithoutOptimism() async throws {
        let (resolver, transport, clock) = Self.resolver(Self.script)
        _ = try await resolver.resolveHTTPS("h3.test")
        let dependencies = try #require(resolver.cachedHTTPS("h3.test")?.dependencies)
        clock.advance(400)
        #expect(resolver.revalidate(dependencies, optimistic: false) == nil)
        let fields = try #require(resolver.revalidate(dependencies))
        #expect(fields.source == .expiredCache && fields.staleSeconds == 100)
        #expect(fields.ttl == resolver.cache.policy.staleAnswerTTL)
        #expect(!fields.refreshes.isEmpty)
        #expect(resolver.revalidate(dependencies)?.refreshes.isEmpty == true, "one refresh is elected")
        #expect(transport.count("h3.test", .https) == 1, "no refresh before the caller starts it")
        resolver.startRefreshes(fields.refreshes)
        for _ in 0..<500 where transport.count("h3.test", .https) < 2 { try await Task.sleep(for: .milliseconds(2)) }
        #expect(transport.count("h3.test", .https) == 2)
    }

    @Test func newDataOrAMissingEntryEndsTheRevalidation() async throws {
        let (resolver, _, _) = Self.resolver(Self.script)
        _ = try await resolver.resolveHTTPS("alias.test")
        let dependencies = try #require(resolver.cachedHTTPS("alias.test")?.dependencies)
        // The alias target is stored again: same records, new data.
        resolver.cache.store(
            .positive(CachedRRset(records: [httpsRecord("h3.test.", priority: 1, target: ".", alpn: ["h3", "h2"])])),
            for: CacheKey(name: "h3.test.", type: RRType.https.rawValue), ttl: 300)
        #expect(resolver.revalidate(dependencies) == nil)
        let renewed = try #require(resolver.cachedHTTPS("alias.test")?.dependencies)
        #expect(renewed != dependencies)
        #expect(resolver.revalidate(renewed) != nil)
        resolver.flush("alias.test")
        #expect(resolver.revalidate(renewed) == nil)
    }

    @Test func addressHitsHaveDependenciesForEachFamilyAsked() async throws {
        let (resolver, _, _) = Self.resolver(Self.script)
        _ = try await resolver.resolveAddresses("h3.test")
        let both = try #require(resolver.cachedAddresses("h3.test")?.dependencies)
        #expect(both.entries.map(\.type) == [.aaaa, .a])
        let four = try #require(resolver.cachedAddresses("h3.test", family: .ipv4)?.dependencies)
        #expect(four.entries.map(\.type) == [.a])
        #expect(resolver.revalidate(both)?.ttl == resolver.cachedAddresses("h3.test")?.value.ttl)
    }
}
