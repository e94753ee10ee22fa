import DNSCore
import Foundation
import Testing

@testable import Resolver

@Suite("OptimisticCache concurrency and scale")
struct CacheConcurrencyTests {
    @Test("100 concurrent lookups of a stale entry: all answered stale, exactly one refresh")
    func concurrentStaleLookups() async {
        let (cache, clock) = makeCache()
        cache.store(exampleAnswer, for: exampleKey, ttl: 60)
        clock.advance(90)
        let results = await withTaskGroup(of: CacheLookup<TestAnswer>.self) { group in
            for _ in 0..<100 {
                group.addTask { cache.lookup(exampleKey) }
            }
            var results: [CacheLookup<TestAnswer>] = []
            for await result in group { results.append(result) }
            return results
        }
        #expect(results.count == 100)
        #expect(results.allSatisfy { $0.answer == exampleAnswer && $0.ttl == 30 })
        #expect(results.filter(\.shouldRefresh).count == 1)
        #expect(cache.statistics.refreshes == 1)
    }

    @Test("concurrent stores, lookups and refresh reports keep the bound and the counters consistent")
    func concurrentMixedLoad() async {
        let (cache, clock) = makeCache { $0.maxEntries = 500 }
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    for index in 0..<2_000 {
                        let key = CacheKey(name: "n\((index * 7 + worker) % 1_000).example", type: 1)
                        switch cache.lookup(key) {
                        case .miss: cache.store(exampleAnswer, for: key, ttl: UInt32(1 + index % 5))
                        case .stale(_, _, _, true): cache.refreshFailed(key)
                        default: break
                        }
                        if index % 100 == 0 { clock.advance(1) }
                    }
                }
            }
        }
        let statistics = cache.statistics
        #expect(statistics.entries <= 500)
        #expect(statistics.hits + statistics.misses + statistics.staleServed == 16_000)
        #expect(statistics.refreshFailures == statistics.refreshes)
    }

    @Test("100 000 entries fit the bound; rough lookup rate printed, not asserted")
    func scale() {
        let (cache, _) = makeCache()
        let keys = (0..<100_000).map { CacheKey(name: "host\($0).example.com", type: 65) }
        let rssBefore = residentBytes()
        for key in keys {
            cache.store(.positive(TestAnswer("192.0.2.1", "2001:db8::1")), for: key, ttl: 3_600)
        }
        let rssAfter = residentBytes()
        #expect(cache.count == 100_000)

        let start = ContinuousClock.now
        var found = 0
        for round in 0..<5 {
            for key in keys where cache.lookup(key).answer != nil {
                found += 1
            }
            _ = round
        }
        let elapsed = ContinuousClock.now - start
        #expect(found == 500_000)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        print(
            "OptimisticCache: \(Int(500_000 / max(seconds, 1e-9))) lookups/s (debug build), "
                + "~\((rssAfter - rssBefore) / 1_048_576) MiB RSS growth for 100 000 entries"
        )
    }

    private func residentBytes() -> Int {
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8),
            let pages = statm.split(separator: " ").dropFirst().first.flatMap({ Int($0) })
        else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
