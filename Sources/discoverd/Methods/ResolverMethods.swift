import DiscoverAPI
import Foundation
import Logging
import Resolver

/// `io.discoverd.Resolver`: the varlink face of ``DNSResolver``.
enum ResolverMethods {
    static func register(into routes: inout RouteTable, resolver: DNSResolver, state: DaemonState) {
        // Optimistic DNS can be switched off for the whole daemon; a caller can only switch it off further.
        @Sendable func optimistic(_ requested: Bool?) -> Bool { (requested ?? true) && state.configuration.optimistic }

        routes.register(Methods.resolveHTTPS) { parameters, context in
            let port = parameters.port ?? 443
            guard context.more else {
                return try await mapErrors {
                    try await resolver.resolveHTTPS(parameters.name, port: port, optimistic: optimistic(parameters.optimistic))
                }.wire
            }
            // With more: a stale answer, then the refreshed one. Hold each reply until the next one shows whether
            // it is the last.
            var held: ResolveHTTPSReply?
            do {
                for try await resolution in resolver.resolveHTTPSUpdates(
                    parameters.name, port: port, optimistic: optimistic(parameters.optimistic))
                {
                    if let held { try context.send(held) }
                    held = resolution.wire
                }
            } catch let error as ResolverError {
                // The stale answer is still useful: deliver it, then say why no fresh one follows.
                if let held { try context.send(held) }
                throw error.varlink
            }
            guard let held else { throw VarlinkError.resolverTimeout }
            return held
        }

        routes.register(Methods.resolveSVCB) { parameters, _ in
            try await mapErrors {
                try await resolver.resolveSVCB(
                    parameters.name, port: parameters.port, optimistic: optimistic(parameters.optimistic))
            }.wire
        }

        routes.register(Methods.resolveAddresses) { parameters, _ in
            let family: AddressFamilies = switch parameters.family ?? .any {
            case .any: .any
            case .ipv4: .ipv4
            case .ipv6: .ipv6
            }
            let resolution = try await mapErrors {
                try await resolver.resolveAddresses(parameters.name, family: family, optimistic: optimistic(parameters.optimistic))
            }
            return ResolveAddressesReply(
                name: resolution.name, addresses: resolution.addresses, source: resolution.source.wire,
                ttl: Int(resolution.ttl),
                timing: Timing(attempts: resolution.attempts, milliseconds: resolution.elapsedMilliseconds))
        }

        routes.register(Methods.connectionPlan) { parameters, context in
            let resolution = try await mapErrors {
                try await resolver.connectionPlan(
                    host: parameters.host, port: parameters.port ?? 443, optimistic: optimistic(parameters.optimistic),
                    assumeH3: parameters.assumeH3 ?? false, caller: context.peer.uid)
            }
            let plan = resolution.plan
            return ConnectionPlanReply(
                host: plan.host, port: plan.port, h3: plan.h3, h3Source: plan.h3Source?.rawValue,
                endpoints: plan.endpoints.map {
                    PlanEndpoint(
                        address: $0.address, port: $0.port, transport: $0.transport.rawValue, alpn: $0.alpn,
                        target: $0.target, priority: $0.priority, ech: $0.ech)
                },
                source: resolution.source.wire,
                timing: Timing(attempts: resolution.attempts, milliseconds: resolution.elapsedMilliseconds))
        }

        routes.register(Methods.reportAltSvc) { parameters, context in
            // Root's evidence counts for everyone, another user's only for that user's plans.
            let report = try await mapErrors {
                try resolver.reportAltSvc(
                    origin: parameters.origin, header: parameters.header, reporter: context.peer.uid)
            }
            return ReportAltSvcReply(
                recorded: report.cleared || !report.recorded.isEmpty, cleared: report.cleared,
                alternatives: report.recorded.map(\.description),
                ignored: report.ignored.map {
                    IgnoredAlternative(alternative: $0.alternative.description, reason: $0.reason)
                },
                scope: report.scope == .everyone ? .everyone : .reporter)
        }

        routes.register(Methods.flush) { parameters, context in
            try context.requirePrivilege(group: state.configuration.adminGroup)
            return FlushReply(flushed: resolver.flush(parameters.name))
        }
    }

    /// Runs a resolution, turning ``ResolverError`` into the varlink errors of API.md.
    static func mapErrors<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as ResolverError {
            throw error.varlink
        }
    }
}

extension ResolverError {
    /// The varlink error of API.md for this error.
    var varlink: VarlinkError {
        switch code {
        case .noSuchName: return .noSuchName(name)
        case .timeout:
            return .resolverTimeout(name: name.isEmpty ? nil : name, servers: Set(attempts.map(\.server)).sorted())
        case .upstreamFailure:
            let server = attempts.last { $0.rcode == rcode }?.server ?? attempts.last?.server
            return .upstreamFailure(rcode: rcode ?? "SERVFAIL", name: name, server: server)
        default: return .invalidDNSName(name, reason: reason ?? "invalid")
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

extension Timing {
    init(attempts: [QueryAttempt], milliseconds: Double) {
        self.init(
            totalMs: (milliseconds * 1000).rounded() / 1000,
            queries: attempts.map {
                QueryTiming(
                    name: $0.name, type: "\($0.type)", server: $0.server, transport: $0.transport.rawValue,
                    ms: ($0.milliseconds * 1000).rounded() / 1000, rcode: $0.rcode)
            })
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
            timing: Timing(attempts: attempts, milliseconds: elapsedMilliseconds), note: note)
    }
}
