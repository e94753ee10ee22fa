import DNSCore

// `indirect`: the cache dictionary stores one pointer per bucket instead of the whole payload inline, so its empty
// buckets (a hashed table keeps a quarter or more free) cost 8 bytes, not the size of a CachedRRset.
/// What the cache holds for a key: a positive answer or a negative one (RFC 2308).
public indirect enum CacheAnswer<Value: Sendable & Codable>: Sendable {
    /// The name and type exist; `Value` is the caller's parsed answer.
    case positive(Value)
    /// The name does not exist (RCODE 3, RFC 2308 §2.1). The value, when present, holds what the DNS stub
    /// needs to answer it again: the SOA of the authority section (RFC 2308 §3).
    case nxdomain(Value?)
    /// The name exists but has no records of the type (RFC 2308 §2.2); the value as for `nxdomain`.
    case nodata(Value?)

    /// Whether this is a negative answer (NXDOMAIN or NODATA).
    public var isNegative: Bool {
        if case .positive = self { return false }
        return true
    }

    /// The positive value, or nil for a negative answer.
    public var value: Value? {
        if case .positive(let value) = self { return value }
        return nil
    }

    /// The value whatever the kind: the records of a positive answer, the authority data of a negative one.
    public var payload: Value? {
        switch self {
        case .positive(let value): value
        case .nxdomain(let value), .nodata(let value): value
        }
    }

    /// A negative answer without authority data.
    public static var nxdomain: CacheAnswer { .nxdomain(nil) }
    /// A negative answer without authority data.
    public static var nodata: CacheAnswer { .nodata(nil) }
}

extension CacheAnswer: Equatable where Value: Equatable {}

extension CacheAnswer: Codable {
    private enum CodingKeys: String, CodingKey {
        case kind
        case value
    }

    private enum Kind: String, Codable {
        case positive
        case nxdomain
        case nodata
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        switch try container.decode(Kind.self, forKey: .kind) {
        case .positive: self = .positive(try container.decode(Value.self, forKey: .value))
        case .nxdomain: self = .nxdomain(try container.decodeIfPresent(Value.self, forKey: .value))
        case .nodata: self = .nodata(try container.decodeIfPresent(Value.self, forKey: .value))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .positive(let value):
            try container.encode(Kind.positive, forKey: .kind)
            try container.encode(value, forKey: .value)
        case .nxdomain(let value):
            try container.encode(Kind.nxdomain, forKey: .kind)
            try container.encodeIfPresent(value, forKey: .value)
        case .nodata(let value):
            try container.encode(Kind.nodata, forKey: .kind)
            try container.encodeIfPresent(value, forKey: .value)
        }
    }
}

/// The result of ``OptimisticCache/lookup(_:optimistic:)``.
public enum CacheLookup<Value: Sendable & Codable>: Sendable {
    /// An unexpired entry; answer it with `remainingTTL` (seconds, rounded up, so at least 1).
    case fresh(CacheAnswer<Value>, remainingTTL: UInt32)

    /// An expired entry within the maximum stale time (RFC 8767).
    ///
    /// Answer it at once with `answerTTL` (RFC 8767 §4: 30 s by default) and source `expiredCache`.
    /// `staleSeconds` is how long ago it expired. When `shouldRefresh` is true this caller, and only this caller,
    /// must refresh the key and then call ``OptimisticCache/store(_:for:ttl:)`` or
    /// ``OptimisticCache/refreshFailed(_:)``.
    case stale(CacheAnswer<Value>, staleSeconds: UInt32, answerTTL: UInt32, shouldRefresh: Bool)

    /// Nothing usable: resolve from the network.
    case miss

    /// The cached answer, if any.
    public var answer: CacheAnswer<Value>? {
        switch self {
        case .fresh(let answer, _), .stale(let answer, _, _, _): answer
        case .miss: nil
        }
    }

    /// The TTL to put on the answer: the remaining TTL when fresh, the stale answer TTL when stale.
    public var ttl: UInt32? {
        switch self {
        case .fresh(_, let remaining): remaining
        case .stale(_, _, let answerTTL, _): answerTTL
        case .miss: nil
        }
    }

    /// Whether the caller was elected to refresh the key.
    public var shouldRefresh: Bool {
        if case .stale(_, _, _, true) = self { return true }
        return false
    }
}

extension CacheLookup: Equatable where Value: Equatable {}

/// Counters reported by `io.discoverd.Daemon.Status` under `cache`.
public struct CacheStatistics: Sendable, Equatable, Codable {
    /// Entries currently held (fresh and stale).
    public var entries: Int = 0
    /// Lookups answered fresh.
    public var hits: UInt64 = 0
    /// Lookups that found nothing usable.
    public var misses: UInt64 = 0
    /// Lookups answered from stale data.
    public var staleServed: UInt64 = 0
    /// Refreshes handed out to callers (`shouldRefresh == true`).
    public var refreshes: UInt64 = 0
    /// Refreshes reported failed with ``OptimisticCache/refreshFailed(_:)``.
    public var refreshFailures: UInt64 = 0

    /// Creates counters, all zero unless given.
    public init(
        entries: Int = 0,
        hits: UInt64 = 0,
        misses: UInt64 = 0,
        staleServed: UInt64 = 0,
        refreshes: UInt64 = 0,
        refreshFailures: UInt64 = 0
    ) {
        self.entries = entries
        self.hits = hits
        self.misses = misses
        self.staleServed = staleServed
        self.refreshes = refreshes
        self.refreshFailures = refreshFailures
    }
}
