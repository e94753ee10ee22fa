import DNSCore
import NIOCore
import NIOPosix

/// An answer taken from the cache alone, synchronously, on the caller's thread (the API's hot path).
public struct CacheHit<Value: Sendable>: Sendable {
    /// The answer, as the async method would have returned it.
    public var value: Value
    /// The cache entries used, in lookup order. While ``DNSResolver/revalidate(_:optimistic:)`` finds the same
    /// entries, the same call gets the same answer except for its per-call fields.
    public var dependencies: CacheDependencies
    /// Refreshes of the stale entries used: start them with ``DNSResolver/startRefreshes(_:)`` once the answer
    /// has been written (RFC 8767 §5: the stale answer goes out first).
    public var refreshes: PendingRefreshes
}

/// The cache entries a synchronous answer was built from, each by key and by the generation of its data.
///
/// A resolution walks from entry to entry by their data only (CNAMEs, AliasMode targets), so the same entries
/// with the same generations make the same walk and the same answer; only `source`, `ttl`, `staleSeconds` and the
/// timing differ, and ``DNSResolver/revalidate(_:optimistic:)`` computes them.
public struct CacheDependencies: Sendable, Equatable {
    struct Entry: Sendable, Equatable {
        var key: CacheKey
        var type: RRType
        var generation: UInt64
    }

    var entries: [Entry] = []

    /// The generation of an entry's data: its memo's; a negative answer without data (no SOA) has no memo, and
    /// every such answer of the same kind means the same, so the kind stands for it (memo generations start at 1
    /// and never reach these).
    static func generation(of answer: CacheAnswer<CachedRRset>) -> UInt64 {
        if let memo = answer.payload?.memo { return memo.generation }
        if case .nxdomain = answer { return .max }
        return .max - 1
    }

    /// The generations of the entries, in lookup order.
    public var generations: [UInt64] { entries.map(\.generation) }
}

/// The per-call fields of an answer whose entries are unchanged (see ``DNSResolver/revalidate(_:optimistic:)``).
public struct CacheRevalidation: Sendable {
    /// `cache`, or `expiredCache` when an entry was stale.
    public var source: ResolutionSource
    /// The smallest remaining TTL, or the stale answer TTL.
    public var ttl: UInt32
    /// How long ago the oldest stale entry expired.
    public var staleSeconds: UInt32?
    /// Refreshes this call was elected to start, after its answer is written.
    public var refreshes: PendingRefreshes
}

/// Refreshes a synchronous cache answer was elected to run (see ``CacheHit/refreshes``).
public struct PendingRefreshes: Sendable {
    struct Refresh: Sendable {
        var key: CacheKey
        var name: String
        var type: RRType
        var rrClass: RRClass = .in
        var dnssecOK = false
        /// The entry is an expired alias: after it, follow the chain it names (the CNAME restart rule).
        var followsChain = false
    }

    var items: [Refresh] = []

    /// No refresh is due.
    public var isEmpty: Bool { items.isEmpty }

    public init() {}

    /// Adds `other`'s refreshes to these.
    public mutating func merge(_ other: PendingRefreshes) {
        if !other.items.isEmpty { items.append(contentsOf: other.items) }
    }
}

