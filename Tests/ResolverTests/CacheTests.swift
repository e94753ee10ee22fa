import DNSCore
import Testing

@testable import Resolver

@Suite("OptimisticCache")
struct CacheTests {
    @Test(
        "a fresh entry counts its TTL down",
        arguments: [
            (0.0, UInt32(300)), (0.5, 300), (1, 299), (150, 150), (299, 1), (299.9, 1),
        ])
    func freshCountsDown(elapsed: Double, expected: UInt32) {
        let (cache, clock) = makeCache()
        cache.store(exampleAnswer, for: exampleKey, ttl: 300)
        clock.advance(elapsed)
        #expect(cache.lookup(exampleKey) == .fresh(exampleAnswer, remainingTTL: expected))
    }

    @Test("an entry turns stale exactly at expiry and is answered with TTL 30")
    func freshToStale() {
        let (cache, clock) = makeCache()
        cache.store(exampleAnswer, for: exampleKey, ttl: 60)
        clock.advance(60)
        let result = cache.lookup(exampleKey)
        #expect(result == .stale(exampleAnswer, staleSeconds: 0, answerTTL: 30, shouldRefresh: true))
        #expect(result.ttl == 30)
        clock.advance(25.7)
        let later = cache.lookup(exampleKey)
        #expect(later == .stale(exampleAnswer, staleSeconds: 25, answerTTL: 30, shouldRefresh: false))
    }

    @Test("the stale answer TTL is configurable")
    func staleTTLConfigurable() {
        let (cache, clock) = makeCache { $0.staleAnswerTTL = 7 }
        cache.store(exampleAnswer, for: exampleKey, ttl: 10)
        clock.advance(11)
        #expect(cache.lookup(exampleKey).ttl == 7)
    }

    @Test("many lookups of a stale entry elect exactly one refresher")
    func oneRefreshAmongMany() {
        let (cache, clock) = makeCache()
        cache.store(exampleAnswer, for: exampleKey, ttl: 60)
        clock.advance(61)
        let elected = (0..<50).map { _ in cache.lookup(exampleKey).shouldRefresh }
        #expect(elected.filter { $0 }.count == 1)
        #expect(elected.first == true)
        #expect(cache.statistics.refreshes == 1)
        #expect(cache.statistics.staleServed == 50)
    }

    @Test("a refresh that never reports back is presumed lost after the refresh timeout")
    func lostRefresh() {
        let (cache, clock) = makeCache { $0.refreshTimeout = 20 }
        cache.store(exampleAnswer, for: exampleKey, ttl: 60)
        clock.advance(61)
        #expect(cache.lookup(exampleKey).shouldRefresh)
        clock.advance(19)
        #expect(!cache.lookup(exampleKey).shouldRefresh)
        clock.advance(1)
        #expect(cache.lookup(exampleKey).shouldRefresh)
    }

    @Test("a failed refresh keeps the stale data and allows the next refresh 30 s later")
    func failedRefreshBackoff() {
        let (cache, clock) = makeCache()
        cache.store(exampleAnswer, for: exampleKey, ttl: 60)
        clock.advance(100)
        #expect(cache.lookup(exampleKey).shouldRefresh)
        clock.advance(5)
        cache.refreshFailed(exampleKey)
        clock.advance(29)
        let during = cache.lookup(exampleKey)
        #expect(during.answer == exampleAnswer)
        #expect(!during.shouldRefresh)
        clock.advance(1)
        #expect(cache.lookup(exampleKey).shouldRefresh)
        #expect(cache.statistics.refreshFailures == 1)
        #expect(cache.statistics.refreshes == 2)
    }

    @Test("the failure recheck interval is configurable")
    func failedRefreshBackoffConfigurable() {
        let (cache, clock) = makeCache { $0.refreshRetryInterval = 5 }
        cache.store(exampleAnswer, for: exampleKey, ttl: 1)
        clock.advance(2)
        #expect(cache.lookup(exampleKey).shouldRefresh)
        cache.refreshFailed(exampleKey)
        clock.advance(4.9)
        #expect(!cache.lookup(exampleKey).shouldRefresh)
        clock.advance(0.1)
        #expect(cache.lookup(exampleKey).shouldRefresh)
    }

