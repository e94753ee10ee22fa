import DNSCore
import Foundation
import Synchronization
import Testing

@testable import Resolver

/// An upstream for the walk's pure logic: whole scripted replies (answer, authority, additional), every question
/// recorded with its DO bit, and a gate that holds replies back so queries overlap.
final class ReplyTransport: DNSTransport {
    struct Asked: Hashable, Sendable {
        var name: String
        var type: RRType
        var dnssecOK: Bool
    }

    private let replies: Mutex<[String: DNSMessage]>
    private let asked = Mutex<[Asked]>([])
    /// Replies count as from a verified DoT/DoH upstream (``DNSExchange/authenticatedTransport``).
    let authenticated = Atomic<Bool>(false)
    private let held = Mutex<(closed: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))

    init(_ replies: [String: DNSMessage] = [:]) { self.replies = Mutex(replies) }

    static func key(_ name: String, _ type: RRType) -> String { "\(DNSName.normalized(name)) \(type)" }

    func set(_ name: String, _ type: RRType, _ message: DNSMessage) {
        replies.withLock { $0[Self.key(name, type)] = message }
    }

    func remove(_ name: String, _ type: RRType) { _ = replies.withLock { $0.removeValue(forKey: Self.key(name, type)) } }

    var questions: [Asked] { asked.withLock { $0 } }
    func count(_ name: String, _ type: RRType) -> Int {
        asked.withLock { $0.filter { $0.name == DNSName.normalized(name) && $0.type == type }.count }
    }

    func close() { held.withLock { $0.closed = true } }
    func open() {
        let waiting = held.withLock { state in
            state.closed = false
            defer { state.waiting = [] }
            return state.waiting
        }
        for waiter in waiting { waiter.resume() }
    }

    func query(_ question: DNSQuestion) async throws(DNSTransportError) -> DNSExchange {
        try await query(question, dnssecOK: false)
    }

    func query(_ question: DNSQuestion, dnssecOK: Bool) async throws(DNSTransportError) -> DNSExchange {
        asked.withLock { $0.append(Asked(name: question.name, type: question.type, dnssecOK: dnssecOK)) }
        await withCheckedContinuation { continuation in
            let wait = held.withLock { state -> Bool in
                if state.closed { state.waiting.append(continuation) }
                return state.closed
            }
            if !wait { continuation.resume() }
        }
        let attempt = QueryAttempt(
            name: question.name, type: question.type, server: "test", transport: .udp, milliseconds: 1, rcode: "NOERROR")
        guard var message = replies.withLock({ $0[Self.key(question.name, question.type)] }) else {
            throw DNSTransportError(code: .timeout, message: "no answer", attempts: [attempt])
        }
        message.questions = [question]
        return DNSExchange(
            message: message, attempts: [attempt], authenticatedTransport: authenticated.load(ordering: .relaxed))
    }
}

func reply(_ answer: [ResourceRecord], authority: [ResourceRecord] = [], additional: [ResourceRecord] = [], rcode: RCode = .noError)
    -> DNSMessage
{
    ReplyScrubberTests.message(answer: answer, authority: authority, additional: additional, rcode: rcode)
}

@Suite("The resolution walk")
struct ResolutionWalkTests {
    func makeResolver(
        _ transport: ReplyTransport, clock: ManualClock = ManualClock(), limits: QueryLimits = QueryLimits(),
        maximumPlanTargets: Int = 16
    ) -> DNSResolver {
        DNSResolver(
            transport: transport,
            configuration: .init(limits: limits, maximumPlanTargets: maximumPlanTargets), clock: clock)
    }

    /// Waits (bounded) until `condition` holds; the refreshes run in tasks of their own.
    func eventually(_ condition: () -> Bool) async throws {
        for _ in 0..<300 where !condition() { try await Task.sleep(for: .milliseconds(10)) }
    }

    // MARK: - Scrubbing on store