extension DNSResolver {
    /// ``resolveHTTPS(_:port:optimistic:)`` answered from the cache alone; nil when a record it needs is not cached
    /// (fresh, or stale when `optimistic`) or when the answer is an error. Never waits, never queries.
    public func cachedHTTPS(_ name: String, port: Int = 443, optimistic: Bool = true) -> CacheHit<HTTPSResolution>? {
        let start = ContinuousClock.now
        guard let host = try? Self.validate(name), (1...65535).contains(port) else { return nil }
        // RFC 9460 §9.1, as in `https`.
        let queryName = port == 443 ? host : "_\(port)._https.\(host)"
        var chain = AliasChain(start: queryName, maximumHops: configuration.maximumAliasHops)
        var provenance = Provenance()
        var refreshes = PendingRefreshes()
        var dependencies = CacheDependencies()
        var result = Self.startResolution(host: host, queryName: queryName)
        do {
            while true {
                guard
                    let rrset = try cachedRecords(
                        chain.current, type: .https, optimistic: optimistic, provenance: &provenance,
                        refreshes: &refreshes, dependencies: &dependencies)
                else {
                    startRefreshes(refreshes)
                    return nil
                }
                if try bindingStep(
                    rrset, host: host, queryName: queryName, type: .https, chain: &chain, result: &result,
                    provenance: provenance)
                {
                    break
                }
            }
        } catch {
            startRefreshes(refreshes)
            return nil
        }
        Self.complete(&result, chain: chain, provenance: provenance)
        result.elapsedMilliseconds = Self.milliseconds(since: start)
        countHits(provenance)
        return CacheHit(
            value: result, dependencies: dependencies, refreshes: refreshes)
    }

    /// ``resolveAddresses(_:family:optimistic:)`` answered from the cache alone; nil as for ``cachedHTTPS(_:port:optimistic:)``.
    public func cachedAddresses(_ name: String, family: AddressFamilies = .any, optimistic: Bool = true)
        -> CacheHit<AddressResolution>?
    {
        let start = ContinuousClock.now
        guard let host = try? Self.validate(name) else { return nil }
        var refreshes = PendingRefreshes()
        var dependencies = CacheDependencies()
        var complete = true
        func addresses(_ type: RRType, skip: Bool) -> Result<([String]?, Provenance), ResolverError> {
            var provenance = Provenance()
            guard !skip, complete else { return .success((nil, provenance)) }
            let rrset = try? cachedRecords(
                host, type: type, optimistic: optimistic, provenance: &provenance, refreshes: &refreshes,
                dependencies: &dependencies)
            guard let rrset else {
                complete = false
                return .success((nil, provenance))
            }
            return .success((Self.addressList(rrset, type: type), provenance))
        }
        let six = addresses(.aaaa, skip: family == .ipv4)
        let four = addresses(.a, skip: family == .ipv6)
        guard complete, let (found, provenance) = try? Self.combine(six: six, four: four, family: family),
            let resolution = try? Self.addressResolution(host, found, provenance, since: start)
        else {
            startRefreshes(refreshes)
            return nil
        }
        countHits(provenance)
        return CacheHit(
            value: resolution, dependencies: dependencies, refreshes: refreshes)
    }

    /// The per-call fields of an answer built from `dependencies`, when every entry is still cached (fresh, or
    /// stale when `optimistic`) with the same data; nil otherwise (then resolve again). Like a hit, it elects the
    /// refreshes of stale entries and counts the lookups only when it answers.
    public func revalidate(_ dependencies: CacheDependencies, optimistic: Bool = true) -> CacheRevalidation? {
        var ttl = UInt32.max
        var staleSeconds: UInt32?
        var staleCount: UInt64 = 0
        var refreshes = PendingRefreshes()
        for dependency in dependencies.entries {
            let lookup = cache.lookup(dependency.key, optimistic: optimistic, counting: false)
            let answer: CacheAnswer<CachedRRset>
            switch lookup {
            case .fresh(let fresh, let remaining):
                answer = fresh
                ttl = min(ttl, remaining)
            case .stale(let stale, let seconds, let answerTTL, let shouldRefresh):
                answer = stale
                ttl = min(ttl, answerTTL)
                staleSeconds = max(staleSeconds ?? 0, seconds)
                staleCount += 1
                if shouldRefresh {
                    refreshes.items.append(.init(key: dependency.key, name: dependency.key.name, type: dependency.type))
                }
            case .miss:
                startRefreshes(refreshes)
                return nil
            }
            guard CacheDependencies.generation(of: answer) == dependency.generation else {
                startRefreshes(refreshes)
                return nil
            }
        }
        cache.countHits(fresh: UInt64(dependencies.entries.count) - staleCount, stale: staleCount)
        return CacheRevalidation(
            source: staleCount > 0 ? .expiredCache : .cache, ttl: ttl == .max ? 0 : ttl, staleSeconds: staleSeconds,
            refreshes: refreshes)
    }