    @Test("a successful refresh replaces the entry and clears the refresh in flight")
    func successfulRefresh() {
        let (cache, clock) = makeCache()
        cache.store(exampleAnswer, for: exampleKey, ttl: 60)
        clock.advance(61)
        #expect(cache.lookup(exampleKey).shouldRefresh)
        let newer = CacheAnswer.positive(TestAnswer("192.0.2.2"))
        cache.store(newer, for: exampleKey, ttl: 120)
        #expect(cache.lookup(exampleKey) == .fresh(newer, remainingTTL: 120))
        clock.advance(121)
        // The new entry expired: its first stale lookup is elected again, without waiting for any timeout.
        #expect(cache.lookup(exampleKey) == .stale(newer, staleSeconds: 1, answerTTL: 30, shouldRefresh: true))
    }

    @Test(
        "past the maximum stale time the entry is dropped",
        arguments: [
            (86_400.0, true), (86_400.5, false), (100_000, false),
        ])
    func maxStale(staleFor: Double, served: Bool) {
        let (cache, clock) = makeCache()
        cache.store(exampleAnswer, for: exampleKey, ttl: 60)
        clock.advance(60 + staleFor)
        let result = cache.lookup(exampleKey)
        #expect((result.answer != nil) == served)
        #expect(cache.count == (served ? 1 : 0))
    }

    @Test("the maximum stale time is configurable")
    func maxStaleConfigurable() {
        let (cache, clock) = makeCache { $0.maxStale = 3_600 }
        cache.store(exampleAnswer, for: exampleKey, ttl: 60)
        clock.advance(60 + 3_601)
        #expect(cache.lookup(exampleKey) == .miss)
    }

    @Test("optimistic: false reports a stale entry as a miss and keeps it")
    func nonOptimistic() {
        let (cache, clock) = makeCache()
        cache.store(exampleAnswer, for: exampleKey, ttl: 60)
        #expect(cache.lookup(exampleKey, optimistic: false) == .fresh(exampleAnswer, remainingTTL: 60))
        clock.advance(61)
        #expect(cache.lookup(exampleKey, optimistic: false) == .miss)
        #expect(cache.count == 1)
        #expect(cache.lookup(exampleKey).shouldRefresh)
        #expect(cache.statistics.misses == 1)
    }

    @Test(
        "opt-out domains match whole labels from the right",
        arguments: [
            ("www.bank.example", true),
            ("bank.example", true),
            ("BANK.Example.", true),
            ("a.b.bank.example.", true),
            ("notbank.example", false),
            ("bank.example.com", false),
            ("example", false),
            ("www\\.bank.example", false),  // one label "www.bank" under "example"
            ("www.bank\\.example", false),
        ])
    func optOut(name: String, optedOut: Bool) {
        let (cache, clock) = makeCache { $0.optOutDomains = ["bank.example"] }
        let key = CacheKey(name: name, type: 1)
        cache.store(exampleAnswer, for: key, ttl: 60)
        // Fresh answers are cached either way.
        #expect(cache.lookup(key) == .fresh(exampleAnswer, remainingTTL: 60))
        clock.advance(61)
        let result = cache.lookup(key)
        #expect((result == .miss) == optedOut)
        #expect(cache.count == 1)
    }

    @Test("the root opt-out disables stale answers everywhere")
    func optOutRoot() {
        let (cache, clock) = makeCache { $0.optOutDomains = ["."] }
        cache.store(exampleAnswer, for: exampleKey, ttl: 60)
        clock.advance(61)
        #expect(cache.lookup(exampleKey) == .miss)
    }

    @Test("a policy update re-applies the opt-out list to existing entries")
    func optOutUpdate() {
        let (cache, clock) = makeCache()
        cache.store(exampleAnswer, for: exampleKey, ttl: 60)
        clock.advance(61)
        #expect(cache.lookup(exampleKey).answer != nil)
        var policy = cache.policy
        policy.optOutDomains = ["com"]
        cache.updatePolicy(policy)
        #expect(cache.lookup(exampleKey) == .miss)
        policy.optOutDomains = []
        cache.updatePolicy(policy)
        #expect(cache.lookup(exampleKey).answer != nil)
    }

