import DNSCore

/// The rules of the optimistic cache. Defaults follow RFC 8767 and RFC 2308.
public struct CachePolicy: Sendable, Equatable {
    /// The TTL put on records answered from stale data.
    ///
    /// RFC 8767 §4: stale records are returned with a TTL greater than 0, recommended 30 seconds.
    public var staleAnswerTTL: UInt32 = 30

    /// How long after expiry an entry may still be served stale; past this it is dropped.
    ///
    /// RFC 8767 §5 suggests a maximum stale timer of 1 to 3 days; the optimistic-DNS draft recommends at most one
    /// week (``maximumMaxStale``). The default is 1 day.
    public var maxStale: UInt32 = 86_400

    /// The largest ``maxStale`` accepted: one week (draft-gakiwate-dnsop-optimistic-dns, "Expired Records
    /// Retention Period").
    public static let maximumMaxStale: UInt32 = 7 * 86_400

    /// After a failed refresh, the minimum time before another refresh of the same key is allowed.
    ///
    /// RFC 8767 §5 "failure recheck timer", recommended 30 seconds.
    public var refreshRetryInterval: UInt32 = 30

    /// After this long without ``OptimisticCache/store(_:for:ttl:)`` or ``OptimisticCache/refreshFailed(_:)``,
    /// a refresh in flight is presumed lost and the next stale lookup may start another.
    ///
    /// RFC 8767 §5 bounds a resolution by the "query resolution timer" (10 to 30 seconds).
    public var refreshTimeout: UInt32 = 30

    /// TTLs below this are raised to it (negative ones too, before ``maxNegativeTTL`` applies).
    /// A TTL of 0 is never raised: it is not cached at all.
    public var minTTL: UInt32 = 0

    /// Positive TTLs above this are lowered to it.
    ///
    /// RFC 8767 §4 recommends a cap "on the order of days to weeks"; the default is 1 day.
    public var maxTTL: UInt32 = 86_400

    /// Negative (NXDOMAIN, NODATA) TTLs above this are lowered to it.
    ///
    /// RFC 2308 §5: values of one to three hours work well; the default is 3 hours.
    public var maxNegativeTTL: UInt32 = 10_800

    /// Whether expired negative answers may be served optimistically, before the network is asked.
    ///
    /// draft-gakiwate-dnsop-optimistic-dns §"Cache Lookup with Expired Records": an expired NXDOMAIN/NODATA "is
    /// NOT returned" (a false "no such name" costs more than a brief wait), so the default is false. After the
    /// network failed, an expired negative answer is still served (RFC 8767), whatever this says.
    public var serveStaleNegative: Bool = false

    /// The maximum number of entries; past it the least recently used entries are evicted.
    public var maxEntries: Int = 100_000

    /// Domains never answered from stale data: a name matches when it equals an entry or is below it
    /// (`"bank.example"` covers `"www.bank.example"` but not `"notbank.example"`). Fresh answers are still cached.
    /// The root `"."` opts out every name.
    public var optOutDomains: [String] = []

    /// Creates the default policy (RFC 8767 values).
    public init() {}
}

/// A set of domains matched against a name and each of its ancestors, label by label.
struct DomainSuffixSet: Sendable {
    private let domains: Set<String>
    private let matchesAll: Bool

    init(_ domains: [String]) {
        self.domains = Set(domains.map(DomainName.normalize))
        self.matchesAll = self.domains.contains(".")
    }

    var isEmpty: Bool { domains.isEmpty }

    /// Whether the normalized absolute `name` equals a domain of the set or is a subdomain of one.
    func contains(_ name: String) -> Bool {
        if domains.isEmpty { return false }
        if matchesAll { return true }
        let bytes = Array(name.utf8)
        for start in DomainName.labelStarts(bytes) {
            // Only whole labels match: each start follows an unescaped dot (or is the name's start).
            if domains.contains(String(decoding: bytes[start...], as: UTF8.self)) { return true }
        }
        return false
    }
}
