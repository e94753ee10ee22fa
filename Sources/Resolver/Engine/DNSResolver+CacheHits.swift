/// An answer taken from the cache alone, synchronously, on the caller's thread (the API's hot path).
public struct CacheHit<Value: Sendable>: Sendable {
    /// The answer, as the async method would have returned it.
    public var value: Value
    /// The memos of the cache entries used, in lookup order; nil for a negative entry without data. An encoding
    /// of `value` may be kept in the first one, tagged with the generations of all of them.
    public var memos: [CacheEntryMemo?]
    /// Refreshes of the stale entries used: start them with ``DNSResolver/startRefreshes(_:)`` once the answer
    /// has been written (RFC 8767 §5: the stale answer goes out first).
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
        var result = Self.startResolution(host: host, queryName: queryName)
        do {
            while true {
                guard
                    let rrset = try cachedRecords(
                        chain.current, type: .https, optimistic: optimistic, provenance: &provenance,
                        refreshes: &refreshes)
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
        return CacheHit(value: result, memos: provenance.memos, refreshes: refreshes)
    }

    /// ``resolveAddresses(_:family:optimistic:)`` answered from the cache alone; nil as for ``cachedHTTPS(_:port:optimistic:)``.
    public func cachedAddresses(_ name: String, family: AddressFamilies = .any, optimistic: Bool = true)
        -> CacheHit<AddressResolution>?
    {
        let start = ContinuousClock.now
        guard let host = try? Self.validate(name) else { return nil }
        var refreshes = PendingRefreshes()
        var complete = true
        func addresses(_ type: RRType, skip: Bool) -> Result<([String]?, Provenance), ResolverError> {
            var provenance = Provenance()
            guard !skip, complete else { return .success((nil, provenance)) }
            let rrset = try? cachedRecords(
                host, type: type, optimistic: optimistic, provenance: &provenance, refreshes: &refreshes)
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
        return CacheHit(value: resolution, memos: provenance.memos, refreshes: refreshes)
    }

    /// Counts the lookups of a hit that is answered (they were made uncounted).
    private func countHits(_ provenance: Provenance) {
        let stale = UInt64(provenance.staleKeys.count)
        cache.countHits(fresh: UInt64(provenance.memos.count) - stale, stale: stale)
    }

    /// Starts the refreshes a synchronous cache answer was elected to run.
    public func startRefreshes(_ refreshes: PendingRefreshes) {
        for refresh in refreshes.items {
            _ = upstreamTask(
                for: refresh.key, name: refresh.name, type: refresh.type, class: refresh.rrClass,
                dnssecOK: refresh.dnssecOK, isRefresh: true)
        }
    }

    /// `records` from the cache alone: nil when an entry on the way is missing.
    private func cachedRecords(
        _ name: String, type: RRType, optimistic: Bool, provenance: inout Provenance,
        refreshes: inout PendingRefreshes
    ) throws(ResolverError) -> RRsetResult? {
        var chain = AliasChain(start: name, maximumHops: configuration.maximumAliasHops)
        while true {
            let key = CacheKey(name: chain.current, type: type.rawValue)
            // Not counted yet: when the hit is abandoned, the async path looks the same keys up again.
            let lookup = cache.lookup(key, optimistic: optimistic, counting: false)
            guard let entry = Self.account(lookup, key: key, provenance: &provenance) else { return nil }
            if lookup.shouldRefresh { refreshes.items.append(.init(key: key, name: chain.current, type: type)) }
            if let result = try cnameStep(entry, name: name, type: type, chain: &chain, provenance: provenance) {
                return result
            }
        }
    }
}