    @Test(
        "negative answers are cached with their RFC 2308 TTL, and expired ones serve only after a network failure",
        arguments: [
            CacheAnswer<TestAnswer>.nxdomain, .nodata,
        ])
    func negativeCaching(answer: CacheAnswer<TestAnswer>) {
        let (cache, clock) = makeCache()
        cache.store(answer, for: exampleKey, ttl: 900)
        #expect(cache.lookup(exampleKey) == .fresh(answer, remainingTTL: 900))
        #expect(answer.isNegative && answer.value == nil)
        clock.advance(901)
        // draft-gakiwate-dnsop-optimistic-dns: an expired negative answer is not returned optimistically...
        #expect(cache.lookup(exampleKey) == .miss)
        // ...but RFC 8767 lets it stand in when the network has just failed; no refresh is elected then.
        #expect(
            cache.lookup(exampleKey, afterFailure: true)
                == .stale(answer, staleSeconds: 1, answerTTL: 30, shouldRefresh: false))
        // An operator may still turn optimistic negatives on.
        cache.updatePolicy({ var policy = cache.policy; policy.serveStaleNegative = true; return policy }())
        #expect(cache.lookup(exampleKey) == .stale(answer, staleSeconds: 1, answerTTL: 30, shouldRefresh: true))
    }

    @Test("negative TTLs are capped by maxNegativeTTL")
    func negativeCap() {
        let (cache, _) = makeCache { $0.maxNegativeTTL = 3_600 }
        cache.store(.nxdomain, for: exampleKey, ttl: 86_400)
        #expect(cache.lookup(exampleKey).ttl == 3_600)
    }

    @Test("stale negative answers can be turned off")
    func noStaleNegative() {
        let (cache, clock) = makeCache { $0.serveStaleNegative = false }
        cache.store(.nodata, for: exampleKey, ttl: 60)
        cache.store(exampleAnswer, for: CacheKey(name: "example.com", type: 1), ttl: 60)
        clock.advance(61)
        #expect(cache.lookup(exampleKey) == .miss)
        #expect(cache.lookup(CacheKey(name: "example.com", type: 1)).answer == exampleAnswer)
    }

    @Test(
        "TTLs are clamped",
        arguments: [
            // (ttl, minTTL, maxTTL, cached TTL or nil)
            (UInt32(300), UInt32(0), UInt32(86_400), UInt32?.some(300)),
            (5, 60, 86_400, 60),
            (1_000_000, 0, 86_400, 86_400),
            (0x8000_0000, 0, 86_400, 86_400),  // RFC 8767 §4: high bit set is a large positive TTL
            (UInt32.max, 0, 3_600, 3_600),
            (0, 0, 86_400, nil),  // TTL 0: not cached
            (0, 60, 86_400, nil),  // TTL 0 is not raised by minTTL
            (10, 0, 0, nil),  // maxTTL 0 disables caching
        ])
    func ttlClamps(ttl: UInt32, minTTL: UInt32, maxTTL: UInt32, expected: UInt32?) {
        let (cache, _) = makeCache {
            $0.minTTL = minTTL
            $0.maxTTL = maxTTL
        }
        let stored = cache.store(exampleAnswer, for: exampleKey, ttl: ttl)
        #expect(stored == (expected != nil))
        #expect(cache.lookup(exampleKey).ttl == expected)
    }

    @Test("a TTL 0 answer removes the stale entry it refreshes")
    func ttlZeroRemoves() {
        let (cache, clock) = makeCache()
        cache.store(exampleAnswer, for: exampleKey, ttl: 60)
        clock.advance(61)
        #expect(cache.lookup(exampleKey).shouldRefresh)
        #expect(!cache.store(exampleAnswer, for: exampleKey, ttl: 0))
        #expect(cache.count == 0)
        #expect(cache.lookup(exampleKey) == .miss)
    }

    @Test("flush removes everything, one name, or a subtree, and counts")
    func flush() {
        let (cache, _) = makeCache()
        let names = ["example.com", "www.example.com", "a.www.example.com", "example.org", "notexample.com"]
        func fill() {
            for name in names {
                for type: UInt16 in [1, 28, 65] {
                    cache.store(exampleAnswer, for: CacheKey(name: name, type: type), ttl: 60)
                }
            }
        }
        fill()
        #expect(cache.flush("WWW.example.com") == 3)
        #expect(cache.lookup(CacheKey(name: "www.example.com", type: 1)) == .miss)
        #expect(cache.lookup(CacheKey(name: "a.www.example.com", type: 1)).answer != nil)
        #expect(cache.flush("nothing.example") == 0)
        fill()
        #expect(cache.flush("example.com.", includingSubdomains: true) == 9)
        #expect(cache.lookup(CacheKey(name: "notexample.com", type: 1)).answer != nil)
        #expect(cache.flush() == 6)
        #expect(cache.count == 0)
    }

    @Test("the entry count stays within maxEntries and recently used entries survive")
    func evictionBound() {
        let (cache, _) = makeCache { $0.maxEntries = 100 }
        let hot = CacheKey(name: "hot.example", type: 1)
        cache.store(exampleAnswer, for: hot, ttl: 3_600)
        for index in 0..<1_000 {
            cache.store(exampleAnswer, for: CacheKey(name: "n\(index).example", type: 1), ttl: 3_600)
            #expect(cache.count <= 100)
            _ = cache.lookup(hot)
        }
        #expect(cache.lookup(hot).answer != nil)
        // The newest entry is never the one evicted.
        #expect(cache.lookup(CacheKey(name: "n999.example", type: 1)).answer != nil)
        #expect(cache.lookup(CacheKey(name: "n0.example", type: 1)) == .miss)
    }

    @Test("eviction drops entries past the maximum stale time before live ones")
    func evictionPrefersDead() {
        let (cache, clock) = makeCache {
            $0.maxEntries = 16
            $0.maxStale = 100
        }
        for index in 0..<8 {
            cache.store(exampleAnswer, for: CacheKey(name: "old\(index).example", type: 1), ttl: 10)
        }
        clock.advance(200)
        for index in 0..<9 {
            cache.store(exampleAnswer, for: CacheKey(name: "new\(index).example", type: 1), ttl: 10)
        }
        #expect(cache.count == 9)
        #expect((0..<9).allSatisfy { cache.lookup(CacheKey(name: "new\($0).example", type: 1)).answer != nil })
    }

    @Test("shrinking maxEntries evicts down to the new bound")
    func shrinkPolicy() {
        let (cache, _) = makeCache()
        for index in 0..<50 {
            cache.store(exampleAnswer, for: CacheKey(name: "n\(index).example", type: 1), ttl: 60)
        }
        var policy = cache.policy
        policy.maxEntries = 10
        cache.updatePolicy(policy)
        #expect(cache.count <= 10)
        #expect(cache.policy.maxEntries == 10)
    }

    @Test("purgeExpired drops only entries past the maximum stale time")
    func purge() {
        let (cache, clock) = makeCache { $0.maxStale = 100 }
        cache.store(exampleAnswer, for: CacheKey(name: "short.example", type: 1), ttl: 10)
        cache.store(exampleAnswer, for: CacheKey(name: "long.example", type: 1), ttl: 1_000)
        clock.advance(50)
        #expect(cache.purgeExpired() == 0)
        clock.advance(61)
        #expect(cache.purgeExpired() == 1)
        #expect(cache.count == 1)
    }

    @Test("the counters follow hits, misses, stale answers, refreshes and failures")
    func statistics() {
        let (cache, clock) = makeCache()
        _ = cache.lookup(exampleKey)
        cache.store(exampleAnswer, for: exampleKey, ttl: 60)
        _ = cache.lookup(exampleKey)
        _ = cache.lookup(exampleKey)
        clock.advance(61)
        _ = cache.lookup(exampleKey)
        _ = cache.lookup(exampleKey)
        cache.refreshFailed(exampleKey)
        let expected = CacheStatistics(entries: 1, hits: 2, misses: 1, staleServed: 2, refreshes: 1, refreshFailures: 1)
        #expect(cache.statistics == expected)
    }

    @Test(
        "keys are case-insensitive and absolute",
        arguments: [
            ("Example.COM", "example.com."),
            ("example.com.", "example.com."),
            ("", "."),
            (".", "."),
            ("a\\.", "a\\.."),
            ("a\\\\.", "a\\\\."),
            ("ÉXAMPLE.com", "Éxample.com."),
        ])
    func keyNormalization(input: String, normalized: String) {
        let key = CacheKey(name: input, type: 1)
        #expect(key.name == normalized)
        #expect(key == CacheKey(name: normalized, type: 1))
    }

    @Test("type and class are part of the key")
    func keyParts() {
        let (cache, _) = makeCache()
        cache.store(exampleAnswer, for: CacheKey(name: "example.com", type: 1), ttl: 60)
        #expect(cache.lookup(CacheKey(name: "example.com", type: 28)) == .miss)
        #expect(cache.lookup(CacheKey(name: "example.com", type: 1, dnsClass: 3)) == .miss)
        #expect(cache.lookup(CacheKey(name: "EXAMPLE.com.", type: 1)).answer != nil)
    }

    @Test("maxEntries 0 caches nothing")
    func zeroCapacity() {
        let (cache, _) = makeCache { $0.maxEntries = 0 }
        #expect(!cache.store(exampleAnswer, for: exampleKey, ttl: 60))
        #expect(cache.count == 0)
    }
}
