import DiscoverAPI
import Foundation
import Logging
import NIOConcurrencyHelpers
import Resolver

/// `io.discoverd.Resolver`: the varlink face of ``DNSResolver``.
///
/// The routes here only unpack parameters and call the resolver; the domain-to-wire mapping and the error
/// conversion are in `ResolverWire.swift`.
public enum ResolverMethods {
    /// Settings of the interface that are not the resolver's own; changed live on reload.
    public final class Options: Sendable {
        private let box: NIOLockedValueBox<Bool>

        /// - Parameter optimistic: whether expired answers may be served at all (`[resolver] optimistic`).
        public init(optimistic: Bool) { box = NIOLockedValueBox(optimistic) }

        /// Optimistic DNS for the whole daemon; a caller can only switch it off further.
        public var optimistic: Bool {
            get { box.withLockedValue { $0 } }
            set { box.withLockedValue { $0 = newValue } }
        }
    }

    /// Registers every method of the interface.
    public static func register(
        into routes: inout RouteTable, resolver: DNSResolver, options: Options, access: AccessControl
    ) {
        @Sendable func optimistic(_ requested: Bool?) -> Bool { (requested ?? true) && options.optimistic }

        ResolverCacheHits.register(into: &routes, resolver: resolver, optimistic: optimistic)

        routes.register(Methods.resolveHTTPS) { parameters, context in
            let port = parameters.port ?? 443
            guard context.more else {
                return try await resolver.resolveHTTPS(
                    parameters.name, port: port, optimistic: optimistic(parameters.optimistic)
                ).wire
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
                throw error
            }
            guard let held else { throw VarlinkError.resolverTimeout }
            return held
        }

        routes.register(Methods.resolveSVCB) { parameters, _ in
            try await resolver.resolveSVCB(
                parameters.name, port: parameters.port, optimistic: optimistic(parameters.optimistic)
            ).wire
        }

        routes.register(Methods.resolveAddresses) { parameters, _ in
            try await resolver.resolveAddresses(
                parameters.name, family: (parameters.family ?? .any).domain,
                optimistic: optimistic(parameters.optimistic)
            ).wire
        }

        // Alt-Svc evidence is the caller's: root's counts for everyone, another user's only for that user.
        routes.register(Methods.connectionPlan) { parameters, context in
            try await resolver.connectionPlan(
                host: parameters.host, port: parameters.port ?? 443, optimistic: optimistic(parameters.optimistic),
                assumeH3: parameters.assumeH3 ?? false, caller: context.peer.uid
            ).wire
        }

        routes.register(Methods.reportAltSvc) { parameters, context in
            try resolver.reportAltSvc(origin: parameters.origin, header: parameters.header, reporter: context.peer.uid)
                .wire
        }

        routes.register(Methods.flush) { parameters, context in
            try await access.requireAdmin(context.peer)
            let flushed = resolver.flush(parameters.name)
            context.logAdminAction(
                "cache flushed", ["dns.name": "\(parameters.name ?? "(all)")", "flushed": "\(flushed)"])
            return FlushReply(flushed: flushed)
        }
    }
}
