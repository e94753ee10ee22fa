// Wire types of the io.discoverd.Resolver interface (docs/API.md).

/// Where an answer came from.
/// The DNSSEC state of an answer (docs/DNSSEC.md): `secure` (validated from a trust anchor), `insecure` (proven
/// unsigned, or not validated), `bogus` (validation failed: only seen on answers served with CD), `indeterminate`
/// (secure data served from expired cache, not proven now).
public enum DNSSECStatus: String, Codable, Sendable {
    case secure, insecure, bogus, indeterminate
}

/// Why a connection plan's ECH configurations can be trusted (docs/DNSSEC.md): `dnssec` (the HTTPS answers were
/// validated secure), `encryptedTransport` (they came over DoT or DoH with a verified certificate), `none`
/// (neither: anyone on the path could have altered or removed them).
public enum ECHAuthenticationStatus: String, Codable, Sendable {
    case dnssec
    case encryptedTransport
    case none
}

public enum AnswerSource: String, Codable, Sendable {
    /// A fresh cache entry.
    case cache
    /// An expired entry served under optimistic DNS while a refresh is in flight.
    case expiredCache
    /// Fetched from an upstream for this call.
    case network
}

/// One upstream query made for a call.
public struct QueryTiming: Codable, Equatable, Sendable {
    public var name: String
    public var type: String
    public var server: String
    /// `udp` or `tcp`.
    public var transport: String
    public var ms: Double
    /// The response code, e.g. `NOERROR`, or `TIMEOUT` when none came.
    public var rcode: String

    public init(name: String, type: String, server: String, transport: String, ms: Double, rcode: String) {
        self.name = name
        self.type = type
        self.server = server
        self.transport = transport
        self.ms = ms
        self.rcode = rcode
    }
}

extension QueryTiming: JSONWritable {
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("name", name)
        writer.field("type", type)
        writer.field("server", server)
        writer.field("transport", transport)
        writer.field("ms", ms)
        writer.field("rcode", rcode)
        writer.endObject()
    }
}

/// The resolution half of an establishment report.
public struct Timing: Codable, Equatable, Sendable {
    public var totalMs: Double
    /// Only queries made for this call; empty when answered from cache.
    public var queries: [QueryTiming]

    public init(totalMs: Double, queries: [QueryTiming] = []) {
        self.totalMs = totalMs
        self.queries = queries
    }
}

extension Timing: JSONWritable {
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.staticKey("totalMs")
        writer.double(totalMs)
        writer.staticKey("queries")
        writer.beginArray()
        for query in queries { query.write(to: &writer) }
        writer.endArray()
        writer.endObject()
    }
}

/// An SvcParam the daemon does not interpret, with its raw value.
public struct UnknownSvcParam: Codable, Equatable, Sendable {
    public var key: Int
    /// Base64 of the value bytes.
    public var value: String

    public init(key: Int, value: String) {
        self.key = key
        self.value = value
    }
}

extension UnknownSvcParam: JSONWritable {
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("key", key)
        writer.field("value", value)
        writer.endObject()
    }
}

/// A usable ServiceMode HTTPS/SVCB binding after RFC 9460 processing.
public struct ServiceBinding: Codable, Equatable, Sendable {
    public var priority: Int
    public var target: String
    public var port: Int?
    public var alpn: [String]
    public var noDefaultAlpn: Bool
    public var ipv4hint: [String]
    public var ipv6hint: [String]
    /// Base64 ECHConfigList.
    public var ech: String?
    public var mandatory: [String]
    public var dohpath: String?
    public var unknown: [UnknownSvcParam]

    public init(
        priority: Int, target: String, port: Int? = nil, alpn: [String] = [], noDefaultAlpn: Bool = false,
        ipv4hint: [String] = [], ipv6hint: [String] = [], ech: String? = nil, mandatory: [String] = [],
        dohpath: String? = nil, unknown: [UnknownSvcParam] = []
    ) {
        self.priority = priority
        self.target = target
        self.port = port
        self.alpn = alpn
        self.noDefaultAlpn = noDefaultAlpn
        self.ipv4hint = ipv4hint
        self.ipv6hint = ipv6hint
        self.ech = ech
        self.mandatory = mandatory
        self.dohpath = dohpath
        self.unknown = unknown
    }
}

