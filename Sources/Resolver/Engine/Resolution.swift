import DNSCore

/// Where an answer came from (docs/API.md `source`).
public enum ResolutionSource: String, Sendable, Codable, Hashable {
    /// Every record came from fresh cache entries.
    case cache
    /// Some record came from an expired entry served under optimistic DNS; a refresh is in flight.
    case expiredCache
    /// Some record was fetched from an upstream for this call, none was stale.
    case network
}

/// Which sources contributed to an answer: three bits, no allocation on a cache hit.
struct SourceSet: OptionSet, Sendable {
    let rawValue: UInt8
    static let cache = SourceSet(rawValue: 1)
    static let expiredCache = SourceSet(rawValue: 2)
    static let network = SourceSet(rawValue: 4)
}

/// The records of one name and type after following CNAMEs, with where they came from.
struct Provenance: Sendable {
    var sources: SourceSet = []
    var ttl: UInt32 = .max
    var staleSeconds: UInt32?
    var attempts: [QueryAttempt] = []

    /// Adds a hop's attempts; the first hop's array is shared as it is (a miss's one upstream question), not copied
    /// into a new one.
    mutating func addAttempts(_ more: [QueryAttempt]) {
        if attempts.isEmpty { attempts = more } else { attempts += more }
    }

    /// Keys answered from expired cache: their refreshes are what a `more` caller waits for.
    var staleKeys: [CacheKey] = []
    /// How many cache entries were used (fresh or stale).
    var cacheLookups = 0
    /// The weakest DNSSEC state of the entries used (``DNSSECState/insecure`` when nothing was validated).
    var dnssec: DNSSECState?
    /// Whether every entry used came over an authenticated encrypted transport (nil: no entry yet).
    var authenticatedTransport: Bool?

    var source: ResolutionSource {
        if sources.contains(.expiredCache) { return .expiredCache }
        if sources.contains(.network) { return .network }
        return .cache
    }

    mutating func merge(_ other: Provenance) {
        sources.formUnion(other.sources)
        ttl = min(ttl, other.ttl)
        if let stale = other.staleSeconds { staleSeconds = max(staleSeconds ?? 0, stale) }
        attempts += other.attempts
        staleKeys += other.staleKeys
        cacheLookups += other.cacheLookups
        if let other = other.dnssec { dnssec = dnssec.map { $0.combined(with: other) } ?? other }
        if let other = other.authenticatedTransport {
            authenticatedTransport = (authenticatedTransport ?? true) && other
        }
    }

    /// Adds one entry's verdict (stale secure data is indeterminate: not proven now) and how it travelled.
    mutating func addDNSSEC(_ entry: CachedRRset?, stale: Bool) {
        authenticatedTransport = (authenticatedTransport ?? true) && (entry?.authenticatedTransport ?? false)
        let validation = entry?.validation
        var state = validation?.state ?? .insecure
        if stale && state == .secure { state = .indeterminate }
        dnssec = dnssec.map { $0.combined(with: state) } ?? state
    }

    /// What the API reports.
    var reportedDNSSEC: DNSSECState { dnssec ?? .insecure }

    var reportedTTL: UInt32 { ttl == .max ? 0 : ttl }
}

/// The HTTPS records of a name after RFC 9460 client processing.
public struct HTTPSResolution: Sendable, Hashable {
    /// The host name asked for, absolute and lowercased.
    public var name: String
    /// `NAME`, or `_PORT._https.NAME` for ports other than 443 (RFC 9460 §9.1).
    public var queryName: String
    /// Names followed from `queryName` (CNAMEs and AliasMode targets), in order.
    public var aliasChain: [String]
    /// Usable ServiceMode bindings in priority order; empty for NODATA, a malformed RRset, or AliasMode ".".
    public var bindings: [ServiceBinding]
    /// Any binding offers HTTP/3.
    public var h3: Bool
    /// Whose addresses to use when there are no bindings: the last alias target, else the host.
    public var fallbackTarget: String
    public var source: ResolutionSource
    /// Seconds the answer may be used: the smallest remaining TTL involved (30 when stale).
    public var ttl: UInt32
    /// How long ago the oldest stale entry expired, when `source` is `expiredCache`.
    public var staleSeconds: UInt32?
    /// Upstream queries made for this call.
    public var attempts: [QueryAttempt]
    public var elapsedMilliseconds: Double
    /// Why the RRset was set aside, when it was (malformed, alias loop, service unavailable).
    public var note: String?
    /// The weakest DNSSEC state of the answers used (docs/DNSSEC.md).
    public var dnssec: DNSSECState = .insecure
    /// On the answer that follows an expired one (``DNSResolver/resolveHTTPSUpdates(_:port:optimistic:)``): whether
    /// the network confirmed the expired data or changed it.
    public var refresh: RefreshOutcome? = nil
}

