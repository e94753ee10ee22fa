import DNSCore
import Synchronization

/// A DNS answer cache with optimistic answers (RFC 8767 serve-stale) and negative caching (RFC 2308).
///
/// The cache is generic over the caller's parsed answer, so it knows nothing about record formats. The resolver
/// uses it like this:
///
/// ```swift
/// switch cache.lookup(key, optimistic: request.optimistic) {
/// case .fresh(let answer, let ttl):
///     reply(answer, ttl: ttl, source: .cache)
/// case .stale(let answer, let staleSeconds, let ttl, let shouldRefresh):
///     reply(answer, ttl: ttl, source: .expiredCache, staleSeconds: staleSeconds)
///     if shouldRefresh { startRefresh(key) }  // ends in store(...) or refreshFailed(key)
/// case .miss:
///     resolve from the network, then store(...)
/// }
/// ```
///
/// All methods are thread-safe; one lock guards the state and is held only for dictionary work.
public final class OptimisticCache<Value: Sendable & Codable>: Sendable {
    /// Fields in this order so the entry is 48 bytes, not 56 (an optional and a Bool last share their padding):
    /// the dictionary of 100 000 entries has 262 144 buckets.
    struct Entry {
        var answer: CacheAnswer<Value>
        /// Absolute wall-clock expiry; persisted as is.
        var expires: Double
        /// Logical time of the last store or lookup, for least-recently-used eviction.
        var lastUsed: UInt64
        /// No refresh before this time (set by a failed refresh).
        var nextRefreshAllowed: Double = -.infinity
        /// When the refresh handed out by a stale lookup started; nil when none is in flight.
        var refreshStarted: Double?
        /// Cached result of matching the key against the opt-out list; recomputed when the policy changes.
        var optedOut: Bool
    }

    struct State {
        var policy: CachePolicy
        var optOut: DomainSuffixSet
        var entries: [CacheKey: Entry] = [:]
        var tick: UInt64 = 0
        var statistics = CacheStatistics()
    }

    /// Internal so persistence stamps files with the same clock.
    let clock: any CacheClock
    private let state: Mutex<State>

    /// Creates an empty cache.
    ///
    /// - Parameters:
    ///   - policy: The staleness, TTL and size rules; RFC 8767 defaults.
    ///   - clock: The wall clock; tests pass a manual one.
    public init(policy: CachePolicy = CachePolicy(), clock: any CacheClock = SystemCacheClock()) {
        self.clock = clock
        self.state = Mutex(State(policy: policy, optOut: DomainSuffixSet(policy.optOutDomains)))
    }

    /// The rules in force.
    public var policy: CachePolicy {
        state.withLock { $0.policy }
    }

    /// Replaces the rules (on configuration reload): re-applies the opt-out list and evicts down to the new size.
    ///
    /// Entries already stored keep their expiry; new TTL clamps apply to later stores.
    public func updatePolicy(_ policy: CachePolicy) {
        let now = clock.now()
        state.withLock { state in
            state.policy = policy
            state.optOut = DomainSuffixSet(policy.optOutDomains)
            let optOut = state.optOut
            for index in state.entries.indices {
                let key = state.entries.keys[index]
                state.entries.values[index].optedOut = optOut.contains(key.name)
            }
            if state.entries.count > max(policy.maxEntries, 0) {
                Self.evict(&state, now: now, target: max(policy.maxEntries, 0))
            }
        }
    }

