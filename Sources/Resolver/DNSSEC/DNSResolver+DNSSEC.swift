import DNSCore

extension DNSResolver: DNSSECFetcher {
    /// DS and DNSKEY for the validator: a fresh cache entry fetched with DO, or the one in-flight upstream query
    /// (coalesced with any other asking the same), whose answer is validated and cached on store.
    func dnssecFetch(_ name: String, type: RRType) async -> CacheAnswer<CachedRRset>? {
        let key = CacheKey(name: name, type: type.rawValue, dnsClass: RRClass.in.rawValue)
        if case .fresh(let answer, _) = cache.lookup(key, optimistic: false, counting: false, electRefresh: false),
            answer.payload?.dnssecOK ?? false
        {
            return answer
        }
        let task = upstreamTask(for: key, name: name, type: type, dnssecOK: true, isRefresh: false)
        guard case .answer(let answer, _, _) = await task.value else { return nil }
        return answer
    }

    func dnssecPrefetch(_ name: String, type: RRType) {
        let key = CacheKey(name: name, type: type.rawValue, dnsClass: RRClass.in.rawValue)
        if case .fresh(let answer, _) = cache.lookup(key, optimistic: false, counting: false, electRefresh: false),
            answer.payload?.dnssecOK ?? false
        {
            return
        }
        _ = upstreamTask(for: key, name: name, type: type, dnssecOK: true, isRefresh: false)
    }
}
