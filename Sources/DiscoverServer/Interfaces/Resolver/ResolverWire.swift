import DNSCore
import DiscoverAPI
import Resolver

// The resolver's domain types as the wire types of io.discoverd.Resolver (docs/API.md), and its errors as the
// interface's varlink errors. This is the only place either mapping is written.

extension ResolverError: VarlinkErrorConvertible {
    /// `NoSuchName`, `Timeout`, `UpstreamFailure`, `InvalidName`, `TooManyQueries` or `NetworkError`, one per code.
    public var varlinkError: VarlinkError {
        switch code {
        case .noSuchName: return .noSuchName(name)
        case .timeout:
            return .resolverTimeout(
                name: name.isEmpty ? nil : name, servers: Set(attempts.map(\.server)).sorted(), reason: reason)
        case .upstreamFailure:
            let server = attempts.last { $0.rcode == rcode }?.server ?? attempts.last?.server
            if let dnssec {
                return .upstreamFailure(
                    rcode: rcode ?? "SERVFAIL", name: name, server: server, ede: dnssec.ede ?? 6,
                    reason: dnssec.reason ?? reason)
            }
            return .upstreamFailure(
                rcode: rcode ?? "SERVFAIL", name: name, server: server, ede: upstreamError?.code,
                reason: upstreamError.flatMap { $0.text.isEmpty ? nil : $0.text })
        case .invalidName: return .invalidDNSName(name, reason: reason ?? "invalid")
        case .tooManyQueries: return .tooManyQueries(name: name, reason: reason ?? "too many queries in flight")
        case .networkError: return .networkError(name: name.isEmpty ? nil : name, reason: reason ?? "network error")
        default:
            // `Code` is extensible; a code added without a wire error here is reported as what it is, never passed
            // off as another error (ResolverAdapterTests checks every code of `Code.allCases`).
            return .internalError(reason: "resolver error \(code) has no varlink error: \(self)")
        }
    }
}

extension ResolutionSource {
    var wire: AnswerSource {
        switch self {
        case .cache: .cache
        case .expiredCache: .expiredCache
        case .network: .network
        }
    }
}

extension DNSSECState {
    var wire: DNSSECStatus {
        switch self {
        case .secure: .secure
        case .insecure: .insecure
        case .bogus: .bogus
        case .indeterminate: .indeterminate
        }
    }
}

extension AddressFamily {
    var domain: AddressFamilies {
        switch self {
        case .any: .any
        case .ipv4: .ipv4
        case .ipv6: .ipv6
        }
    }
}

extension Timing {
    init(attempts: [QueryAttempt], milliseconds: Double) {
        self.init(
            totalMs: Self.totalMs(milliseconds),
            queries: attempts.map {
                QueryTiming(
                    name: $0.name, type: "\($0.type)", server: $0.server, transport: $0.transport.rawValue,
                    ms: Self.totalMs($0.milliseconds), rcode: $0.rcode)
            })
    }

    /// Milliseconds as the wire gives them: rounded to microseconds.
    static func totalMs(_ milliseconds: Double) -> Double {
        (milliseconds * 1000).rounded() / 1000
    }
}

extension HTTPSResolution {
    var wire: ResolveHTTPSReply {
        ResolveHTTPSReply(
            name: name, queryName: queryName, aliasChain: aliasChain,
            records: bindings.map { binding in
                DiscoverAPI.ServiceBinding(
                    priority: binding.priority, target: binding.target, port: binding.port, alpn: binding.alpn,
                    noDefaultAlpn: binding.noDefaultAlpn, ipv4hint: binding.ipv4hint, ipv6hint: binding.ipv6hint,
                    ech: binding.ech, mandatory: binding.mandatory, dohpath: binding.dohpath,
                    unknown: binding.unknown.map { UnknownSvcParam(key: $0.key, value: $0.value) })
            },
            h3: h3, source: source.wire, ttl: Int(ttl), staleSeconds: staleSeconds.map(Int.init),
            timing: Timing(attempts: attempts, milliseconds: elapsedMilliseconds), note: note,
            confirmed: refresh.map { $0 == .confirmed }, dnssec: dnssec.wire)
    }
}

extension AltSvcReport {
    var wire: ReportAltSvcReply {
        ReportAltSvcReply(
            recorded: cleared || !recorded.isEmpty, cleared: cleared, alternatives: recorded.map(\.description),
            ignored: ignored.map { IgnoredAlternative(alternative: $0.alternative.description, reason: $0.reason) },
            scope: scope == .everyone ? .everyone : .reporter)
    }
}

extension AddressResolution {
    var wire: ResolveAddressesReply {
        ResolveAddressesReply(
            name: name, addresses: addresses, source: source.wire, ttl: Int(ttl),
            timing: Timing(attempts: attempts, milliseconds: elapsedMilliseconds),
            confirmed: refresh.map { $0 == .confirmed }, dnssec: dnssec.wire)
    }
}

extension PlanResolution {
    var wire: ConnectionPlanReply {
        ConnectionPlanReply(
            host: plan.host, port: plan.port, h3: plan.h3, h3Source: plan.h3Source?.rawValue,
            endpoints: plan.endpoints.map {
                PlanEndpoint(
                    address: $0.address, port: $0.port, transport: $0.transport.rawValue, alpn: $0.alpn,
                    target: $0.target, priority: $0.priority, ech: $0.ech)
            },
            source: source.wire, timing: Timing(attempts: attempts, milliseconds: elapsedMilliseconds),
            dnssec: dnssec.wire, echAuthentication: echAuthentication?.wire)
    }
}

extension ECHAuthentication {
    var wire: ECHAuthenticationStatus {
        switch self {
        case .dnssec: .dnssec
        case .encryptedTransport: .encryptedTransport
        case .unauthenticated: .none
        }
    }
}
