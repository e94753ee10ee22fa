import DNSCore

/// One cached or fetched answer for exactly (name, type, class), as the DNS stub serves it.
public struct RecordAnswer: Sendable {
    /// The answer: records (CNAMEs included) or a negative answer with its SOA.
    public var answer: CacheAnswer<CachedRRset>
    /// The TTL to put on every record: remaining seconds when fresh, the stale TTL when stale, the received
    /// minimum when just fetched.
    public var ttl: UInt32
    /// Where it came from.
    public var source: ResolutionSource
    /// How long ago it expired, when `source` is `expiredCache`.
    public var staleSeconds: UInt32?
    /// Upstream queries made for it.
    public var attempts: [QueryAttempt]
}

extension DNSResolver {
    /// The cached answer for (name, type, class), without waiting: the hot path of the DNS stub.
    ///
    /// A fresh entry answers with its remaining TTL. An expired one (within the maximum stale time, unless
    /// `optimistic` is false or the domain opted out) answers at once with the stale TTL, and when this caller
    /// is elected, one refresh is started in the background (RFC 8767). Nil means: call
    /// ``fetchRecords(_:type:class:dnssecOK:)``.
    /// - Parameter name: absolute, lowercased presentation name (``DNSName/text``).
    public func cachedRecords(
        _ name: String, type: RRType, class rrClass: RRClass = .in, optimistic: Bool = true, dnssecOK: Bool = false
    ) -> RecordAnswer? {
        var refreshes = PendingRefreshes()
        let answer = cachedRecords(
            name, type: type, class: rrClass, optimistic: optimistic, dnssecOK: dnssecOK, refreshes: &refreshes)
        startRefreshes(refreshes)
        return answer
    }

    /// ``cachedRecords(_:type:class:optimistic:dnssecOK:)`` that hands the refresh it was elected to run to the
    /// caller instead of starting it: the caller sends the stale answer first, then calls ``startRefreshes(_:)``
    /// (docs/DESIGN.md: a stale answer is written before any work for its refresh begins).
    public func cachedRecords(
        _ name: String, type: RRType, class rrClass: RRClass = .in, optimistic: Bool = true, dnssecOK: Bool = false,
        refreshes: inout PendingRefreshes
    ) -> RecordAnswer? {
        if let special = SpecialUseNames.answer(name, type: type, class: rrClass) {
            return RecordAnswer(answer: special, ttl: SpecialUseNames.ttl, source: .cache, staleSeconds: nil, attempts: [])
        }
        let key = CacheKey(name: name, type: type.rawValue, dnsClass: rrClass.rawValue)
        let lookup = cache.lookup(key, optimistic: optimistic)
        // An entry fetched without DO lacks the signatures a DO client asks for: fetch it again, with DO.
        if dnssecOK, let answer = lookup.answer, !(answer.payload?.dnssecOK ?? false) { return nil }
        switch lookup {
        case .fresh(let answer, let remaining):
            return RecordAnswer(answer: answer, ttl: remaining, source: .cache, staleSeconds: nil, attempts: [])
        case .stale(let answer, let staleSeconds, let answerTTL, let shouldRefresh):
            if shouldRefresh {
                refreshes.items.append(.init(key: key, name: name, type: type, rrClass: rrClass, dnssecOK: dnssecOK))
            }
            return RecordAnswer(
                answer: answer, ttl: answerTTL, source: .expiredCache, staleSeconds: staleSeconds, attempts: [])
        case .miss:
            return nil
        }
    }

    /// Asks the upstreams for (name, type, class), coalesced with an identical query in flight, and caches the
    /// answer (negative ones with their SOA, RFC 2308).
    /// - Throws: ``ResolverError``: `timeout` (no upstream answered), `upstreamFailure` (with the rcode),
    ///   `invalidName`.
    public func fetchRecords(_ name: String, type: RRType, class rrClass: RRClass = .in, dnssecOK: Bool = false)
        async throws(ResolverError) -> RecordAnswer
    {
        if let special = SpecialUseNames.answer(name, type: type, class: rrClass) {
            return RecordAnswer(answer: special, ttl: SpecialUseNames.ttl, source: .cache, staleSeconds: nil, attempts: [])
        }
        let key = CacheKey(name: name, type: type.rawValue, dnsClass: rrClass.rawValue)
        let task = upstreamTask(
            for: key, name: name, type: type, class: rrClass, dnssecOK: dnssecOK, isRefresh: false,
            client: Self.currentClient)
        switch await task.value {
        case .answer(let answer, let ttl, let attempts):
            return RecordAnswer(answer: answer, ttl: ttl, source: .network, staleSeconds: nil, attempts: attempts)
        case .failure(let error):
            throw error
        }
    }

    /// The upstream servers queries go to, as `ADDR:PORT` text (for error reports).
    public var upstreamDescription: String {
        (transport as? UpstreamClient)?.upstreams.map(\.description).joined(separator: ", ") ?? "upstream"
    }
}