    /// Counts the cache lookups of a ``cachedWalk(_:type:class:options:trace:)`` whose answer was used (it looks
    /// up uncounted, since a caller may drop the hit and walk again).
    public func countHits(_ trace: WalkTrace) {
        countHits(trace.provenance)
    }

    /// Counts the lookups of a hit that is answered (they were made uncounted).
    private func countHits(_ provenance: Provenance) {
        let stale = UInt64(provenance.staleKeys.count)
        cache.countHits(fresh: UInt64(provenance.cacheLookups) - stale, stale: stale)
    }

    /// Starts the refreshes a cache answer was elected to run: the one "after the reply is written" hook of every
    /// writer (the stub's UDP worker and TCP handler, the varlink connection after its flush). Call it once the
    /// stale answer is on its way (RFC 8767 §5; DESIGN: a stale answer is written before any refresh work begins).
    ///
    /// The work begins ``refreshDelay`` later, on an event loop (the caller's, when it is one): a written answer is
    /// not yet a read one. The reply has just woken the client, and where client and daemon share a CPU the kernel
    /// would often run the refresh's task, socket and query (200-400 µs after an idle period, measured with
    /// `perf sched timehist`) before the client reads its answer. The refresh's own answer is an upstream round
    /// trip away, so the delay costs it nothing that shows; a timer on the loop wakes nothing now. The stub's UDP
    /// workers are ``IOLoop``s, not NIO's: a timer on one of NIO's loops from there would wake that loop's thread
    /// at the write, the very thing the delay avoids, so they keep the timer themselves (``IOLoop/after(_:_:)``,
    /// whose millisecond resolution starts the refreshes within a millisecond; BENCHMARKS.md, round 14).
    public func startRefreshes(_ refreshes: PendingRefreshes) {
        guard !refreshes.isEmpty else { return }
        if let loop = IOLoop.current {
            loop.after(Self.refreshDelay) { self.beginRefreshes(refreshes) }
            return
        }
        let loop = MultiThreadedEventLoopGroup.currentEventLoop ?? MultiThreadedEventLoopGroup.singleton.next()
        loop.scheduleTask(in: Self.refreshDelay) { self.beginRefreshes(refreshes) }
    }

    /// How long after its stale answer is written a refresh begins (see ``startRefreshes(_:)``).
    public static let refreshDelay = TimeAmount.microseconds(250)

    func beginRefreshes(_ refreshes: PendingRefreshes) {
        for refresh in refreshes.items {
            let task = upstreamTask(
                for: refresh.key, name: refresh.name, type: refresh.type, class: refresh.rrClass,
                dnssecOK: refresh.dnssecOK, isRefresh: true)
            if refresh.followsChain { refreshChain(refresh, first: task) }
        }
    }

    /// `records` from the cache alone (the one walk): nil when an entry on the way is missing.
    private func cachedRecords(
        _ name: String, type: RRType, optimistic: Bool, provenance: inout Provenance,
        refreshes: inout PendingRefreshes, dependencies: inout CacheDependencies
    ) throws(ResolverError) -> RRsetResult? {
        var trace = WalkTrace(keepingSteps: false)
        trace.provenance = provenance
        trace.refreshes = refreshes
        trace.dependencies = dependencies
        defer {
            provenance = trace.provenance
            refreshes = trace.refreshes
            dependencies = trace.dependencies
        }
        return cachedWalk(name, type: type, options: WalkOptions(optimistic: optimistic), trace: &trace)
    }
}