    /// Looks up a key and, for a stale entry, elects at most one caller to refresh it.
    ///
    /// - Parameters:
    ///   - key: The name, type and class asked for.
    ///   - optimistic: When false (the API's `optimistic: false`), a stale entry is reported as a miss; it is kept.
    ///   - counting: Whether the hit and miss counters count this lookup. A caller that may redo the lookup passes
    ///     false and reports what it used with ``countHits(fresh:stale:)``.
    ///   - electRefresh: Whether a stale entry may elect this caller to refresh it. A walk that already restarts
    ///     at an earlier expired CNAME passes false for the names behind it (draft-gakiwate-dnsop-optimistic-dns
    ///     §"CNAME Handling").
    ///   - afterFailure: The network just failed for this key: an expired negative answer may be served too
    ///     (RFC 8767 allows it then; the optimistic-DNS draft forbids it before), and no refresh is elected.
    /// - Returns: `.fresh`, `.stale` (only when optimistic and the name is not opted out; never a negative answer
    ///   unless `afterFailure`) or `.miss`.
    public func lookup(
        _ key: CacheKey, optimistic: Bool = true, counting: Bool = true, electRefresh: Bool = true,
        afterFailure: Bool = false
    ) -> CacheLookup<Value> {
        let now = clock.now()
        let unit: UInt64 = counting ? 1 : 0
        return state.withLock { state in
            guard let index = state.entries.index(forKey: key) else {
                state.statistics.misses += unit
                return .miss
            }
            state.tick &+= 1
            let entry = state.entries.values[index]
            let remaining = entry.expires - now
            if remaining > 0 {
                state.entries.values[index].lastUsed = state.tick
                state.statistics.hits += unit
                return .fresh(entry.answer, remainingTTL: wholeSeconds(remaining.rounded(.up)))
            }
            let staleFor = -remaining
            // RFC 8767 §5: past the maximum stale timer the data is not used at all.
            if staleFor > Double(state.policy.maxStale) {
                state.entries.remove(at: index)
                state.statistics.misses += unit
                return .miss
            }
            let policy = state.policy
            let negativeAllowed = afterFailure || policy.serveStaleNegative
            if !(optimistic || afterFailure) || entry.optedOut || (entry.answer.isNegative && !negativeAllowed) {
                state.statistics.misses += unit
                return .miss
            }
            // One refresh at a time per key; after a failure none before the recheck time (RFC 8767 §5).
            let refreshIdle = entry.refreshStarted.map { now - $0 >= Double(policy.refreshTimeout) } ?? true
            let shouldRefresh = electRefresh && !afterFailure && refreshIdle && now >= entry.nextRefreshAllowed
            if shouldRefresh {
                state.entries.values[index].refreshStarted = now
                state.statistics.refreshes += 1
            }
            state.entries.values[index].lastUsed = state.tick
            state.statistics.staleServed += unit
            // RFC 8767 §4: stale records go out with a TTL greater than zero (30 s recommended).
            return .stale(
                entry.answer,
                staleSeconds: wholeSeconds(staleFor),
                answerTTL: policy.staleAnswerTTL,
                shouldRefresh: shouldRefresh
            )
        }
    }

    /// Counts lookups made with `counting: false` whose answers were used.
    public func countHits(fresh: UInt64, stale: UInt64) {
        state.withLock { state in
            state.statistics.hits += fresh
            state.statistics.staleServed += stale
        }
    }

    /// Counts a lookup made with `counting: false` that missed, where the miss is then fetched.
    public func countMiss() {
        state.withLock { $0.statistics.misses += 1 }
    }

    /// Stores an answer from the network, replacing any entry for the key and ending a refresh in flight.
    ///
    /// TTLs are clamped by the policy. A TTL of 0 means "use for this transaction only" (RFC 8767 §4, amending
    /// RFC 1035 §3.2.1): nothing is cached and an existing entry for the key is removed, since the authority has
    /// just said not to reuse its data. TTLs with the high bit set count as large positive values, capped by
    /// ``CachePolicy/maxTTL`` (RFC 8767 §4, updating RFC 2181 §8).
    ///
    /// - Parameters:
    ///   - answer: The positive answer, or `.nxdomain` / `.nodata`.
    ///   - key: The name, type and class.
    ///   - ttl: For a positive answer the minimum TTL of its records; for a negative answer the RFC 2308 §5
    ///     negative TTL, `min(SOA TTL, SOA MINIMUM)`, computed by the caller.
    /// - Returns: Whether the answer was cached.
    @discardableResult
    public func store(_ answer: CacheAnswer<Value>, for key: CacheKey, ttl: UInt32) -> Bool {
        let now = clock.now()
        return state.withLock { state in
            guard let ttl = Self.effectiveTTL(ttl, negative: answer.isNegative, policy: state.policy) else {
                state.entries.removeValue(forKey: key)
                return false
            }
            return Self.insert(&state, key: key, answer: answer, expires: now + Double(ttl), now: now)
        }
    }

    /// Reports that the refresh handed out by ``lookup(_:optimistic:)`` failed (timeout, SERVFAIL, ...).
    ///
    /// The stale data stays and keeps being served; the next refresh is allowed after
    /// ``CachePolicy/refreshRetryInterval`` (RFC 8767 §5 failure recheck timer).
    public func refreshFailed(_ key: CacheKey) {
        let now = clock.now()
        state.withLock { state in
            state.statistics.refreshFailures += 1
            guard let index = state.entries.index(forKey: key) else { return }
            state.entries.values[index].refreshStarted = nil
            state.entries.values[index].nextRefreshAllowed = now + Double(state.policy.refreshRetryInterval)
        }
    }