    @Test func aPollutedReplyCachesOnlyTheAnswer() async throws {
        let transport = ReplyTransport()
        transport.set(
            "www.example.", .a,
            reply(
                [aRecord("www.example.", [192, 0, 2, 1]), aRecord("victim.example.", [6, 6, 6, 6])],
                authority: [ReplyScrubberTests.soa("attacker.example.", ttl: 172_800, minimum: 172_800)],
                additional: [aRecord("bank.example.", [6, 6, 6, 7])]))
        let resolver = makeResolver(transport)
        let answer = try await resolver.resolveAddresses("www.example.", family: .ipv4)
        #expect(answer.addresses == ["192.0.2.1"])
        #expect(resolver.cache.count == 1)
        #expect(resolver.cache.lookup(CacheKey(name: "victim.example.", type: 1)) == .miss)
        #expect(resolver.cache.lookup(CacheKey(name: "bank.example.", type: 1)) == .miss)
        #expect(resolver.scrubbedRecordCount == 2)
        // The stub's view of the entry holds exactly the one record.
        let stub = try #require(resolver.cachedRecords("www.example.", type: .a))
        #expect(stub.answer.payload?.records == [aRecord("www.example.", [192, 0, 2, 1])])
    }

    @Test func aForeignSOADoesNotSetTheNegativeTTL() async throws {
        let clock = ManualClock()
        let transport = ReplyTransport()
        transport.set(
            "gone.example.", .a,
            reply([], authority: [ReplyScrubberTests.soa("attacker.example.", ttl: 172_800, minimum: 172_800)], rcode: .nxDomain))
        let resolver = makeResolver(transport, clock: clock)
        await #expect(throws: ResolverError.self) { try await resolver.resolveAddresses("gone.example.", family: .ipv4) }
        // Cached for the 30 s of a negative answer without SOA, not two days.
        #expect(resolver.cache.lookup(CacheKey(name: "gone.example.", type: 1)).ttl == 30)
    }

    @Test func aPlantedPersistedEntryIsDropped() throws {
        let key = CacheKey(name: "www.example.", type: 1)
        let honest = CacheAnswer<CachedRRset>.positive(CachedRRset(records: [aRecord("www.example.", [192, 0, 2, 1])]))
        let planted = CacheAnswer<CachedRRset>.positive(
            CachedRRset(records: [aRecord("www.example.", [192, 0, 2, 1]), aRecord("victim.example.", [6, 6, 6, 6])]))
        let otherName = CacheAnswer<CachedRRset>.positive(CachedRRset(records: [aRecord("victim.example.", [6, 6, 6, 6])]))
        let foreignSOA = CacheAnswer<CachedRRset>.nxdomain(
            CachedRRset(records: [], authority: [ReplyScrubberTests.soa("attacker.example.")]))
        #expect(OptimisticCache.entryBelongsToKey(key, honest))
        #expect(!OptimisticCache.entryBelongsToKey(key, planted))
        #expect(!OptimisticCache.entryBelongsToKey(key, otherName))
        #expect(!OptimisticCache.entryBelongsToKey(key, foreignSOA))
        #expect(OptimisticCache.entryBelongsToKey(key, .nxdomain(nil)))

        // Through the file: the planted entries are counted invalid and not loaded.
        let clock = ManualClock()
        let cache = OptimisticCache<CachedRRset>(clock: clock)
        cache.store(honest, for: key, ttl: 300)
        cache.store(planted, for: CacheKey(name: "planted.example.", type: 1), ttl: 300)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("walk-\(UUID()).json")
        defer { try? FileManager.default.removeItem(at: file) }
        try cache.save(to: file)
        let restored = OptimisticCache<CachedRRset>(clock: clock)
        let result = try restored.load(from: file, accepting: OptimisticCache.entryBelongsToKey)
        #expect(result.loaded == 1 && result.invalid == 1)
        #expect(restored.lookup(key).answer == honest)
    }

    @Test func aCachedWalkCountsItsHitsOnlyWhenTheCallerUsesThem() async throws {
        let transport = ReplyTransport([
            "www.example. A": reply([cnameRecord("www.example.", "cdn.example."), aRecord("cdn.example.", [192, 0, 2, 3])])
        ])
        let resolver = makeResolver(transport)
        _ = try await resolver.resolveAddresses("www.example.", family: .ipv4)
        let before = resolver.cache.statistics.hits
        var trace = WalkTrace(keepingSteps: true)
        let result = try #require(resolver.cachedWalk("www.example.", type: .a, options: WalkOptions(), trace: &trace))
        guard case .records(let records, let owner) = result.answer else { Issue.record("no records"); return }
        #expect(owner == "cdn.example." && records.count == 1 && result.cnames == ["cdn.example."])
        #expect(trace.steps.count == 1)
        #expect(resolver.cache.statistics.hits == before)
        resolver.countHits(trace)
        #expect(resolver.cache.statistics.hits == before + 1)
    }