/// The fields of a resolution that the second answer of an optimistic `more` call sets.
protocol RefreshableResolution: Sendable {
    var source: ResolutionSource { get set }
    var staleSeconds: UInt32? { get set }
    var refresh: RefreshOutcome? { get set }
    var attempts: [QueryAttempt] { get set }
    var elapsedMilliseconds: Double { get set }
}

extension HTTPSResolution: RefreshableResolution {}
extension AddressResolution: RefreshableResolution {}

/// What the network said about an answer served from expired cache (draft-gakiwate-dnsop-optimistic-dns: the
/// fresh answer matters to the application only when it differs).
public enum RefreshOutcome: String, Sendable, Hashable {
    /// The fresh answer holds the same data as the expired one.
    case confirmed
    /// The fresh answer differs: use it instead.
    case changed
}

/// The addresses of a name.
public struct AddressResolution: Sendable, Hashable {
    public var name: String
    /// IPv6 first, then IPv4.
    public var addresses: [String]
    public var source: ResolutionSource
    public var ttl: UInt32
    public var staleSeconds: UInt32?
    public var attempts: [QueryAttempt]
    public var elapsedMilliseconds: Double
    /// On the answer that follows an expired one: confirmed or changed.
    public var refresh: RefreshOutcome? = nil
    /// The weaker DNSSEC state of the A and AAAA answers.
    public var dnssec: DNSSECState = .insecure
}

/// Which address families to resolve.
public enum AddressFamilies: String, Sendable, Hashable {
    case any, ipv4, ipv6
}

/// A connection plan with where its answers came from.
public struct PlanResolution: Sendable, Hashable {
    public var plan: ConnectionPlan
    public var source: ResolutionSource
    public var attempts: [QueryAttempt]
    public var elapsedMilliseconds: Double
    /// The weakest DNSSEC state of the HTTPS and address answers the plan used.
    public var dnssec: DNSSECState = .insecure
    /// Why the plan's ECH configurations can be trusted; nil when no endpoint has one.
    public var echAuthentication: ECHAuthentication? = nil
}

/// Whether the HTTPS answer a plan's ECH configurations came from was authenticated (issue #17), and how.
public enum ECHAuthentication: String, Sendable, Hashable, CaseIterable {
    /// Every HTTPS record used (aliases included) validated `secure`.
    case dnssec
    /// Not secure, but every one came over DNS over TLS or HTTPS with a verified certificate.
    case encryptedTransport
    /// Neither: anyone on the path to the upstream could have altered or removed it.
    case unauthenticated = "none"

    /// The rule, from the HTTPS answers' DNSSEC state and transport: secure beats transport.
    public static func of(dnssec: DNSSECState, authenticatedTransport: Bool) -> ECHAuthentication {
        if dnssec == .secure { return .dnssec }
        return authenticatedTransport ? .encryptedTransport : .unauthenticated
    }
}

/// Why a resolution failed; the codes map 1:1 onto the errors of `io.discoverd.Resolver`.
public struct ResolverError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CaseIterable, CustomStringConvertible {
        let name: String
        /// NXDOMAIN (`NoSuchName`).
        public static let noSuchName = Code(name: "noSuchName")
        /// No upstream answered in time (`Timeout`).
        public static let timeout = Code(name: "timeout")
        /// The upstream answered with an error code (`UpstreamFailure`).
        public static let upstreamFailure = Code(name: "upstreamFailure")
        /// The name (or origin, or Alt-Svc header) is not valid (`InvalidName`).
        public static let invalidName = Code(name: "invalidName")
        /// A limit on upstream work was reached (`TooManyQueries`): the question was not sent. ``reason`` says
        /// which limit.
        public static let tooManyQueries = Code(name: "tooManyQueries")
        /// No upstream could be reached as securely as `[resolver] encryption` demands (`NetworkError`): a TLS
        /// handshake or certificate failure, an unusable DoH reply, strict mode without an encrypted path.
        /// ``reason`` names the upstreams and the failure.
        public static let networkError = Code(name: "networkError")
        /// Every code, so a mapping can be checked for completeness.
        public static let allCases: [Code] = [
            .noSuchName, .timeout, .upstreamFailure, .invalidName, .tooManyQueries, .networkError,
        ]
        public var description: String { name }
    }

    public var code: Code
    /// The name concerned.
    public var name: String
    /// The response code, for `upstreamFailure`.
    public var rcode: String?
    /// Why the name is invalid, for `invalidName`.
    public var reason: String?
    /// Upstream queries made before failing.
    public var attempts: [QueryAttempt]
    /// For a bogus answer (`upstreamFailure`, rcode SERVFAIL): the verdict, its EDE and reason.
    public var dnssec: DNSSECValidation?
    /// For `upstreamFailure`: the Extended DNS Error the upstream's reply carried (RFC 8914), its own reason (a
    /// validating upstream's "DNSSEC Bogus", say); the first when it gave several.
    public var upstreamError: ExtendedDNSError?

    public init(
        code: Code, name: String, rcode: String? = nil, reason: String? = nil, attempts: [QueryAttempt] = [],
        dnssec: DNSSECValidation? = nil, upstreamError: ExtendedDNSError? = nil
    ) {
        self.dnssec = dnssec
        self.upstreamError = upstreamError
        self.code = code
        self.name = name
        self.rcode = rcode
        self.reason = reason
        self.attempts = attempts
    }

    public var description: String {
        switch code {
        case .noSuchName: return "\(name): no such name (NXDOMAIN)"
        case .timeout:
            return reason.map { "\(name): no upstream answered (\($0))" } ?? "\(name): no upstream answered in time"
        case .upstreamFailure:
            if dnssec != nil, let reason { return "\(name): \(reason)" }
            return "\(name): upstream answered \(rcode ?? "an error")" + (upstreamError.map { " (EDE \($0))" } ?? "")
        case .tooManyQueries: return "\(name): not asked: \(reason ?? "too many queries in flight")"
        case .networkError: return "\(name): no secure path to an upstream: \(reason ?? "network error")"
        default: return "\(name): \(reason ?? "invalid")"
        }
    }
}