extension ServiceBinding: JSONWritable {
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("priority", priority)
        writer.field("target", target)
        writer.field("port", port)
        writer.field("alpn", strings: alpn)
        writer.field("noDefaultAlpn", noDefaultAlpn)
        writer.field("ipv4hint", strings: ipv4hint)
        writer.field("ipv6hint", strings: ipv6hint)
        writer.field("ech", ech)
        writer.field("mandatory", strings: mandatory)
        writer.field("dohpath", dohpath)
        writer.field("unknown", array: unknown)
        writer.endObject()
    }
}

/// Parameters of `ResolveHTTPS`.
public struct ResolveHTTPSParameters: VarlinkParameters, Equatable {
    public enum CodingKeys: String, CodingKey, CaseIterable { case name, port, optimistic }
    public var name: String
    public var port: Int?
    public var optimistic: Bool?

    public init(name: String, port: Int? = nil, optimistic: Bool? = nil) {
        self.name = name
        self.port = port
        self.optimistic = optimistic
    }
}

/// Reply of `ResolveHTTPS`.
public struct ResolveHTTPSReply: Codable, Equatable, Sendable {
    public var name: String
    /// `_PORT._https.NAME` for ports other than 443.
    public var queryName: String
    public var aliasChain: [String]
    public var records: [ServiceBinding]
    public var h3: Bool
    public var source: AnswerSource
    public var ttl: Int
    public var staleSeconds: Int?
    public var timing: Timing
    /// Why the records found were set aside or some were ignored (alias loop, malformed RRset, a mandatory key
    /// this client does not support); absent when every record was used.
    public var note: String?
    /// Only on the last reply of a `more` call whose first reply was `expiredCache`: true when the network
    /// confirmed the expired data (the reply repeats it), false when it changed (the reply carries the new data).
    public var confirmed: Bool?
    /// The DNSSEC state of the answers used.
    public var dnssec: DNSSECStatus

    public init(
        name: String, queryName: String, aliasChain: [String], records: [ServiceBinding], h3: Bool,
        source: AnswerSource, ttl: Int, staleSeconds: Int? = nil, timing: Timing, note: String? = nil,
        confirmed: Bool? = nil, dnssec: DNSSECStatus = .insecure
    ) {
        self.dnssec = dnssec
        self.name = name
        self.queryName = queryName
        self.aliasChain = aliasChain
        self.records = records
        self.h3 = h3
        self.source = source
        self.ttl = ttl
        self.staleSeconds = staleSeconds
        self.timing = timing
        self.note = note
        self.confirmed = confirmed
    }
}

extension ResolveHTTPSReply: JSONWritable {
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writeConstantHead(to: &writer)
        Self.writePerCall(to: &writer, source: source, ttl: ttl, staleSeconds: staleSeconds, timing: timing)
        writeConstantTail(to: &writer)
        writer.endObject()
    }

    /// The fields that are the same for every hit of a cache entry, before the per-call ones.
    func writeConstantHead(to writer: inout JSONWriter) {
        writer.field("name", name)
        writer.field("queryName", queryName)
        writer.field("aliasChain", strings: aliasChain)
        writer.field("records", array: records)
        writer.field("h3", h3)
    }

    /// The fields that change from call to call (``EncodedResolverReply`` patches them).
    static func writePerCall(
        to writer: inout JSONWriter, source: AnswerSource, ttl: Int, staleSeconds: Int?, timing: Timing
    ) {
        writer.staticKey("source")
        writer.string(source.rawValue)
        writer.staticKey("ttl")
        writer.int(ttl)
        if let staleSeconds {
            writer.staticKey("staleSeconds")
            writer.int(staleSeconds)
        }
        writer.staticKey("timing")
        timing.write(to: &writer)
    }

    /// The constant fields after the per-call ones.
    func writeConstantTail(to writer: inout JSONWriter) {
        writer.field("note", note)
        if let confirmed { writer.field("confirmed", confirmed) }
        writer.field("dnssec", dnssec.rawValue)
    }
}

/// Parameters of `ResolveSVCB`, the same as `ResolveHTTPS`'s: `name` carries its scheme prefix (e.g.
/// `_dns.resolver.example`), and `port`, when given, makes the query name `_PORT.NAME` (RFC 9460 §2.3). The reply
/// is a ``ResolveHTTPSReply``.
public typealias ResolveSVCBParameters = ResolveHTTPSParameters

/// Address family filter.
public enum AddressFamily: String, Codable, Sendable {
    case any, ipv4, ipv6
}