    /// The stub's names are normalised already (`WalkOptions.nameIsNormalized`): its walks and cache keys take them
    /// as they are, and they share entries with the API's, which normalises whatever text it gets.
    @Test func aNormalisedNameSharesTheCacheWithTheSameNameAsWritten() async throws {
        let transport = ReplyTransport(["www.example. A": reply([aRecord("www.example.", [192, 0, 2, 7])])])
        let resolver = makeResolver(transport)
        var trace = WalkTrace(keepingSteps: true)
        let normalized = WalkOptions(nameIsNormalized: true)
        let fetched = try await resolver.walk("www.example.", type: .a, options: normalized, trace: &trace)
        guard case .records(let records, let owner) = fetched.answer else { Issue.record("no records"); return }
        #expect(owner == "www.example." && records.count == 1)
        // Written otherwise, through the API's path: the same entry, nothing asked again.
        var hit = WalkTrace(keepingSteps: true)
        let written = try await resolver.walk("WWW.Example", type: .a, options: WalkOptions(), trace: &hit)
        guard case .records(let again, _) = written.answer else { Issue.record("no records"); return }
        #expect(again == records)
        var cached = WalkTrace(keepingSteps: true)
        #expect(resolver.cachedWalk("www.example.", type: .a, options: normalized, trace: &cached) != nil)
        #expect(transport.count("www.example.", .a) == 1)
        #expect(resolver.refusalNow("www.example.", type: .a, client: nil, nameIsNormalized: true) == nil)
    }

    // MARK: - One in-flight table: coalescing and bounds

    @Test func theCoalescingKeyIncludesTheDOBit() async throws {
        let transport = ReplyTransport(["signed.example. A": reply([aRecord("signed.example.", [192, 0, 2, 2])])])
        transport.close()
        let resolver = makeResolver(transport)
        async let plain = resolver.fetchRecords("signed.example.", type: .a)
        async let withDO = resolver.fetchRecords("signed.example.", type: .a, dnssecOK: true)
        try await eventually { transport.questions.count == 2 }
        transport.open()
        _ = try await (plain, withDO)
        #expect(Set(transport.questions.map(\.dnssecOK)) == [false, true])
    }