    /// Removes entries.
    ///
    /// - Parameters:
    ///   - name: The owner name whose entries (all types and classes) go; nil removes everything.
    ///   - includingSubdomains: Also remove every name below `name`.
    /// - Returns: The number of entries removed.
    @discardableResult
    public func flush(_ name: String? = nil, includingSubdomains: Bool = false) -> Int {
        state.withLock { state in
            let before = state.entries.count
            guard let name else {
                state.entries.removeAll()
                return before
            }
            let normalized = DomainName.normalize(name)
            if includingSubdomains {
                let zone = DomainSuffixSet([normalized])
                state.entries = state.entries.filter { !zone.contains($0.key.name) }
            } else {
                state.entries = state.entries.filter { $0.key.name != normalized }
            }
            return before - state.entries.count
        }
    }

    /// Removes entries expired for longer than the maximum stale time; the daemon may call this periodically
    /// (lookups and evictions also drop them).
    ///
    /// - Returns: The number of entries removed.
    @discardableResult
    public func purgeExpired() -> Int {
        let now = clock.now()
        return state.withLock { state in
            let before = state.entries.count
            let limit = now - Double(state.policy.maxStale)
            state.entries = state.entries.filter { $0.value.expires >= limit }
            return before - state.entries.count
        }
    }

    /// The number of entries held, fresh and stale.
    public var count: Int {
        state.withLock { $0.entries.count }
    }

    /// The counters for `Daemon.Status`.
    public var statistics: CacheStatistics {
        state.withLock { state in
            var statistics = state.statistics
            statistics.entries = state.entries.count
            return statistics
        }
    }

    // MARK: - Internals shared with persistence

    /// A copy of every entry with its absolute expiry, for saving.
    func snapshot() -> [(key: CacheKey, answer: CacheAnswer<Value>, expires: Double)] {
        state.withLock { state in
            state.entries.map { (key: $0.key, answer: $0.value.answer, expires: $0.value.expires) }
        }
    }

    /// Inserts a persisted entry unless it is past the maximum stale time or the key is already cached.
    ///
    /// The expiry is capped at now + the maximum TTL, so a clock step or an edited file cannot pin data forever.
    /// - Returns: Whether it was inserted.
    func restore(key: CacheKey, answer: CacheAnswer<Value>, expires: Double) -> Bool {
        let now = clock.now()
        return state.withLock { state in
            let policy = state.policy
            guard expires.isFinite, now - expires <= Double(policy.maxStale) else { return false }
            guard state.entries[key] == nil else { return false }
            let cap = answer.isNegative ? min(policy.maxTTL, policy.maxNegativeTTL) : policy.maxTTL
            return Self.insert(&state, key: key, answer: answer, expires: min(expires, now + Double(cap)), now: now)
        }
    }

    // MARK: - Private

    /// The TTL to cache with, or nil when the answer must not be cached.
    private static func effectiveTTL(_ ttl: UInt32, negative: Bool, policy: CachePolicy) -> UInt32? {
        if ttl == 0 { return nil }
        var clamped = min(max(ttl, policy.minTTL), policy.maxTTL)
        if negative { clamped = min(clamped, policy.maxNegativeTTL) }
        return clamped == 0 ? nil : clamped
    }

    private static func insert(
        _ state: inout State,
        key: CacheKey,
        answer: CacheAnswer<Value>,
        expires: Double,
        now: Double
    ) -> Bool {
        let maxEntries = state.policy.maxEntries
        guard maxEntries > 0 else { return false }
        state.tick &+= 1
        let entry = Entry(
            answer: answer,
            expires: expires,
            lastUsed: state.tick,
            optedOut: state.optOut.contains(key.name)
        )
        if state.entries.updateValue(entry, forKey: key) == nil, state.entries.count > maxEntries {
            // Evict in batches of 1/16 so the sort is amortized over many inserts; keep the new entry.
            state.entries[key]?.lastUsed = .max
            evict(&state, now: now, target: maxEntries - max(1, maxEntries / 16))
            state.entries[key]?.lastUsed = state.tick
        }
        return true
    }

    /// Drops entries past the maximum stale time, then least recently used ones, until at most `target` remain.
    private static func evict(_ state: inout State, now: Double, target: Int) {
        let limit = now - Double(state.policy.maxStale)
        state.entries = state.entries.filter { $0.value.expires >= limit }
        let excess = state.entries.count - max(target, 0)
        guard excess > 0 else { return }
        let victims = state.entries.map { (lastUsed: $0.value.lastUsed, key: $0.key) }
            .sorted { $0.lastUsed < $1.lastUsed }
            .prefix(excess)
        for victim in victims {
            state.entries.removeValue(forKey: victim.key)
        }
    }
}