/// Parameters of `ResolveAddresses`.
public struct ResolveAddressesParameters: VarlinkParameters, Equatable {
    public enum CodingKeys: String, CodingKey, CaseIterable { case name, family, optimistic }
    public var name: String
    public var family: AddressFamily?
    public var optimistic: Bool?

    public init(name: String, family: AddressFamily? = nil, optimistic: Bool? = nil) {
        self.name = name
        self.family = family
        self.optimistic = optimistic
    }
}

/// Reply of `ResolveAddresses`.
public struct ResolveAddressesReply: Codable, Equatable, Sendable {
    public var name: String
    public var addresses: [String]
    public var source: AnswerSource
    public var ttl: Int
    public var timing: Timing
    /// As in ``ResolveHTTPSReply/confirmed``: only on the last reply of a `more` call after an expired answer.
    public var confirmed: Bool?
    /// The DNSSEC state of the A and AAAA answers.
    public var dnssec: DNSSECStatus

    public init(
        name: String, addresses: [String], source: AnswerSource, ttl: Int, timing: Timing, confirmed: Bool? = nil,
        dnssec: DNSSECStatus = .insecure
    ) {
        self.dnssec = dnssec
        self.name = name
        self.addresses = addresses
        self.source = source
        self.ttl = ttl
        self.timing = timing
        self.confirmed = confirmed
    }
}

extension ResolveAddressesReply: JSONWritable {
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writeConstantHead(to: &writer)
        // The same per-call fields as ResolveHTTPS, without staleSeconds.
        ResolveHTTPSReply.writePerCall(to: &writer, source: source, ttl: ttl, staleSeconds: nil, timing: timing)
        writeConstantTail(to: &writer)
        writer.endObject()
    }

    /// The fields that are the same for every hit of the same cache entries (``EncodedResolverReply``).
    func writeConstantHead(to writer: inout JSONWriter) {
        writer.field("name", name)
        writer.field("addresses", strings: addresses)
    }

    /// The constant fields after the per-call ones.
    func writeConstantTail(to writer: inout JSONWriter) {
        if let confirmed { writer.field("confirmed", confirmed) }
        writer.field("dnssec", dnssec.rawValue)
    }
}

/// Parameters of `ConnectionPlan`.
public struct ConnectionPlanParameters: VarlinkParameters, Equatable {
    public enum CodingKeys: String, CodingKey, CaseIterable { case host, port, optimistic, assumeH3 }
    public var host: String
    public var port: Int?
    public var optimistic: Bool?
    public var assumeH3: Bool?

    public init(host: String, port: Int? = nil, optimistic: Bool? = nil, assumeH3: Bool? = nil) {
        self.host = host
        self.port = port
        self.optimistic = optimistic
        self.assumeH3 = assumeH3
    }
}

/// One endpoint of a connection plan.
public struct PlanEndpoint: Codable, Equatable, Sendable {
    public var address: String
    public var port: Int
    /// `quic` or `tcp`.
    public var transport: String
    public var alpn: [String]
    public var target: String
    public var priority: Int
    public var ech: String?

    public init(
        address: String, port: Int, transport: String, alpn: [String], target: String, priority: Int,
        ech: String? = nil
    ) {
        self.address = address
        self.port = port
        self.transport = transport
        self.alpn = alpn
        self.target = target
        self.priority = priority
        self.ech = ech
    }
}

extension PlanEndpoint: JSONWritable {
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("address", address)
        writer.field("port", port)
        writer.field("transport", transport)
        writer.field("alpn", strings: alpn)
        writer.field("target", target)
        writer.field("priority", priority)
        writer.field("ech", ech)
        writer.endObject()
    }
}

/// Reply of `ConnectionPlan`.
public struct ConnectionPlanReply: Codable, Equatable, Sendable {
    public var host: String
    public var port: Int
    public var h3: Bool
    /// `https`, `altsvc` or `assumed`.
    public var h3Source: String?
    /// In the order a Happy Eyeballs v3 client should try them.
    public var endpoints: [PlanEndpoint]
    public var source: AnswerSource
    public var timing: Timing
    /// The DNSSEC state of the HTTPS and address answers the plan used.
    public var dnssec: DNSSECStatus
    /// Whether the ECH configurations of the endpoints came from an authenticated answer, and how; absent when no
    /// endpoint has one.
    public var echAuthentication: ECHAuthenticationStatus?