    @Test func aClientAtItsLimitIsRefusedWhileOthersAndCacheHitsAreServed() async throws {
        let transport = ReplyTransport()
        for index in 0..<4 { transport.set("n\(index).example.", .a, reply([aRecord("n\(index).example.", [192, 0, 2, 1])])) }
        transport.set("cached.example.", .a, reply([aRecord("cached.example.", [192, 0, 2, 9])]))
        let resolver = makeResolver(transport, limits: QueryLimits(maxQueries: 3, maxQueriesPerClient: 2))
        _ = try await resolver.resolveAddresses("cached.example.", family: .ipv4)
        transport.close()
        let greedy = QueryClient.uid(1000)
        let first = Task { try await DNSResolver.$currentClient.withValue(greedy) { try await resolver.resolveAddresses("n0.example.", family: .ipv4) } }
        let second = Task { try await DNSResolver.$currentClient.withValue(greedy) { try await resolver.resolveAddresses("n1.example.", family: .ipv4) } }
        try await eventually { resolver.inflightStatistics.inflight == 2 }
        // Its third distinct question is refused at once, with the limit named.
        await #expect {
            try await DNSResolver.$currentClient.withValue(greedy) { try await resolver.resolveAddresses("n2.example.", family: .ipv4) }
        } throws: { error in
            (error as? ResolverError)?.code == .tooManyQueries && (error as? ResolverError)?.reason?.contains("uid 1000") == true
        }
        // A front door can tell without a task: the new name is refused, the one in flight would be joined.
        #expect(resolver.refusalNow("n2.example.", type: .a, client: greedy)?.code == .tooManyQueries)
        #expect(resolver.refusalNow("n0.example.", type: .a, client: greedy) == nil)
        #expect(resolver.refusalNow("n2.example.", type: .a, client: .uid(1001)) == nil)
        // Joining a question already in flight costs nothing.
        let joined = Task { try await DNSResolver.$currentClient.withValue(greedy) { try await resolver.resolveAddresses("n0.example.", family: .ipv4) } }
        // Another client still gets a place; then the global limit (3) is reached for everyone.
        let other = Task { try await DNSResolver.$currentClient.withValue(.uid(1001)) { try await resolver.resolveAddresses("n2.example.", family: .ipv4) } }
        try await eventually { resolver.inflightStatistics.inflight == 3 }
        await #expect {
            try await DNSResolver.$currentClient.withValue(.uid(1002)) { try await resolver.resolveAddresses("n3.example.", family: .ipv4) }
        } throws: { error in (error as? ResolverError)?.code == .tooManyQueries }
        // A cached name is answered all along.
        #expect(try await resolver.resolveAddresses("cached.example.", family: .ipv4).source == .cache)
        transport.open()
        for task in [first, second, joined, other] { #expect(try await task.value.addresses == ["192.0.2.1"]) }
        let statistics = resolver.inflightStatistics
        #expect(statistics.inflight == 0 && statistics.peak == 3)
        #expect(statistics.refusedPerClient == 2 && statistics.refusedGlobal == 1 && statistics.coalesced >= 1)
        // After the flood, the refused names resolve normally.
        #expect(try await resolver.resolveAddresses("n3.example.", family: .ipv4).addresses == ["192.0.2.1"])
    }

    @Test func aConnectionPlanLooksUpAtMostItsTargetLimit() async throws {
        let transport = ReplyTransport()
        // 40 bindings, each naming another target without hints.
        var bindings: [ResourceRecord] = []
        for index in 0..<40 {
            bindings.append(httpsRecord("many.example.", priority: UInt16(index + 1), target: "t\(index).example.", alpn: ["h2"]))
            transport.set("t\(index).example.", .a, reply([aRecord("t\(index).example.", [192, 0, 2, UInt8(index)])]))
            transport.set("t\(index).example.", .aaaa, reply([]))
        }
        transport.set("many.example.", .https, reply(bindings))
        transport.set("many.example.", .a, reply([aRecord("many.example.", [192, 0, 2, 200])]))
        transport.set("many.example.", .aaaa, reply([]))
        let resolver = makeResolver(transport, maximumPlanTargets: 16)
        let plan = try await resolver.connectionPlan(host: "many.example")
        let targetsAsked = Set(transport.questions.map(\.name).filter { $0.hasPrefix("t") })
        #expect(targetsAsked.count == 16)
        // The highest-priority targets are the ones looked up.
        #expect(targetsAsked.contains("t0.example.") && targetsAsked.contains("t15.example.") && !targetsAsked.contains("t16.example."))
        #expect(plan.plan.endpoints.contains { $0.address == "192.0.2.0" })
    }

    // MARK: - Special-use names

    @Test(arguments: [
        ("localhost.", RRType.a, ["127.0.0.1"]), ("app.localhost.", .aaaa, ["::1"]), ("localhost.", .aaaa, ["::1"]),
    ])
    func localhostIsLoopbackAndNeverForwarded(name: String, type: RRType, expected: [String]) async throws {
        let transport = ReplyTransport()
        let resolver = makeResolver(transport)
        let answer = try await resolver.resolveAddresses(name, family: type == .a ? .ipv4 : .ipv6)
        #expect(answer.addresses == expected)
        #expect(transport.questions.isEmpty)
    }

    @Test(arguments: ["invalid.", "x.invalid.", "onion.", "abcdefghijklmnop.onion."])
    func invalidAndOnionDoNotExistAndAreNeverForwarded(name: String) async throws {
        let transport = ReplyTransport()
        let resolver = makeResolver(transport)
        await #expect { try await resolver.resolveAddresses(name) } throws: { ($0 as? ResolverError)?.code == .noSuchName }
        #expect(resolver.cachedRecords(name, type: .a)?.answer == .nxdomain(nil))
        #expect(transport.questions.isEmpty)
    }

    @Test func resolverArpaIsNoDataHereAndNeverForwarded() async throws {
        let transport = ReplyTransport()
        let resolver = makeResolver(transport)
        let svcb = try await resolver.resolveSVCB("_dns.resolver.arpa")
        #expect(svcb.bindings.isEmpty)
        #expect(try await resolver.fetchRecords("resolver.arpa.", type: .soa).answer == .nodata(nil))
        #expect(transport.questions.isEmpty)
        #expect(SpecialUseNames.kind(of: "notresolver.arpa.") == nil)
        #expect(SpecialUseNames.kind(of: "1.2.0.192.in-addr.arpa.") == nil)
        #expect(SpecialUseNames.kind(of: "my\\.localhost.example.") == nil)
    }

    @Test(arguments: [
        ("localhost.", SpecialUseNames.Kind.loopback), ("a.b.localhost.", .loopback), ("invalid.", .nonexistent),
        ("x.onion.", .nonexistent), ("resolver.arpa.", .noData), ("_dns.resolver.arpa.", .noData),
    ])
    func specialUseNamesByTheirLastLabels(name: String, kind: SpecialUseNames.Kind) {
        #expect(SpecialUseNames.kind(of: name) == kind)
    }

    @Test(arguments: [
        "", ".", "localhost", "notlocalhost.", "localhost.example.", "xresolver.arpa.", "arpa.", "resolver.x.arpa.",
        "in-addr.arpa.", "a\\.onion.", "onio.", "localhosts.", "invalid.x.",
    ])
    func ordinaryNamesAreNotSpecial(name: String) {
        #expect(SpecialUseNames.kind(of: name) == nil)
    }

    // MARK: - Optimistic DNS (draft-gakiwate-dnsop-optimistic-dns)

    @Test func anExpiredNegativeAnswerWaitsForTheNetwork() async throws {
        let clock = ManualClock()
        let transport = ReplyTransport(["new.example. A": reply([], authority: [ReplyScrubberTests.soa("example.", ttl: 60, minimum: 60)], rcode: .nxDomain)])
        let resolver = makeResolver(transport, clock: clock)
        await #expect(throws: ResolverError.self) { try await resolver.resolveAddresses("new.example.", family: .ipv4) }
        clock.advance(61)
        // The name has been created meanwhile: the lookup must see it, not the expired NXDOMAIN.
        transport.set("new.example.", .a, reply([aRecord("new.example.", [192, 0, 2, 44])]))
        let answer = try await resolver.resolveAddresses("new.example.", family: .ipv4)
        #expect(answer.addresses == ["192.0.2.44"])
        #expect(answer.source == .network)
        #expect(transport.count("new.example.", .a) == 2)
    }

    @Test func anExpiredNegativeAnswerStandsInWhenTheNetworkFails() async throws {
        let clock = ManualClock()
        let transport = ReplyTransport(["gone.example. A": reply([], authority: [ReplyScrubberTests.soa("example.", ttl: 60, minimum: 60)], rcode: .nxDomain)])
        let resolver = makeResolver(transport, clock: clock)
        _ = try? await resolver.resolveAddresses("gone.example.", family: .ipv4)
        clock.advance(61)
        transport.remove("gone.example.", .a)  // the upstream now times out
        var trace = WalkTrace(keepingSteps: true)
        let result = try await resolver.walk("gone.example.", type: .a, options: WalkOptions(), trace: &trace)
        guard case .nxdomain = result.answer else { Issue.record("expected the stale NXDOMAIN, got \(result.answer)"); return }
        #expect(Array(trace.steps).map(\.source) == [.expiredCache])
    }

    @Test func anExpiredCNAMERestartsTheRefreshAtThatName() async throws {
        let clock = ManualClock()
        let transport = ReplyTransport([
            "www.example. A": reply([cnameRecord("www.example.", "cdn.example.net.", ttl: 10)]),
            "cdn.example.net. A": reply([aRecord("cdn.example.net.", [192, 0, 2, 1], ttl: 10)]),
        ])
        let resolver = makeResolver(transport, clock: clock)
        _ = try await resolver.resolveAddresses("www.example.", family: .ipv4)
        #expect(transport.count("www.example.", .a) == 1 && transport.count("cdn.example.net.", .a) == 1)
        clock.advance(11)
        // The alias moved: the refresh must start at www (the first expired CNAME) and follow the new chain,
        // not refresh cdn on its own.
        transport.set("www.example.", .a, reply([cnameRecord("www.example.", "cdn2.example.net.")]))
        transport.set("cdn2.example.net.", .a, reply([aRecord("cdn2.example.net.", [192, 0, 2, 2])]))
        let stale = try await resolver.resolveAddresses("www.example.", family: .ipv4)
        #expect(stale.source == .expiredCache)
        #expect(stale.addresses == ["192.0.2.1"])
        try await eventually { transport.count("cdn2.example.net.", .a) == 1 }
        #expect(transport.count("www.example.", .a) == 2)
        #expect(transport.count("cdn.example.net.", .a) == 1)
        #expect(transport.count("cdn2.example.net.", .a) == 1)
        let fresh = try await resolver.resolveAddresses("www.example.", family: .ipv4)
        #expect(fresh.source == .cache && fresh.addresses == ["192.0.2.2"])
    }

    @Test func moreGetsConfirmedWhenNothingChangedAndTheNewDataWhenItDid() async throws {
        let clock = ManualClock()
        let transport = ReplyTransport(["same.example. A": reply([aRecord("same.example.", [192, 0, 2, 1], ttl: 10)])])
        let resolver = makeResolver(transport, clock: clock)
        _ = try await resolver.resolveAddresses("same.example.", family: .ipv4)
        clock.advance(11)
        var replies: [AddressResolution] = []
        for try await update in resolver.resolveAddressesUpdates("same.example.", family: .ipv4) { replies.append(update) }
        #expect(replies.map(\.source) == [.expiredCache, .network])
        #expect(replies.map(\.refresh) == [nil, .confirmed])
        #expect(replies[1].addresses == ["192.0.2.1"])

        clock.advance(11)
        transport.set("same.example.", .a, reply([aRecord("same.example.", [192, 0, 2, 99])]))
        replies = []
        for try await update in resolver.resolveAddressesUpdates("same.example.", family: .ipv4) { replies.append(update) }
        #expect(replies.map(\.refresh) == [nil, .changed])
        #expect(replies.map(\.addresses) == [["192.0.2.1"], ["192.0.2.99"]])
        // A fresh answer is the only one.
        replies = []
        for try await update in resolver.resolveAddressesUpdates("same.example.", family: .ipv4) { replies.append(update) }
        #expect(replies.map(\.source) == [.cache])
    }

    @Test func moreWithinTheRecheckIntervalEndsAfterTheStaleAnswerAndAsksNobody() async throws {
        let clock = ManualClock()
        let transport = ReplyTransport(["flaky.example. A": reply([aRecord("flaky.example.", [192, 0, 2, 1], ttl: 10)])])
        let resolver = makeResolver(transport, clock: clock)
        _ = try await resolver.resolveAddresses("flaky.example.", family: .ipv4)
        clock.advance(11)
        transport.remove("flaky.example.", .a)  // the upstream now times out
        var first: [AddressResolution] = []
        do {
            for try await update in resolver.resolveAddressesUpdates("flaky.example.", family: .ipv4) { first.append(update) }
        } catch {}
        #expect(first.map(\.source) == [.expiredCache])
        let asked = transport.count("flaky.example.", .a)
        // RFC 8767 §5: no refresh before refresh-retry (30 s) after a failure; a `more` call does not bypass it.
        var second: [AddressResolution] = []
        for try await update in resolver.resolveAddressesUpdates("flaky.example.", family: .ipv4) { second.append(update) }
        #expect(second.map(\.source) == [.expiredCache])
        #expect(transport.count("flaky.example.", .a) == asked)
    }

    @Test func moreOnHTTPSSaysConfirmed() async throws {
        let clock = ManualClock()
        let transport = ReplyTransport([
            "h3.example. HTTPS": reply([httpsRecord("h3.example.", priority: 1, target: ".", alpn: ["h3"], ttl: 10)])
        ])
        let resolver = makeResolver(transport, clock: clock)
        _ = try await resolver.resolveHTTPS("h3.example")
        clock.advance(11)
        var replies: [HTTPSResolution] = []
        for try await update in resolver.resolveHTTPSUpdates("h3.example") { replies.append(update) }
        #expect(replies.map(\.refresh) == [nil, .confirmed])
        #expect(replies.allSatisfy { $0.h3 })
    }

    @Test func maxStaleAcceptsUpToAWeek() {
        #expect(CachePolicy.maximumMaxStale == 604_800)
        #expect(CachePolicy().maxStale == 86_400)
        #expect(!CachePolicy().serveStaleNegative)
    }
}
