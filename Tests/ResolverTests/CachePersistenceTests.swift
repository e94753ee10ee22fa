import DNSCore
import Foundation
import Testing

@testable import Resolver

@Suite("Cache persistence")
struct CachePersistenceTests {
    @Test("save then load restores fresh, stale and negative entries with their expiry")
    func roundTrip() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = directory.file("cache.json")
        let (cache, clock) = makeCache()
        let staleKey = CacheKey(name: "stale.example", type: 1)
        let negativeKey = CacheKey(name: "missing.example", type: 28)
        cache.store(.positive(TestAnswer("192.0.2.9")), for: staleKey, ttl: 10)
        clock.advance(20)
        cache.store(exampleAnswer, for: exampleKey, ttl: 300)
        cache.store(.nxdomain, for: negativeKey, ttl: 600)
        try cache.save(to: file)

        let restored = TestCache(clock: clock)
        let result = try restored.load(from: file)
        #expect(result == CacheLoadResult(loaded: 3, skipped: 0, invalid: 0))
        #expect(restored.lookup(exampleKey) == .fresh(exampleAnswer, remainingTTL: 300))
        #expect(restored.lookup(negativeKey) == .fresh(.nxdomain, remainingTTL: 600))
        // Straight after a restart the stale entry is served optimistically and one refresh is elected.
        #expect(
            restored.lookup(staleKey)
                == .stale(.positive(TestAnswer("192.0.2.9")), staleSeconds: 10, answerTTL: 30, shouldRefresh: true)
        )
    }

    @Test("the file has mode 0600 and no temporary file is left behind")
    func atomicWriteLeavesNoTemporary() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = directory.file("cache.json")
        let (cache, _) = makeCache()
        cache.store(exampleAnswer, for: exampleKey, ttl: 300)
        let previousMask = umask(0)
        defer { umask(previousMask) }
        try cache.save(to: file)
        try cache.save(to: file)
        #expect(try directory.contents() == ["cache.json"])
        let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
    }

    @Test("saving replaces the previous file's contents")
    func saveReplaces() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = directory.file("cache.json")
        let (cache, clock) = makeCache()
        cache.store(exampleAnswer, for: exampleKey, ttl: 300)
        try cache.save(to: file)
        cache.flush()
        try cache.save(to: file)
        let restored = TestCache(clock: clock)
        #expect(try restored.load(from: file).loaded == 0)
    }

    @Test("saving into a missing directory throws an I/O error")
    func saveMissingDirectory() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (cache, _) = makeCache()
        #expect {
            try cache.save(to: directory.file("absent/cache.json"))
        } throws: { error in
            (error as? CachePersistenceError)?.code == .io
        }
    }

    @Test("entries past the maximum stale time are not loaded")
    func loadSkipsDead() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = directory.file("cache.json")
        let (cache, clock) = makeCache()
        cache.store(exampleAnswer, for: CacheKey(name: "short.example", type: 1), ttl: 60)
        cache.store(exampleAnswer, for: CacheKey(name: "long.example", type: 1), ttl: 86_400)
        try cache.save(to: file)
        clock.advance(60 + 86_400 + 1)
        let restored = TestCache(clock: clock)
        #expect(try restored.load(from: file) == CacheLoadResult(loaded: 1, skipped: 1, invalid: 0))
        #expect(restored.lookup(CacheKey(name: "short.example", type: 1)) == .miss)
        #expect(restored.lookup(CacheKey(name: "long.example", type: 1)).answer != nil)
    }

    @Test("loading keeps live entries and caps expiries at the maximum TTL")
    func loadKeepsLiveAndCaps() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = directory.file("cache.json")
        let (cache, clock) = makeCache()
        cache.store(exampleAnswer, for: exampleKey, ttl: 86_400)
        try cache.save(to: file)

        var policy = CachePolicy()
        policy.maxTTL = 600
        let restored = TestCache(policy: policy, clock: clock)
        let live = CacheAnswer.positive(TestAnswer("198.51.100.1"))
        restored.store(live, for: exampleKey, ttl: 60)
        #expect(try restored.load(from: file) == CacheLoadResult(loaded: 0, skipped: 1, invalid: 0))
        #expect(restored.lookup(exampleKey) == .fresh(live, remainingTTL: 60))

        let empty = TestCache(policy: policy, clock: clock)
        try empty.load(from: file)
        #expect(empty.lookup(exampleKey).ttl == 600)
    }

    @Test("an undecodable entry is counted and the rest still load")
    func invalidEntry() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = directory.file("cache.json")
        let (_, clock) = makeCache()
        let now = clock.now()
        let json = """
            {"format":"discoverd.cache","version":1,"savedAt":\(now),"payload":[
              {"key":{"name":"ok.example.","type":1,"class":1},"expires":\(now + 100),
               "answer":{"kind":"positive","value":{"addresses":["192.0.2.1"]}}},
              {"key":{"name":"bad.example.","type":70000,"class":1},"expires":\(now + 100),
               "answer":{"kind":"nodata"}},
              {"key":{"name":"bad2.example.","type":1,"class":1},"expires":\(now + 100),
               "answer":{"kind":"positive","value":{"addresses":"not a list"}}},
              {"key":{"name":"neg.example.","type":1,"class":1},"expires":\(now + 100),"answer":{"kind":"nodata"}}
            ]}
            """
        try directory.writePrivate(Data(json.utf8), to: file)
        let restored = TestCache(clock: clock)
        #expect(try restored.load(from: file) == CacheLoadResult(loaded: 2, skipped: 0, invalid: 2))
        #expect(restored.lookup(CacheKey(name: "neg.example", type: 1)).answer == .nodata)
    }

    @Test("a missing file throws notFound")
    func missingFile() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (cache, _) = makeCache()
        #expect {
            try cache.load(from: directory.file("nothing.json"))
        } throws: { error in
            (error as? CachePersistenceError)?.code == .notFound
        }
    }

    @Test(
        "a corrupt file throws corrupt and leaves the cache empty",
        arguments: [
            "", "garbage", "\u{0}\u{1}\u{2}", "[]", "{}", "{\"format\":\"discoverd.cache\"}",
            "{\"format\":\"discoverd.cache\",\"version\":1,\"savedAt\":0}",
            "{\"format\":\"discoverd.cache\",\"version\":1,\"savedAt\":0,\"payload\":{}}",
            "{\"format\":\"discoverd.altsvc\",\"version\":1,\"savedAt\":0,\"payload\":[]}",
            "{\"format\":\"discoverd.cache\",\"version\":\"1\",\"savedAt\":0,\"payload\":[]}",
        ])
    func corruptFile(contents: String) throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = directory.file("cache.json")
        try directory.writePrivate(Data(contents.utf8), to: file)
        let (cache, _) = makeCache()
        #expect {
            try cache.load(from: file)
        } throws: { error in
            (error as? CachePersistenceError)?.code == .corrupt
        }
        #expect(cache.count == 0)
    }

    @Test("a truncated file throws corrupt", arguments: [1, 10, 50, 90, 99])
    func truncatedFile(percent: Int) throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = directory.file("cache.json")
        let (cache, clock) = makeCache()
        for index in 0..<20 {
            cache.store(exampleAnswer, for: CacheKey(name: "n\(index).example", type: 1), ttl: 300)
        }
        try cache.save(to: file)
        let data = try Data(contentsOf: file)
        try directory.writePrivate(data.prefix(data.count * percent / 100), to: file)
        let restored = TestCache(clock: clock)
        #expect {
            try restored.load(from: file)
        } throws: { error in
            (error as? CachePersistenceError)?.code == .corrupt
        }
        #expect(restored.count == 0)
    }

    @Test("a file of another format version throws unsupportedVersion", arguments: [0, 2, 99])
    func wrongVersion(version: Int) throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = directory.file("cache.json")
        let json = "{\"format\":\"discoverd.cache\",\"version\":\(version),\"payload\":\"whatever\"}"
        try directory.writePrivate(Data(json.utf8), to: file)
        let (cache, _) = makeCache()
        #expect {
            try cache.load(from: file)
        } throws: { error in
            (error as? CachePersistenceError)?.code == .unsupportedVersion
        }
    }

    @Test("a directory in place of the file is an I/O error, not a crash")
    func directoryInsteadOfFile() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (cache, _) = makeCache()
        #expect {
            try cache.load(from: directory.url)
        } throws: { error in
            (error as? CachePersistenceError)?.code == .io
        }
    }

    @Test(
        "AtomicFile splits paths into directory and name",
        arguments: [
            ("/var/lib/discoverd/cache.json", "/var/lib/discoverd", "cache.json"),
            ("/cache.json", "/", "cache.json"),
            ("cache.json", ".", "cache.json"),
        ])
    func splitPath(path: String, directory: String, base: String) {
        let split = AtomicFile.split(path)
        #expect(split.directory == directory)
        #expect(split.base == base)
    }
}