    public init(
        host: String, port: Int, h3: Bool, h3Source: String?, endpoints: [PlanEndpoint], source: AnswerSource,
        timing: Timing, dnssec: DNSSECStatus = .insecure, echAuthentication: ECHAuthenticationStatus? = nil
    ) {
        self.dnssec = dnssec
        self.echAuthentication = echAuthentication
        self.host = host
        self.port = port
        self.h3 = h3
        self.h3Source = h3Source
        self.endpoints = endpoints
        self.source = source
        self.timing = timing
    }
}

extension ConnectionPlanReply: JSONWritable {
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("host", host)
        writer.field("port", port)
        writer.field("h3", h3)
        writer.field("h3Source", h3Source)
        writer.field("endpoints", array: endpoints)
        writer.field("source", source.rawValue)
        writer.field("timing", timing)
        writer.field("dnssec", dnssec.rawValue)
        writer.field("echAuthentication", echAuthentication?.rawValue)
        writer.endObject()
    }
}

/// Parameters of `ReportAltSvc`.
public struct ReportAltSvcParameters: VarlinkParameters, Equatable {
    public enum CodingKeys: String, CodingKey, CaseIterable { case origin, header }
    /// Like `https://example.com:443`.
    public var origin: String
    /// The Alt-Svc header value.
    public var header: String

    public init(origin: String, header: String) {
        self.origin = origin
        self.header = header
    }
}

/// An Alt-Svc alternative the daemon did not record, and why.
public struct IgnoredAlternative: Codable, Equatable, Sendable {
    /// The alternative as the header wrote it, e.g. `h3-29=":443"`.
    public var alternative: String
    public var reason: String

    public init(alternative: String, reason: String) {
        self.alternative = alternative
        self.reason = reason
    }
}

/// Reply of `ReportAltSvc`.
public struct ReportAltSvcReply: Codable, Equatable, Sendable {
    /// Whose plans the report affects.
    public enum Scope: String, Codable, Sendable {
        /// Root's reports count for every caller.
        case everyone
        /// Another user's reports count only for that user's own calls.
        case reporter
    }

    /// Whether the report changed what the daemon knows: usable alternatives stored, or `clear` applied.
    public var recorded: Bool
    /// Whether the header was `clear`.
    public var cleared: Bool
    /// The alternatives stored, e.g. `h3=":443"; ma=3600`.
    public var alternatives: [String]
    /// Alternatives a connection plan cannot use, with the reason.
    public var ignored: [IgnoredAlternative]
    public var scope: Scope

    public init(
        recorded: Bool, cleared: Bool = false, alternatives: [String], ignored: [IgnoredAlternative], scope: Scope
    ) {
        self.recorded = recorded
        self.cleared = cleared
        self.alternatives = alternatives
        self.ignored = ignored
        self.scope = scope
    }
}

/// Parameters of `Flush`.
public struct FlushParameters: VarlinkParameters, Equatable {
    public enum CodingKeys: String, CodingKey, CaseIterable { case name }
    /// Flush only this name; everything when nil.
    public var name: String?

    public init(name: String? = nil) { self.name = name }
}

/// Reply of `Flush`.
public struct FlushReply: Codable, Equatable, Sendable {
    public var flushed: Int
    public init(flushed: Int) { self.flushed = flushed }
}

/// The methods of `io.discoverd.Resolver`.
extension Methods {
    public static let resolveHTTPS = VarlinkMethod<ResolveHTTPSParameters, ResolveHTTPSReply>(
        "io.discoverd.Resolver.ResolveHTTPS")
    public static let resolveSVCB = VarlinkMethod<ResolveSVCBParameters, ResolveHTTPSReply>(
        "io.discoverd.Resolver.ResolveSVCB")
    public static let resolveAddresses = VarlinkMethod<ResolveAddressesParameters, ResolveAddressesReply>(
        "io.discoverd.Resolver.ResolveAddresses")
    public static let connectionPlan = VarlinkMethod<ConnectionPlanParameters, ConnectionPlanReply>(
        "io.discoverd.Resolver.ConnectionPlan")
    public static let reportAltSvc = VarlinkMethod<ReportAltSvcParameters, ReportAltSvcReply>(
        "io.discoverd.Resolver.ReportAltSvc")
    public static let flush = VarlinkMethod<FlushParameters, FlushReply>("io.discoverd.Resolver.Flush")
}