/// What the cache stores for one name and type: the answer section as received (CNAMEs included) and, for
/// negative answers, the authority section (the SOA, RFC 2308 §3).
///
/// Both sections are also kept encoded (``wire``), so the DNS stub answers a hit by copying bytes and patching
/// TTLs instead of encoding records again; the encoding is derived, never persisted.
///
/// Immutable, and a class: a miss hands its answer through the cache, the walk's steps and the reply, and a copy
/// of a struct of six references cost six reference counts each time (16 copies a DoT miss, BENCHMARKS.md round
/// 10); equality and hashing are by value, as before.
public final class CachedRRset: Sendable, Codable, Hashable {
    /// The answer section as received.
    public let records: [ResourceRecord]
    /// The authority section kept for negative answers (the SOA); empty for positive ones.
    public let authority: [ResourceRecord]
    /// The sections in wire format with the offsets of their TTL fields.
    public let wire: EncodedSections
    /// The upstream was asked with the DO bit (RFC 3225), so the RRSIGs and NSEC proofs it sent are here; an
    /// entry without them is fetched again for a client that sets DO.
    public let dnssecOK: Bool
    /// What hits derived from this entry (processed records, encoded replies); new for every stored answer.
    public let memo = CacheEntryMemo()
    /// The DNSSEC verdict, computed once when the answer was stored (docs/DNSSEC.md); nil when not validated.
    public let validation: DNSSECValidation?
    /// It came over DNS over TLS or HTTPS with a verified certificate (``DNSExchange/authenticatedTransport``).
    public let authenticatedTransport: Bool

    public init(
        records: [ResourceRecord], authority: [ResourceRecord] = [], dnssecOK: Bool = false,
        validation: DNSSECValidation? = nil, authenticatedTransport: Bool = false
    ) {
        self.records = records
        self.authority = authority
        self.dnssecOK = dnssecOK
        self.validation = validation
        self.authenticatedTransport = authenticatedTransport
        self.wire = EncodedSections(answer: records, authority: authority)
    }

    /// The same data with storage shared (arrays are copy-on-write) and a memo of its own: what a negative answer
    /// of a zone repeats for every name (its SOA) is kept once, while hits derived per entry stay per entry.
    public init(sharingDataOf other: CachedRRset, validation: DNSSECValidation?? = nil) {
        self.records = other.records
        self.authority = other.authority
        self.dnssecOK = other.dnssecOK
        self.wire = other.wire
        self.validation = validation ?? other.validation
        self.authenticatedTransport = other.authenticatedTransport
    }

    private enum CodingKeys: String, CodingKey { case records, authority, dnssecOK, validation, authenticatedTransport }

    public convenience init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            records: try container.decode([ResourceRecord].self, forKey: .records),
            authority: try container.decodeIfPresent([ResourceRecord].self, forKey: .authority) ?? [],
            dnssecOK: try container.decodeIfPresent(Bool.self, forKey: .dnssecOK) ?? false,
            validation: try container.decodeIfPresent(DNSSECValidation.self, forKey: .validation),
            authenticatedTransport: try container.decodeIfPresent(Bool.self, forKey: .authenticatedTransport) ?? false)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(records, forKey: .records)
        if !authority.isEmpty { try container.encode(authority, forKey: .authority) }
        if dnssecOK { try container.encode(dnssecOK, forKey: .dnssecOK) }
        if let validation { try container.encode(validation, forKey: .validation) }
        if authenticatedTransport { try container.encode(authenticatedTransport, forKey: .authenticatedTransport) }
    }

    public static func == (lhs: CachedRRset, rhs: CachedRRset) -> Bool {
        lhs.records == rhs.records && lhs.authority == rhs.authority && lhs.dnssecOK == rhs.dnssecOK
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(records)
        hasher.combine(authority)
    }
}
