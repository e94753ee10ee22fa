import DNSCore
import Resolver

/// The records of one (name, type) and how long they stay valid.
public struct RecordSet: Hashable, Sendable {
    /// The records of exactly the asked type (CNAMEs in the answer are left out); empty for NXDOMAIN and NODATA.
    public var records: [ResourceRecord]
    /// Seconds until the answer expires (the negative TTL for an empty answer).
    public var ttl: UInt32

    public init(records: [ResourceRecord], ttl: UInt32) {
        self.records = records
        self.ttl = ttl
    }
}

/// Where wide-area DNS-SD gets records: the daemon's resolver, or a table in unit tests.
public protocol RecordSource: Sendable {
    /// The records of (name, type).
    /// - Parameters:
    ///   - name: lowercased absolute presentation name.
    ///   - fresh: true when the caller polls for changes: an expired cache entry is not good enough.
    /// - Throws: `timeout` or `lookupFailed`; a name that does not exist is an empty set, not an error.
    func records(_ name: String, type: RRType, fresh: Bool) async throws(WideAreaError) -> RecordSet
}

/// Records from the one optimistic cache of ``DNSResolver``: a cached answer when there is one, else the upstreams.
public struct ResolverRecordSource: RecordSource {
    let resolver: DNSResolver

    /// Reads through `resolver`.
    public init(resolver: DNSResolver) {
        self.resolver = resolver
    }

    public func records(_ name: String, type: RRType, fresh: Bool) async throws(WideAreaError) -> RecordSet {
        // A poll looks at the cache without serving stale data: an expired entry is fetched again, so changes are
        // seen when the TTL runs out. A first look takes what the optimistic cache has (RFC 8767).
        let answer: RecordAnswer
        if let cached = resolver.cachedRecords(name, type: type, optimistic: !fresh) {
            answer = cached
        } else {
            do {
                answer = try await resolver.fetchRecords(name, type: type)
            } catch {
                switch error.code {
                case .noSuchName: return RecordSet(records: [], ttl: 30)
                case .timeout: throw WideAreaError(.timeout, "\(name) \(type): no DNS server answered in time")
                default:
                    throw WideAreaError(.lookupFailed, "\(name) \(type): \(error.description)", rcode: error.rcode)
                }
            }
        }
        let records = answer.answer.value?.records.filter { $0.type == type } ?? []
        return RecordSet(records: records, ttl: answer.ttl)
    }
}
